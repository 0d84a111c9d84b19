// One suite, every BlobStore: the filesystem (temp dir), memory, and S3 on an
// in-process fake bucket (FakeS3) with small parts, so larger blobs go
// multipart and reads use parallel ranges.

#include <fcntl.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "os/files.h"
#include "s3/s3_client_test_util.h"
#include "store/fs_blob_store.h"
#include "store/mem_blob_store.h"
#include "store/s3_blob_store.h"
#include "store/store_test_util.h"
#include "testing/fake_s3.h"

namespace tierckpt {
namespace {

using testing_util::Pattern;
using testing_util::TempDir;

struct BlobFactory {
  std::string name;
  std::function<std::shared_ptr<BlobStore>(const std::string& scratch)> make;
};

void PrintTo(const BlobFactory& factory, std::ostream* os) { *os << factory.name; }

std::vector<BlobFactory> AllBlobStores() {
  return {
      {"Fs",
       [](const std::string& scratch) -> std::shared_ptr<BlobStore> {
         auto s = FsBlobStore::Open(JoinPath(scratch, "base"), FsBlobOptions{.fsync = false});
         EXPECT_TRUE(s.ok()) << s.status().ToString();
         return s.ok() ? std::shared_ptr<BlobStore>(std::move(s).value()) : nullptr;
       }},
      {"Mem",
       [](const std::string&) -> std::shared_ptr<BlobStore> { return std::make_shared<MemBlobStore>("t"); }},
      {"FakeS3",
       [](const std::string&) -> std::shared_ptr<BlobStore> {
         s3::S3Config config = s3::testing_util::TestConfig();
         config.part_size = 8192;
         config.multipart_threshold = 8192;
         return std::make_shared<S3BlobStore>(config, std::make_shared<s3::FakeS3>("bkt"),
                                              std::make_shared<s3::testing_util::MarkingSigner>(),
                                              s3::testing_util::InstantRetries());
       }},
  };
}

class BlobStoreConformance : public ::testing::TestWithParam<BlobFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make(tmp_.path());
    ASSERT_NE(store_, nullptr);
  }
  void Put(const std::string& path, const std::string& data) {
    Status s = store_->Put(path, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::string Get(const std::string& path) {
    auto size = store_->Size(path);
    if (!size.ok()) return "<" + size.status().ToString() + ">";
    std::string out(*size, '\0');
    Status s = store_->Read(path, 0, out.data(), out.size());
    return s.ok() ? out : "<" + s.ToString() + ">";
  }
  std::vector<std::string> Paths(const std::string& prefix) {
    auto listed = store_->List(prefix);
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    std::vector<std::string> out;
    if (listed.ok()) {
      for (const BlobInfo& b : listed->blobs) out.push_back(b.path + ":" + std::to_string(b.size));
    }
    return out;
  }

  TempDir tmp_;
  std::shared_ptr<BlobStore> store_;
};

TEST_P(BlobStoreConformance, PutReplacesWholeAndReadsRanges) {
  Put("a/b.bin", Pattern(20000, 1));  // multipart on S3
  EXPECT_EQ(Get("a/b.bin"), Pattern(20000, 1));
  Put("a/b.bin", "short");
  EXPECT_EQ(Get("a/b.bin"), "short");
  char buf[3];
  ASSERT_TRUE(store_->Read("a/b.bin", 1, buf, 3).ok());
  EXPECT_EQ(std::string(buf, 3), "hor");
  EXPECT_EQ(store_->Read("a/b.bin", 3, buf, 3).code(), Code::kCorruption);
  EXPECT_EQ(store_->Read("nope", 0, buf, 1).code(), Code::kNotFound);
  EXPECT_EQ(store_->Size("nope").status().code(), Code::kNotFound);
  Put("empty", "");
  EXPECT_EQ(*store_->Size("empty"), 0u);
  auto small = store_->ReadSmall("a/b.bin", 5);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(*small, "short");
  EXPECT_EQ(store_->ReadSmall("a/b.bin", 4).status().code(), Code::kResourceExhausted);
  EXPECT_EQ(store_->ReadSmall("nope", 4).status().code(), Code::kNotFound);
}

TEST_P(BlobStoreConformance, ExclusivePutsWinOnce) {
  Put("m", "x");
  BlobPutOptions exclusive{.exclusive = true};
  EXPECT_EQ(store_->Put("m", "y", 1, exclusive).code(), Code::kAlreadyExists);
  EXPECT_EQ(Get("m"), "x");
  EXPECT_TRUE(store_->Put("n", "z", 1, exclusive).ok());
  EXPECT_EQ(Get("n"), "z");
}

TEST_P(BlobStoreConformance, APathCannotBeABlobAndADirectory) {
  Put("a/b", "1");
  EXPECT_EQ(store_->Put("a", "2", 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->Put("a/b/c", "3", 1).code(), Code::kFailedPrecondition);
  std::vector<BlobBytes> clash = {{"x", "1", 1}, {"x/y", "2", 1}};
  EXPECT_EQ(store_->PutMany(clash, nullptr).code(), Code::kFailedPrecondition);
  for (const std::string& p : Paths("")) EXPECT_NE(p, "x/y:1");  // "x" may stay: put before the clash
  EXPECT_EQ(Get("a/b"), "1");
}

TEST_P(BlobStoreConformance, PutManyWritesEveryBlobAndStopsWhenCancelled) {
  const std::string big = Pattern(30000, 2), small = "s";
  std::vector<BlobBytes> blobs = {{"s/big", big.data(), big.size()}, {"s/small", small.data(), small.size()}};
  ASSERT_TRUE(store_->PutMany(blobs, nullptr).ok());
  EXPECT_EQ(Get("s/big"), big);
  EXPECT_EQ(Get("s/small"), small);
  std::vector<BlobBytes> more = {{"t/one", "1", 1}};
  EXPECT_EQ(store_->PutMany(more, [] { return true; }).code(), Code::kAborted);
  EXPECT_EQ(store_->Size("t/one").status().code(), Code::kNotFound);
}

TEST_P(BlobStoreConformance, ListsSortedWithSizesAndOneLevel) {
  Put("ns/step_1/b", "22");
  Put("ns/step_1/a/deep", "1");
  Put("ns/step_2/c", "333");
  Put("ns/top", "4444");
  Put("other/x", "5");
  Put("nsx/y", "6");  // not below "ns/"
  EXPECT_EQ(Paths("ns/"),
            (std::vector<std::string>{"ns/step_1/a/deep:1", "ns/step_1/b:2", "ns/step_2/c:3", "ns/top:4"}));
  auto level = store_->List("ns/", /*one_level=*/true);
  ASSERT_TRUE(level.ok()) << level.status().ToString();
  EXPECT_EQ(level->dirs, (std::vector<std::string>{"ns/step_1/", "ns/step_2/"}));
  ASSERT_EQ(level->blobs.size(), 1u);
  EXPECT_EQ(level->blobs[0].path, "ns/top");
  auto root = store_->List("", true);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->dirs, (std::vector<std::string>{"ns/", "nsx/", "other/"}));
  EXPECT_TRUE(Paths("absent/").empty());
}

TEST_P(BlobStoreConformance, DeletesPathsAndPrefixes) {
  Put("d/1", "1");
  Put("d/sub/2", "2");
  Put("e/3", "3");
  ASSERT_TRUE(store_->Delete({"d/1", "never-there"}).ok());
  EXPECT_EQ(Paths(""), (std::vector<std::string>{"d/sub/2:1", "e/3:1"}));
  ASSERT_TRUE(store_->DeleteBelow("d/").ok());
  ASSERT_TRUE(store_->DeleteBelow("absent/").ok());
  EXPECT_EQ(Paths(""), (std::vector<std::string>{"e/3:1"}));
  auto root = store_->List("", true);
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->dirs, std::vector<std::string>{"e/"});  // no empty directory left behind
  EXPECT_TRUE(store_->SyncParents({"e/3", "f/new"}).ok());
  EXPECT_TRUE(store_->AbortUploads("e/", nullptr).ok());
}

TEST_P(BlobStoreConformance, FilesGoInAndOutWhole) {
  const std::string data = Pattern(50000, 3);
  const std::string src = JoinPath(tmp_.path(), "src.bin");
  ASSERT_TRUE(WriteFileAtomic(src, data, false).ok());
  {
    auto in = OpenFile(src, O_RDONLY);
    ASSERT_TRUE(in.ok());
    ASSERT_TRUE(store_->PutFile("f/src.bin", in->get(), data.size()).ok());
  }
  EXPECT_EQ(Get("f/src.bin"), data);
  const std::string dst = JoinPath(tmp_.path(), "dst.bin");
  auto out = OpenFile(dst, O_RDWR | O_CREAT | O_TRUNC);
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(TruncateFd(out->get(), data.size(), "sizing").ok());
  Status s = store_->ReadToFile("f/src.bin", out->get(), data.size());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(*ReadFileToString(dst, 1 << 20), data);
  EXPECT_EQ(store_->ReadToFile("f/src.bin", out->get(), data.size() + 1).code(), Code::kCorruption);
  EXPECT_EQ(store_->ReadToFile("f/none", out->get(), 1).code(), Code::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(AllBlobStores, BlobStoreConformance, ::testing::ValuesIn(AllBlobStores()),
                         [](const ::testing::TestParamInfo<BlobFactory>& p) { return p.param.name; });

}  // namespace
}  // namespace tierckpt
