// S3ObjectStore on FakeS3: what the conformance suite cannot see — the exact
// keys (the filesystem tier's layout), the conditional manifest write and its
// fallback, damaged manifests, foreign keys, multipart sweeps, retries.

#include "store/s3_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "s3/s3_client_test_util.h"
#include "store/store_test_util.h"
#include "testing/fake_s3.h"

namespace tierckpt {
namespace {

using s3::FakeS3;
using s3::testing_util::ErrorXml;
using s3::testing_util::InstantRetries;
using s3::testing_util::MarkingSigner;
using s3::testing_util::Reply;
using s3::testing_util::TestConfig;
using testing_util::MakeManifest;
using testing_util::Pattern;

class S3StoreTest : public ::testing::Test {
 protected:
  S3ObjectStore& Store(s3::S3Config config = TestConfig()) {
    store_ = std::make_unique<S3ObjectStore>(config, s3_, std::make_shared<MarkingSigner>(),
                                             InstantRetries());
    return *store_;
  }
  void Put(const std::string& ns, uint64_t step, const std::string& name, const std::string& data) {
    Status s = store_->PutObject(ns, step, name, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  int Count(const std::string& entry) {
    auto log = s3_->Log();
    return static_cast<int>(std::count(log.begin(), log.end(), entry));
  }

  std::shared_ptr<FakeS3> s3_ = std::make_shared<FakeS3>("bkt");
  std::unique_ptr<S3ObjectStore> store_;
};

TEST_F(S3StoreTest, KeysFollowTheFilesystemLayoutAndTheManifestComesLast) {
  Store();
  EXPECT_EQ(store_->Describe(), "s3://bkt/pre");
  Put("job", 7, "__0_0.distcp", Pattern(5000, 1));  // multipart: parts of 1 KiB
  Put("job", 7, ".metadata", "meta");
  Put("job", 7, "sub/leaf", "leaf");
  EXPECT_EQ(s3_->Keys(), (std::vector<std::string>{"pre/job/step_0000000007/.metadata",
                                                   "pre/job/step_0000000007/__0_0.distcp",
                                                   "pre/job/step_0000000007/sub/leaf"}));
  const Manifest m = MakeManifest("job", 7, {{"__0_0.distcp", Pattern(5000, 1)},
                                            {".metadata", "meta"},
                                            {"sub/leaf", "leaf"}});
  ASSERT_TRUE(store_->CommitStep(m).ok());
  EXPECT_EQ(s3_->Object("pre/job/step_0000000007/_tierckpt_manifest.json").value_or(""), m.ToJson());
  EXPECT_EQ(s3_->Object("pre/job/step_0000000007/__0_0.distcp").value_or(""), Pattern(5000, 1));
  // The manifest went last, with If-None-Match after a one-time probe.
  auto log = s3_->Log();
  EXPECT_EQ(log.back(), "PUT object");
  EXPECT_EQ(Count("PUT object"), 2 /*probe*/ + 2 /*small objects*/ + 1 /*manifest*/);

  // An empty prefix puts namespaces at the bucket's root.
  s3::S3Config root = TestConfig();
  root.prefix = "";
  Store(root);
  EXPECT_EQ(store_->Describe(), "s3://bkt");
  Put("ns2", 1, "a", "x");
  EXPECT_TRUE(s3_->Object("ns2/step_0000000001/a").has_value());
  auto namespaces = store_->ListNamespaces();
  ASSERT_TRUE(namespaces.ok()) << namespaces.status().ToString();
  EXPECT_EQ(*namespaces, std::vector<std::string>{"ns2"});  // "pre/" holds no steps directly
}

TEST_F(S3StoreTest, StoresWithoutConditionalWritesStillCommitOnce) {
  s3_->SetConditionalMode(FakeS3::ConditionalMode::kIgnore);
  Store();
  Put("job", 1, "a", "1");
  ASSERT_TRUE(store_->CommitStep(MakeManifest("job", 1, {{"a", "1"}})).ok());
  Manifest second = MakeManifest("job", 1, {{"a", "1"}});
  second.node = "other";
  EXPECT_EQ(store_->CommitStep(second).code(), Code::kAlreadyExists);
  EXPECT_EQ(store_->ReadManifest("job", 1)->node, "node-a");
}

TEST_F(S3StoreTest, DamagedOrMisplacedManifestsAreCorruption) {
  Store();
  s3_->PutRaw("pre/job/step_0000000002/_tierckpt_manifest.json", "{not json");
  auto damaged = store_->ReadManifest("job", 2);
  EXPECT_EQ(damaged.status().code(), Code::kCorruption);
  EXPECT_NE(damaged.status().message().find("s3://bkt/pre/job/step_0000000002/_tierckpt_manifest.json"),
            std::string::npos) << damaged.status().message();
  s3_->PutRaw("pre/job/step_0000000003/_tierckpt_manifest.json", MakeManifest("job", 4, {}).ToJson());
  auto misplaced = store_->ReadManifest("job", 3);
  EXPECT_EQ(misplaced.status().code(), Code::kCorruption);
  EXPECT_NE(misplaced.status().message().find("not the step it sits in"), std::string::npos);
}

TEST_F(S3StoreTest, ForeignKeysAreIgnoredByListingsAndSweeps) {
  Store();
  s3_->PutRaw("pre/README", "hello");
  s3_->PutRaw("pre/bad ns/step_0000000001/a", "x");
  s3_->PutRaw("pre/job/notes.txt", "x");
  s3_->PutRaw("pre/job/step_12/a", "x");  // not 10 digits
  s3_->PutRaw("pre/empty/other/x", "x");
  Put("job", 5, "a", "x");
  EXPECT_EQ(*store_->ListNamespaces(), std::vector<std::string>{"job"});
  EXPECT_EQ(*store_->SweepUncommitted("job", {}), 1);
  EXPECT_TRUE(s3_->Object("pre/job/notes.txt").has_value());
  EXPECT_TRUE(s3_->Object("pre/job/step_12/a").has_value());
  EXPECT_TRUE(s3_->Object("pre/README").has_value());
}

TEST_F(S3StoreTest, SweepAbortsUploadsOfUncommittedStepsButNotKeepOrCommitted) {
  Store();
  Put("job", 1, "a", "1");
  ASSERT_TRUE(store_->CommitStep(MakeManifest("job", 1, {{"a", "1"}})).ok());
  s3::S3Client& c = store_->client();
  ASSERT_TRUE(c.CreateMultipartUpload("pre/job/step_0000000001/late").ok());    // committed step
  ASSERT_TRUE(c.CreateMultipartUpload("pre/job/step_0000000002/big").ok());     // abandoned
  ASSERT_TRUE(c.CreateMultipartUpload("pre/job/step_0000000003/big").ok());     // keep
  ASSERT_TRUE(c.CreateMultipartUpload("pre/other/step_0000000002/big").ok());   // other ns
  auto swept = store_->SweepUncommitted("job", {.keep = {3}});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 0);  // no step directory had objects
  auto left = c.ListMultipartUploads("pre/");
  ASSERT_TRUE(left.ok());
  std::vector<std::string> keys;
  for (const auto& u : *left) keys.push_back(u.key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"pre/job/step_0000000001/late",
                                            "pre/job/step_0000000003/big",
                                            "pre/other/step_0000000002/big"}));
}

TEST_F(S3StoreTest, TransientFailuresAreRetriedAndPersistentOnesNameTheObject) {
  std::atomic<int> failures{2};
  s3_->SetInterceptor([&](const s3::HttpRequest& r, std::string_view) -> std::optional<Result<s3::HttpResponse>> {
    if (r.method == "PUT" && failures.fetch_sub(1) > 0) {
      return Result<s3::HttpResponse>(Reply(503, ErrorXml("SlowDown")));
    }
    return std::nullopt;
  });
  Store();
  Put("job", 1, "a", "payload");
  EXPECT_EQ(s3_->Object("pre/job/step_0000000001/a").value_or(""), "payload");
  EXPECT_GE(s3_->resets(), 2);

  s3_->SetInterceptor([](const s3::HttpRequest& r, std::string_view) -> std::optional<Result<s3::HttpResponse>> {
    if (r.method == "GET" && !r.path.empty()) return Result<s3::HttpResponse>(Unavailable("connection reset"));
    return std::nullopt;
  });
  char buf[4];
  Status s = store_->ReadObject("job", 1, "a", 0, buf, 4);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("ReadObject s3://bkt/pre namespace \"job\" step 1 object \"a\""),
            std::string::npos) << s.message();
  EXPECT_NE(s.message().find("after 4 attempts"), std::string::npos) << s.message();
}

TEST_F(S3StoreTest, LargeObjectsRoundTripThroughMultipartAndParallelRanges) {
  Store();
  const std::string big = Pattern(64 * 1024 + 3, 5);
  Put("job", 9, "big", big);
  EXPECT_EQ(Count("PUT partNumber"), 65);
  std::string back(big.size(), '\0');
  ASSERT_TRUE(store_->ReadObject("job", 9, "big", 0, back.data(), back.size()).ok());
  EXPECT_EQ(back, big);
  EXPECT_EQ(*store_->ObjectSize("job", 9, "big"), big.size());
}

TEST_F(S3StoreTest, OpenBuildsTheRealStackWithoutSendingAnything) {
  auto config = s3::ParseS3Url("s3://bkt/p?endpoint=http://127.0.0.1:1");
  ASSERT_TRUE(config.ok());
  auto store = S3ObjectStore::Open(*config);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->Describe(), "s3://bkt/p");
  auto express = s3::ParseS3Url("s3://ckpt--usw2-az1--x-s3/run?region=us-west-2");
  ASSERT_TRUE(express.ok());
  EXPECT_TRUE(S3ObjectStore::Open(*express).ok());
}

}  // namespace
}  // namespace tierckpt
