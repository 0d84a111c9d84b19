#include "os/tier_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/files.h"

namespace tierckpt {
namespace {

class TierIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tc_tier_io_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Result<UniqueFd> fd = OpenDirNoFollow(dir_);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    dir_fd_ = std::move(fd).value();
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }
  std::string dir_;
  UniqueFd dir_fd_;
};

TEST_F(TierIoTest, CreateFileBeneathSizesExclusivelyAndMakesDirs) {
  const mode_t old = ::umask(0277);  // a umask that would leave the file read-only
  Result<UniqueFd> fd = CreateFileBeneath(dir_fd_.get(), "a/b/obj", 5000, dir_ + "/a/b/obj");
  ::umask(old);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  struct stat st;
  ASSERT_EQ(::stat((dir_ + "/a/b/obj").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5000);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<UniqueFd> again = CreateFileBeneath(dir_fd_.get(), "a/b/obj", 1, dir_ + "/a/b/obj");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  ASSERT_EQ(::stat((dir_ + "/a/b/obj").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 5000);  // the existing file is untouched
}

TEST_F(TierIoTest, CreateFileBeneathFollowsTheDirectoryNotItsPath) {
  // The directory is renamed away after its fd was opened: the file lands
  // in it, not in a new directory made at the old path.
  ASSERT_TRUE(MakeDirs(dir_ + "/step.partial").ok());
  Result<UniqueFd> step = OpenDirNoFollow(dir_ + "/step.partial");
  ASSERT_TRUE(step.ok());
  ASSERT_TRUE(RenamePath(dir_ + "/step.partial", dir_ + "/aside").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/step.partial").ok());
  ASSERT_TRUE(CreateFileBeneath(step->get(), "obj", 1, "obj").ok());
  EXPECT_TRUE(StatPath(dir_ + "/aside/obj")->exists);
  EXPECT_FALSE(StatPath(dir_ + "/step.partial/obj")->exists);
}

TEST_F(TierIoTest, CreateFileBeneathDoesNotFollowALinkOnTheWay) {
  ASSERT_TRUE(MakeDirs(dir_ + "/elsewhere").ok());
  ASSERT_EQ(::symlink((dir_ + "/elsewhere").c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_FALSE(CreateFileBeneath(dir_fd_.get(), "link/obj", 1, "link/obj").ok());
  EXPECT_FALSE(StatPath(dir_ + "/elsewhere/obj")->exists);
  EXPECT_FALSE(CreateFileBeneath(dir_fd_.get(), "../obj", 1, "../obj").ok());
}

TEST_F(TierIoTest, RenameBeneathMovesAndReplaces) {
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/src", "new", false).ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/d").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/d/x", "old", false).ok());
  ASSERT_TRUE(RenameBeneath(dir_ + "/src", dir_fd_.get(), "d/x", "d/x").ok());
  EXPECT_EQ(*ReadFileToString(dir_ + "/d/x", 10), "new");
  EXPECT_FALSE(RenameBeneath(dir_ + "/gone", dir_fd_.get(), "d/y", "d/y").ok());
}

TEST_F(TierIoTest, RemoveDirIfEmptyKeepsANonEmptyDir) {
  ASSERT_TRUE(MakeDirs(dir_ + "/full/sub").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/empty").ok());
  EXPECT_TRUE(RemoveDirIfEmpty(dir_ + "/full").ok());
  EXPECT_TRUE(StatPath(dir_ + "/full")->exists);
  EXPECT_TRUE(RemoveDirIfEmptyAt(dir_fd_.get(), "empty", dir_ + "/empty").ok());
  EXPECT_FALSE(StatPath(dir_ + "/empty")->exists);
  EXPECT_TRUE(RemoveDirIfEmpty(dir_ + "/missing").ok());
}

}  // namespace
}  // namespace tierckpt
