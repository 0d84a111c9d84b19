#include "os/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/mapping.h"

namespace tierckpt {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tc_files_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }
  std::string dir_;
};

TEST_F(FilesTest, AtomicWriteReadAndExclusive) {
  std::string p = JoinPath(dir_, "a/b/file");
  ASSERT_TRUE(MakeDirs(DirName(p)).ok());
  ASSERT_TRUE(WriteFileAtomic(p, "hello", /*durable=*/true).ok());
  auto r = ReadFileToString(p, 100);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "hello");
  EXPECT_EQ(WriteFileAtomic(p, "again", true, /*exclusive=*/true).code(), Code::kAlreadyExists);
  EXPECT_EQ(*ReadFileToString(p, 100), "hello");
  EXPECT_EQ(ReadFileToString(p, 2).status().code(), Code::kResourceExhausted);
  auto names = ListDir(DirName(p));
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, std::vector<std::string>{"file"});  // no tmp files left behind
}

TEST_F(FilesTest, RemoveFileStatesWhatAMissingFileMeans) {
  const std::string p = JoinPath(dir_, "f");
  ASSERT_TRUE(WriteFileAtomic(p, "x", false).ok());
  ASSERT_TRUE(RemoveFile(p, IfMissing::kFail).ok());
  EXPECT_FALSE(StatPath(p)->exists);
  EXPECT_TRUE(RemoveFile(p, IfMissing::kOk).ok());
  Status missing = RemoveFile(p, IfMissing::kFail, "removing the old");
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_EQ(missing.message().rfind("removing the old " + p + ": ", 0), 0u) << missing.message();
  // A directory is not a file: reported, never removed.
  const std::string d = JoinPath(dir_, "d");
  ASSERT_TRUE(MakeDirs(d).ok());
  EXPECT_FALSE(RemoveFile(d, IfMissing::kOk).ok());
  EXPECT_TRUE(StatPath(d)->is_dir);
  // A link goes, its target stays.
  const std::string link = JoinPath(dir_, "link");
  ASSERT_EQ(::symlink(d.c_str(), link.c_str()), 0);
  ASSERT_TRUE(RemoveFile(link, IfMissing::kFail).ok());
  EXPECT_EQ(StatNoFollow(link)->type, EntryType::kMissing);
  EXPECT_TRUE(StatPath(d)->is_dir);
}

TEST_F(FilesTest, WriteFileViaRenamesOnSuccessAndRemovesTheTemporaryOnFailure) {
  const std::string p = JoinPath(dir_, "out");
  const std::string tmp = p + ".partial";
  ASSERT_TRUE(WriteFileAtomic(p, "old", false).ok());
  Status failed = WriteFileVia(tmp, p, 0644, /*sync_data=*/true, [&](int fd) -> Status {
    TC_RETURN_IF_ERROR(PwriteAll(fd, "half", 4, 0, tmp));
    return Corruption("the source ended early");
  });
  EXPECT_EQ(failed.code(), Code::kCorruption);
  EXPECT_EQ(*ReadFileToString(p, 100), "old");
  EXPECT_FALSE(StatPath(tmp)->exists);
  Status ok = WriteFileVia(tmp, p, 0644, /*sync_data=*/true, [&](int fd) -> Status {
    TC_RETURN_IF_ERROR(TruncateFd(fd, 8, "sizing " + tmp));
    Result<FileInfo> info = StatFd(fd, tmp);
    if (!info.ok() || info->size != 8 || !info->is_regular) return Internal("StatFd after TruncateFd");
    return PwriteAll(fd, "new", 3, 0, tmp);
  });
  ASSERT_TRUE(ok.ok()) << ok.ToString();
  EXPECT_EQ(*ReadFileToString(p, 100), std::string("new\0\0\0\0\0", 8));
  EXPECT_FALSE(StatPath(tmp)->exists);
  EXPECT_EQ(StatFd(-1, "nothing").status().code(), Code::kIoError);
}

TEST_F(FilesTest, ErrorsNameThePath) {
  auto r = ReadFileToString(JoinPath(dir_, "nope"), 10);
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
}

TEST_F(FilesTest, PreadDetectsTruncation) {
  std::string p = JoinPath(dir_, "short");
  ASSERT_TRUE(WriteFileAtomic(p, "abc", false).ok());
  auto fd = OpenFile(p, O_RDONLY);
  ASSERT_TRUE(fd.ok());
  char buf[8];
  EXPECT_EQ(PreadExact(fd->get(), buf, 8, 0, p).code(), Code::kCorruption);
}

