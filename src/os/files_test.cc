#include "os/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
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

}  // namespace
}  // namespace tierckpt
