#include "os/beneath.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "os/files.h"

namespace tierckpt {
namespace {

// Every test runs with openat2 and with the component walk of a kernel
// without it.
class BeneathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    UseOpenat2ForTesting(GetParam());
    char tmpl[] = "/tmp/tc_beneath_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    Result<std::string> dir = CanonicalPath(tmpl);
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    ASSERT_TRUE(MakeDirs(dir_ + "/root").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/elsewhere").ok());
  }
  void TearDown() override {
    UseOpenat2ForTesting(true);
    ASSERT_TRUE(RemoveTree(dir_).ok());
  }
  void Link(const std::string& target, const std::string& at) {
    ASSERT_EQ(::symlink(target.c_str(), at.c_str()), 0);
  }
  std::string dir_;
};

TEST_P(BeneathTest, RootWithALinkInItsPathIsRefused) {
  ASSERT_TRUE(OpenRootNoLinks(dir_ + "/root", false, 0755).ok());
  Link(dir_, dir_ + "/up");
  Result<UniqueFd> via = OpenRootNoLinks(dir_ + "/up/root", false, 0755);
  ASSERT_FALSE(via.ok());
  EXPECT_EQ(via.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(via.status().message().find(dir_ + "/up is a symbolic link"), std::string::npos)
      << via.status().ToString();
  Link(dir_ + "/elsewhere", dir_ + "/root2");
  Result<UniqueFd> made = OpenRootNoLinks(dir_ + "/root2/sub", true, 0755);
  EXPECT_EQ(made.status().code(), Code::kFailedPrecondition);
  EXPECT_FALSE(StatPath(dir_ + "/elsewhere/sub")->exists);
}

TEST_P(BeneathTest, ParentIsMadeAndReachedWithoutLinks) {
  Result<UniqueFd> root = OpenRootNoLinks(dir_ + "/root", false, 0755);
  ASSERT_TRUE(root.ok());
  Result<ParentDir> p = OpenParentNoLinks(root->get(), "a/b/obj", true, 0755, dir_ + "/root");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->leaf, "obj");
  ASSERT_TRUE(WriteFileViaAt(p->dir.get(), "obj.tmp", "obj", 0600, false, false, dir_ + "/root/a/b",
                             [](int fd) { return PwriteAll(fd, "x", 1, 0, "obj"); })
                  .ok());
  EXPECT_TRUE(StatPath(dir_ + "/root/a/b/obj")->is_regular);
  EXPECT_FALSE(StatPath(dir_ + "/root/a/b/obj.tmp")->exists);
  Status again = WriteFileViaAt(p->dir.get(), "obj.tmp2", "obj", 0600, false, true, dir_ + "/root/a/b",
                                [](int fd) { return PwriteAll(fd, "y", 1, 0, "obj"); });
  EXPECT_EQ(again.code(), Code::kAlreadyExists);
  EXPECT_FALSE(StatPath(dir_ + "/root/a/b/obj.tmp2")->exists);
  // A file where a directory is expected.
  EXPECT_EQ(OpenParentNoLinks(root->get(), "a/b/obj/x", true, 0755, dir_ + "/root").status().code(),
            Code::kAlreadyExists);
  EXPECT_EQ(OpenParentNoLinks(root->get(), "a/b/obj/x", false, 0755, dir_ + "/root").status().code(),
            Code::kNotFound);
  EXPECT_EQ(OpenParentNoLinks(root->get(), "a/c/x", false, 0755, dir_ + "/root").status().code(),
            Code::kNotFound);
  EXPECT_EQ(OpenParentNoLinks(root->get(), "a/../x", false, 0755, dir_ + "/root").status().code(),
            Code::kInvalidArgument);
}

TEST_P(BeneathTest, LinkBelowTheRootIsRefusedNotFollowed) {
  Result<UniqueFd> root = OpenRootNoLinks(dir_ + "/root", false, 0755);
  ASSERT_TRUE(root.ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/root/a").ok());
  Link(dir_ + "/elsewhere", dir_ + "/root/a/b");
  for (bool make : {false, true}) {
    Result<ParentDir> p = OpenParentNoLinks(root->get(), "a/b/c/obj", make, 0755, dir_ + "/root");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), Code::kFailedPrecondition);
    EXPECT_NE(p.status().message().find(dir_ + "/root/a/b is a symbolic link (to " + dir_ + "/elsewhere)"),
              std::string::npos)
        << p.status().ToString();
    Result<UniqueFd> d = OpenDirNoLinks(root->get(), "a/b", make, 0755, dir_ + "/root");
    EXPECT_EQ(d.status().code(), Code::kFailedPrecondition);
  }
  EXPECT_TRUE(ListDir(dir_ + "/elsewhere")->empty());
  // A link as the leaf: opened with O_NOFOLLOW, refused.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/elsewhere/secret", "s", false).ok());
  Link(dir_ + "/elsewhere/secret", dir_ + "/root/a/obj");
  Result<ParentDir> p = OpenParentNoLinks(root->get(), "a/obj", false, 0755, dir_ + "/root");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(OpenFileAt(p->dir.get(), p->leaf, O_RDONLY, 0, dir_ + "/root/a/obj", dir_ + "/root").status().code(),
            Code::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, BeneathTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Openat2" : "Walk"; });

}  // namespace
}  // namespace tierckpt
