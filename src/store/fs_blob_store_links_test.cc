// Issue 37 item 6: a symbolic link planted at or below a filesystem durable
// base after the store was opened is never followed (decision 78). Each
// test opens the store on B, then plants a link to the outside directory X
// and checks the store refuses, and that X is untouched; each runs with
// openat2 and with the component walk of a kernel without it.

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "os/beneath.h"
#include "os/files.h"
#include "store/fs_blob_store.h"
#include "store/store_test_util.h"

namespace tierckpt {
namespace {

using testing_util::TempDir;

class FsBlobStoreLinksTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    UseOpenat2ForTesting(GetParam());
    base_ = tmp_.Sub("base");
    outside_ = tmp_.Sub("outside");
    ASSERT_TRUE(MakeDirs(outside_).ok());
    auto s = FsBlobStore::Open(base_, FsBlobOptions{.fsync = false});
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }
  void TearDown() override { UseOpenat2ForTesting(true); }
  void Put(const std::string& path, const std::string& data) {
    Status s = store_->Put(path, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // Replaces the directory at path by a link to the outside directory.
  void PlantLink(const std::string& path) {
    ASSERT_TRUE(RemoveTree(path).ok());
    ASSERT_EQ(::symlink(outside_.c_str(), path.c_str()), 0);
  }
  void ExpectRefused(const Status& s, const std::string& link) {
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
    EXPECT_NE(s.message().find("durable base " + base_ + ": " + link + " is a symbolic link"), std::string::npos)
        << s.ToString();
  }
  std::vector<std::string> Outside() { return *ListDir(outside_); }

  TempDir tmp_;
  std::string base_, outside_;
  std::unique_ptr<FsBlobStore> store_;
};

TEST_P(FsBlobStoreLinksTest, BaseReplacedByALinkIsNotWrittenThrough) {
  Put("ns/step/obj", "before");
  PlantLink(base_);
  ExpectRefused(store_->Put("ns/step/obj", "x", 1), base_);
  ExpectRefused(store_->Put("ns/step/obj", "x", 1, BlobPutOptions{.exclusive = true}), base_);
  ExpectRefused(store_->SyncParents({"ns/step/obj"}), base_);
  EXPECT_TRUE(Outside().empty());
}

TEST_P(FsBlobStoreLinksTest, NamespaceLinkIsNotWrittenThroughNorDeletedThrough) {
  Put("ns/step/obj", "before");
  PlantLink(base_ + "/ns");
  ExpectRefused(store_->Put("ns/step/obj", "x", 1), base_ + "/ns");
  EXPECT_TRUE(Outside().empty());
  // Files out there are not the store's to delete.
  ASSERT_TRUE(MakeDirs(outside_ + "/step").ok());
  ASSERT_TRUE(WriteFileAtomic(outside_ + "/step/obj", "theirs", false).ok());
  ExpectRefused(store_->DeleteBelow("ns/step/"), base_ + "/ns");
  ExpectRefused(store_->DeleteBelow("ns/"), base_ + "/ns");
  ExpectRefused(store_->Delete({"ns/step/obj"}), base_ + "/ns");
  EXPECT_TRUE(StatPath(outside_ + "/step/obj")->is_regular);
  EXPECT_EQ(StatNoFollow(base_ + "/ns")->type, EntryType::kSymlink);  // the link itself stays
}

TEST_P(FsBlobStoreLinksTest, DeeperDirectoryLinkIsRefused) {
  Put("ns/step/sub/obj", "before");
  PlantLink(base_ + "/ns/step/sub");
  ExpectRefused(store_->Put("ns/step/sub/deeper/obj", "x", 1), base_ + "/ns/step/sub");
  ExpectRefused(store_->SyncParents({"ns/step/sub/deeper/obj"}), base_ + "/ns/step/sub");
  EXPECT_TRUE(Outside().empty());
  ASSERT_TRUE(WriteFileAtomic(outside_ + "/obj", "theirs", false).ok());
  ExpectRefused(store_->Delete({"ns/step/sub/obj"}), base_ + "/ns/step/sub");
  EXPECT_TRUE(StatPath(outside_ + "/obj")->is_regular);
  // A delete of the step above removes the link as a link, not its target.
  ASSERT_TRUE(store_->DeleteBelow("ns/step/").ok());
  EXPECT_TRUE(StatPath(outside_ + "/obj")->is_regular);
}

TEST_P(FsBlobStoreLinksTest, ReadsAndListsDoNotGoThroughALink) {
  ASSERT_TRUE(WriteFileAtomic(outside_ + "/obj", "secret", false).ok());
  Put("ns/step/obj", "mine");
  PlantLink(base_ + "/ns/step");
  char buf[6];
  ExpectRefused(store_->Read("ns/step/obj", 0, buf, 6), base_ + "/ns/step");
  ExpectRefused(store_->ReadSmall("ns/step/obj", 100).status(), base_ + "/ns/step");
  ExpectRefused(store_->Size("ns/step/obj").status(), base_ + "/ns/step");
  ExpectRefused(store_->List("ns/step/").status(), base_ + "/ns/step");
  Result<BlobListing> above = store_->List("ns/");
  ASSERT_TRUE(above.ok()) << above.status().ToString();
  EXPECT_TRUE(above->blobs.empty());  // the link is not walked into
  // A link as the object file itself.
  ASSERT_TRUE(MakeDirs(base_ + "/ns/other").ok());
  ASSERT_EQ(::symlink((outside_ + "/obj").c_str(), (base_ + "/ns/other/obj").c_str()), 0);
  ExpectRefused(store_->ReadSmall("ns/other/obj", 100).status(), base_ + "/ns/other/obj");
  ExpectRefused(store_->Put("ns/other/obj", "x", 1), base_ + "/ns/other/obj");
  ExpectRefused(store_->Delete({"ns/other/obj"}), base_ + "/ns/other/obj");
  EXPECT_EQ(*ReadFileToString(outside_ + "/obj", 100), "secret");
}

TEST_P(FsBlobStoreLinksTest, LinkAboveTheBaseIsRefused) {
  // The base path was canonical at Open; a directory above it replaced by a
  // link afterwards is not followed either.
  const std::string parent = tmp_.Sub("p");
  auto s = FsBlobStore::Open(parent + "/base", FsBlobOptions{.fsync = false});
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(RemoveTree(parent).ok());
  ASSERT_TRUE(MakeDirs(outside_ + "/base").ok());
  ASSERT_EQ(::symlink(outside_.c_str(), parent.c_str()), 0);
  Status put = (*s)->Put("ns/obj", "x", 1);
  EXPECT_EQ(put.code(), Code::kPermissionDenied) << put.ToString();
  EXPECT_NE(put.message().find(parent + " is a symbolic link"), std::string::npos) << put.ToString();
  EXPECT_TRUE(ListDir(outside_ + "/base")->empty());
}

INSTANTIATE_TEST_SUITE_P(Openat2AndWalk, FsBlobStoreLinksTest, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Openat2" : "Walk"; });

}  // namespace
}  // namespace tierckpt
