// file_lock.h: one holder at a time, the lock goes with its owner, and an
// entry planted as the lock file is reported rather than used.
#include "os/file_lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/files.h"

namespace tierckpt {
namespace {

class FileLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tc_file_lock_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    Result<UniqueFd> fd = OpenDirNoFollow(dir_);
    ASSERT_TRUE(fd.ok());
    dir_fd_ = std::move(fd).value();
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }
  Result<FileLock> Open(const std::string& name) {
    return FileLock::Open(dir_fd_.get(), name, JoinPath(dir_, name));
  }
  std::string dir_;
  UniqueFd dir_fd_;
};

TEST_F(FileLockTest, OneHolderAtATimeUntilItIsDestroyed) {
  Result<FileLock> first = Open("lock");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_FALSE(first->held());
  ASSERT_TRUE(*first->TryLockExclusive());
  EXPECT_TRUE(first->held());
  Result<FileLock> second = Open("lock");
  ASSERT_TRUE(second.ok());
  Result<bool> got = second->TryLockExclusive();
  ASSERT_TRUE(got.ok());
  EXPECT_FALSE(*got);
  EXPECT_FALSE(second->held());
  FileLock moved = std::move(first).value();  // the lock moves with its owner
  EXPECT_FALSE(*second->TryLockExclusive());
  moved = FileLock();  // released by closing
  EXPECT_TRUE(*second->TryLockExclusive());
  EXPECT_EQ(StatAt(dir_fd_.get(), "lock", "lock")->type, EntryType::kRegular);
}

TEST_F(FileLockTest, APlantedEntryIsReportedNotUsed) {
  const std::string victim = JoinPath(dir_, "victim");
  ASSERT_TRUE(WriteFileAtomic(victim, "keep", false).ok());
  ASSERT_EQ(::symlink(victim.c_str(), JoinPath(dir_, "link").c_str()), 0);
  ASSERT_EQ(::mkfifo(JoinPath(dir_, "fifo").c_str(), 0600), 0);
  ASSERT_TRUE(MakeDirs(JoinPath(dir_, "dir")).ok());
  for (const char* name : {"link", "fifo", "dir"}) {
    Result<FileLock> lock = Open(name);  // a FIFO must not hang here
    ASSERT_FALSE(lock.ok()) << name;
    EXPECT_EQ(lock.status().code(), Code::kFailedPrecondition) << name;
    EXPECT_NE(lock.status().message().find(JoinPath(dir_, name) + " is a "), std::string::npos)
        << lock.status().ToString();
    EXPECT_NE(lock.status().message().find("not a regular file"), std::string::npos);
  }
  EXPECT_NE(Open("link").status().message().find("symbolic link"), std::string::npos);
  EXPECT_EQ(*ReadFileToString(victim, 100), "keep");
  EXPECT_FALSE(FileLock().TryLockExclusive().ok());
}

}  // namespace
}  // namespace tierckpt
