// mounts_test.cc — FindMount and TmpfsHugePages against this machine's
// mount table (/proc and /dev/shm are there on every Linux this runs on).
#include "os/mounts.h"

#include <gtest/gtest.h>

namespace tierckpt {
namespace {

TEST(MountsTest, FindsTheMountHoldingAPath) {
  Result<MountOfPath> proc = FindMount("/proc/self/status");
  ASSERT_TRUE(proc.ok()) << proc.status().ToString();
  EXPECT_EQ(proc->target, "/proc");
  EXPECT_EQ(proc->fstype, "proc");
  EXPECT_EQ(TmpfsHugePages(*proc), "");  // not a tmpfs
  Result<MountOfPath> root = FindMount("/");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->target, "/");
}

TEST(MountsTest, ATmpfsWithoutTheOptionHasNoHugePages) {
  Result<MountOfPath> shm = FindMount("/dev/shm");
  ASSERT_TRUE(shm.ok()) << shm.status().ToString();
  ASSERT_EQ(shm->fstype, "tmpfs");
  const std::string mode = TmpfsHugePages(*shm);
  EXPECT_EQ(mode.empty(), false);
  if (shm->fs_options.find("huge=") == std::string::npos) {
    EXPECT_EQ(mode, "never");
  }
}

TEST(MountsTest, ReadsTheHugeOptionOfATmpfs) {
  EXPECT_EQ(TmpfsHugePages({"/t", "tmpfs", "rw,size=8g,huge=within_size,mode=755"}), "within_size");
  EXPECT_EQ(TmpfsHugePages({"/t", "tmpfs", "huge=always"}), "always");
  EXPECT_EQ(TmpfsHugePages({"/t", "tmpfs", "rw,size=8g"}), "never");
  EXPECT_EQ(TmpfsHugePages({"/t", "ext4", "rw,huge=always"}), "");
}

TEST(MountsTest, ARelativePathIsNotFound) {
  EXPECT_EQ(FindMount("relative/dir").status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace tierckpt