TEST_F(FilesTest, MappingSharesBytesWithFile) {
  std::string p = JoinPath(dir_, "m");
  auto fd = OpenFile(p, O_RDWR | O_CREAT);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(::ftruncate(fd->get(), 4096), 0);
  auto m = Mapping::Map(fd->get(), 4096, Mapping::Access::kReadWrite, true, p);
  ASSERT_TRUE(m.ok());
  m->data()[10] = 'z';
  char c = 0;
  ASSERT_TRUE(PreadExact(fd->get(), &c, 1, 10, p).ok());
  EXPECT_EQ(c, 'z');
  auto empty = Mapping::Map(fd->get(), 0, Mapping::Access::kReadOnly, false, p);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

TEST_F(FilesTest, PathHelpers) {
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(DirName("a/b/c"), "a/b");
  EXPECT_EQ(DirName("c"), ".");
  EXPECT_EQ(DirName("/c"), "/");
  EXPECT_TRUE(RemoveTree(JoinPath(dir_, "absent")).ok());
}

// ---- Trees that are not trusted: links are never followed ----

// An outside directory with a file, which no function below may touch.
class NoFollowTest : public FilesTest {
 protected:
  void SetUp() override {
    FilesTest::SetUp();
    outside_ = JoinPath(dir_, "outside");
    ASSERT_TRUE(MakeDirs(JoinPath(outside_, "sub")).ok());
    ASSERT_TRUE(WriteFileAtomic(JoinPath(outside_, "victim"), "keep", false).ok());
    ASSERT_TRUE(WriteFileAtomic(JoinPath(outside_, "sub/victim"), "keep", false).ok());
    tree_ = JoinPath(dir_, "tree");
    ASSERT_TRUE(MakeDirs(JoinPath(tree_, "real")).ok());
  }
  void Link(const std::string& target, const std::string& rel) {
    ASSERT_EQ(::symlink(target.c_str(), JoinPath(tree_, rel).c_str()), 0) << rel;
  }
  void ExpectOutsideIntact() {
    EXPECT_EQ(*ReadFileToString(JoinPath(outside_, "victim"), 100), "keep");
    EXPECT_EQ(*ReadFileToString(JoinPath(outside_, "sub/victim"), 100), "keep");
  }
  std::string outside_;
  std::string tree_;
};

TEST_F(NoFollowTest, RemoveTreeRemovesLinksNotTheirTargets) {
  Link(outside_, "dirlink");
  Link(JoinPath(outside_, "victim"), "filelink");
  Link(outside_, "real/nested");
  ASSERT_TRUE(RemoveTree(tree_).ok());
  EXPECT_EQ(StatNoFollow(tree_)->type, EntryType::kMissing);
  ExpectOutsideIntact();
  // The path itself a link: the link goes, the target stays.
  std::string top = JoinPath(dir_, "toplink");
  ASSERT_EQ(::symlink(outside_.c_str(), top.c_str()), 0);
  ASSERT_TRUE(RemoveTree(top).ok());
  EXPECT_EQ(StatNoFollow(top)->type, EntryType::kMissing);
  ASSERT_TRUE(RemoveTree(top + "/").ok());
  ExpectOutsideIntact();
}

TEST_F(NoFollowTest, ListDirAtTypesEntriesWithoutFollowing) {
  Link(outside_, "dirlink");
  Link(JoinPath(outside_, "victim"), "filelink");
  ASSERT_TRUE(WriteFileAtomic(JoinPath(tree_, "file"), "abc", false).ok());
  ASSERT_EQ(::mkfifo(JoinPath(tree_, "fifo").c_str(), 0600), 0);
  auto fd = OpenDirNoFollow(tree_);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto entries = ListDirAt(fd->get(), tree_);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 5u);
  EXPECT_EQ((*entries)[0].name, "dirlink");
  EXPECT_EQ((*entries)[0].type, EntryType::kSymlink);
  EXPECT_EQ((*entries)[1].name, "fifo");
  EXPECT_EQ((*entries)[1].type, EntryType::kOther);
  EXPECT_EQ((*entries)[2].name, "file");
  EXPECT_EQ((*entries)[2].type, EntryType::kRegular);
  EXPECT_EQ((*entries)[2].size, 3u);
  EXPECT_EQ((*entries)[3].type, EntryType::kSymlink);
  EXPECT_EQ((*entries)[4].name, "real");
  EXPECT_EQ((*entries)[4].type, EntryType::kDirectory);
  // A second listing of the same fd sees the same entries (no shared offset).
  EXPECT_EQ(ListDirAt(fd->get(), tree_)->size(), 5u);
  auto fifo = ReadFileBeneath(fd->get(), "fifo", 100, JoinPath(tree_, "fifo"));  // must not block
  EXPECT_EQ(fifo.status().code(), Code::kFailedPrecondition) << fifo.status().ToString();
}

