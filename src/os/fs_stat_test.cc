// fs_stat.h: what StatFile/StatOpenFd report, the IfMissing rule, the
// messages naming the path, and the small metadata calls.
#include "os/fs_stat.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace tierckpt {
namespace {

class FsStatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tc_fs_stat_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }
  std::string dir_;
};

TEST_F(FsStatTest, AFileReportsSizeOwnerModeAndIdentity) {
  const std::string p = JoinPath(dir_, "f");
  ASSERT_TRUE(WriteFileAtomic(p, "hello", false).ok());
  ASSERT_EQ(::chmod(p.c_str(), 0640), 0);
  Result<FileStat> s = StatFile(p, Follow::kYes, IfMissing::kFail);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->type, EntryType::kRegular);
  EXPECT_EQ(s->size, 5u);
  EXPECT_EQ(s->mode, 0640u);
  EXPECT_EQ(s->uid, ::geteuid());
  EXPECT_EQ(s->nlink, 1u);
  EXPECT_GT(s->mtime_ns, 0);
  EXPECT_FALSE(s->is_socket);

  Result<UniqueFd> fd = OpenFile(p, O_RDONLY);
  ASSERT_TRUE(fd.ok());
  Result<FileStat> by_fd = StatOpenFd(fd->get(), "stat " + p);
  ASSERT_TRUE(by_fd.ok());
  EXPECT_EQ(by_fd->dev, s->dev);
  EXPECT_EQ(by_fd->ino, s->ino);
  ASSERT_EQ(::unlink(p.c_str()), 0);
  EXPECT_EQ(StatOpenFd(fd->get(), "stat " + p)->nlink, 0u);  // unlinked, still open
}

TEST_F(FsStatTest, FollowDecidesWhetherALinkIsLookedThrough) {
  const std::string target = JoinPath(dir_, "d");
  const std::string link = JoinPath(dir_, "l");
  ASSERT_TRUE(MakeDir(target, 0700).ok());
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(StatFile(link, Follow::kYes, IfMissing::kFail)->type, EntryType::kDirectory);
  EXPECT_EQ(StatFile(link, Follow::kNo, IfMissing::kFail)->type, EntryType::kSymlink);
  Result<std::string> to = ReadLink(link);
  ASSERT_TRUE(to.ok());
  EXPECT_EQ(*to, target);
  EXPECT_FALSE(ReadLink(target).ok());  // EINVAL: not a link
}

TEST_F(FsStatTest, AMissingPathFollowsIfMissingAndMessagesNameThePath) {
  const std::string p = JoinPath(dir_, "absent");
  Result<FileStat> ok = StatFile(p, Follow::kNo, IfMissing::kOk);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->type, EntryType::kMissing);
  Result<FileStat> fail = StatFile(p, Follow::kNo, IfMissing::kFail, "checking the socket path");
  ASSERT_FALSE(fail.ok());
  EXPECT_EQ(fail.status().code(), Code::kNotFound);
  EXPECT_NE(fail.status().message().find("checking the socket path " + p), std::string::npos)
      << fail.status().ToString();
  EXPECT_FALSE(StatOpenFd(-1, "stat nothing").ok());
}

TEST_F(FsStatTest, ASocketIsReportedAsOne) {
  const std::string p = JoinPath(dir_, "s");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM, 0));
  ASSERT_TRUE(fd.valid());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, p.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  Result<FileStat> s = StatFile(p, Follow::kNo, IfMissing::kFail);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->type, EntryType::kOther);
  EXPECT_TRUE(s->is_socket);
}

TEST_F(FsStatTest, MakeDirAcceptsWhatIsThereAndChmodChangesTheMode) {
  const std::string d = JoinPath(dir_, "d");
  ASSERT_TRUE(MakeDir(d, 0700).ok());
  EXPECT_TRUE(MakeDir(d, 0700).ok());  // EEXIST: the caller looks at what is there
  Status no_parent = MakeDir(JoinPath(dir_, "x/y"), 0700, "creating --root");
  EXPECT_EQ(no_parent.code(), Code::kNotFound);
  EXPECT_NE(no_parent.message().find("creating --root " + JoinPath(dir_, "x/y")), std::string::npos);
  ASSERT_TRUE(ChmodPath(d, 0750).ok());
  EXPECT_EQ(StatFile(d, Follow::kNo, IfMissing::kFail)->mode, 0750u);
  Result<UniqueFd> fd = OpenDirNoFollow(d);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(ChmodFd(fd->get(), 0700, "restricting d").ok());
  EXPECT_EQ(StatFile(d, Follow::kNo, IfMissing::kFail)->mode, 0700u);
  EXPECT_FALSE(ChmodPath(JoinPath(dir_, "absent"), 0700).ok());
}

TEST_F(FsStatTest, SpaceAndExecutables) {
  Result<FsSpace> space = StatFsSpace(dir_);
  ASSERT_TRUE(space.ok());
  EXPECT_GT(space->total_bytes, 0u);
  EXPECT_LE(space->free_bytes, space->total_bytes);
  EXPECT_FALSE(StatFsSpace(JoinPath(dir_, "absent")).ok());

  const std::string f = JoinPath(dir_, "tool");
  ASSERT_TRUE(WriteFileAtomic(f, "#!/bin/sh\n", false).ok());
  EXPECT_FALSE(IsExecutableFile(f));
  ASSERT_EQ(::chmod(f.c_str(), 0700), 0);
  EXPECT_TRUE(IsExecutableFile(f));
  EXPECT_FALSE(IsExecutableFile(dir_));  // a directory is searchable, not executable
}

}  // namespace
}  // namespace tierckpt