TEST_F(NoFollowTest, OpeningThroughALinkIsRefusedAndNamesItsTarget) {
  Link(outside_, "dirlink");
  Link(outside_, "real/deeper");
  Link(JoinPath(outside_, "victim"), "filelink");
  auto top = OpenDirNoFollow(JoinPath(tree_, "dirlink"));
  EXPECT_EQ(top.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(top.status().message().find("is a symbolic link (to " + outside_ + ")"), std::string::npos)
      << top.status().ToString();
  EXPECT_EQ(OpenDirNoFollow(JoinPath(tree_, "dirlink") + "/").status().code(), Code::kFailedPrecondition);
  auto fd = OpenDirNoFollow(tree_);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(OpenDirAt(fd->get(), "dirlink", "x").status().code(), Code::kFailedPrecondition);
  // A link in any component of a relative path, the last one included.
  for (const char* rel : {"dirlink/victim", "real/deeper/victim", "real/deeper/sub/victim", "filelink"}) {
    auto opened = OpenBeneath(fd->get(), rel, O_RDONLY, rel);
    EXPECT_EQ(opened.status().code(), Code::kFailedPrecondition) << rel << ": " << opened.status().ToString();
    EXPECT_FALSE(ReadFileBeneath(fd->get(), rel, 100, rel).ok()) << rel;
  }
  EXPECT_EQ(StatBeneath(fd->get(), "filelink", "filelink")->type, EntryType::kSymlink);
  EXPECT_EQ(StatBeneath(fd->get(), "real/deeper/victim", "p").status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(StatBeneath(fd->get(), "real/absent/victim", "p")->type, EntryType::kMissing);
  EXPECT_EQ(OpenBeneath(fd->get(), "real/../dirlink", O_RDONLY, "p").status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(WriteFileAtomic(JoinPath(tree_, "real/f"), "data", false).ok());
  EXPECT_EQ(*ReadFileBeneath(fd->get(), "real/f", 100, "p"), "data");
  EXPECT_EQ(StatBeneath(fd->get(), "real/f", "p")->size, 4u);
  ExpectOutsideIntact();
}

TEST_F(NoFollowTest, WriteFileAtomicReplacesALinkInsteadOfWritingThroughIt) {
  Link(JoinPath(outside_, "victim"), "file");
  ASSERT_TRUE(WriteFileAtomic(JoinPath(tree_, "file"), "new", false).ok());
  EXPECT_EQ(StatNoFollow(JoinPath(tree_, "file"))->type, EntryType::kRegular);
  EXPECT_EQ(*ReadFileToString(JoinPath(tree_, "file"), 100), "new");
  Link(JoinPath(outside_, "victim"), "excl");
  EXPECT_EQ(WriteFileAtomic(JoinPath(tree_, "excl"), "new", false, /*exclusive=*/true).code(),
            Code::kAlreadyExists);
  ExpectOutsideIntact();
}

TEST_F(NoFollowTest, MakeDirAtAndRemoveTreeAtLeaveTargetsAlone) {
  Link(outside_, "dirlink");
  auto fd = OpenDirNoFollow(tree_);
  ASSERT_TRUE(fd.ok());
  auto made = MakeDirAt(fd->get(), "dirlink", 0700, JoinPath(tree_, "dirlink"));
  EXPECT_EQ(made.status().code(), Code::kFailedPrecondition) << made.status().ToString();
  EXPECT_EQ(LinkTargetAt(fd->get(), "dirlink"), outside_);
  ASSERT_TRUE(RemoveTreeAt(fd->get(), "dirlink", "dirlink").ok());
  EXPECT_EQ(StatAt(fd->get(), "dirlink", "dirlink")->type, EntryType::kMissing);
  auto fresh = MakeDirAt(fd->get(), "dirlink", 0700, "dirlink");
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  auto again = MakeDirAt(fd->get(), "dirlink", 0700, "dirlink");  // already there: opened
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(StatAt(fd->get(), "dirlink", "dirlink")->type, EntryType::kDirectory);
  ExpectOutsideIntact();
}

}  // namespace
}  // namespace tierckpt
