// DurableManifestCache and what `ls` sends an S3 durable tier: the listing
// and the manifest reads of Handlers::List (ListCommittedStepsTagged, then
// ReadManifestSummaries), counted on FakeS3.

#include "agent/manifest_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/names.h"
#include "s3/s3_client_test_util.h"
#include "store/s3_store.h"
#include "store/store_test_util.h"
#include "testing/fake_s3.h"

namespace tierckpt::agent {
namespace {

using s3::FakeS3;
using s3::testing_util::InstantRetries;
using s3::testing_util::MarkingSigner;
using s3::testing_util::TestConfig;
using testing_util::MakeManifest;

TEST(DurableManifestCacheTest, AnswersOnlyUnderTheTagItWasReadUnder) {
  DurableManifestCache cache;
  cache.Put("s3://b/p", "j", 1, "\"e1\"", {100, 2});
  ASSERT_TRUE(cache.Find("s3://b/p", "j", 1, "\"e1\"").has_value());
  EXPECT_EQ(cache.Find("s3://b/p", "j", 1, "\"e1\"")->bytes, 100u);
  EXPECT_FALSE(cache.Find("s3://b/p", "j", 1, "\"e2\"").has_value());  // rewritten
  EXPECT_FALSE(cache.Find("s3://b/p", "j", 1, "").has_value());         // untagged
  EXPECT_FALSE(cache.Find("s3://b/q", "j", 1, "\"e1\"").has_value());  // another base
  EXPECT_FALSE(cache.Find("s3://b/p", "k", 1, "\"e1\"").has_value());  // another namespace
  cache.Put("s3://b/p", "j", 1, "\"e2\"", {7, 1});                       // read again under the new tag
  EXPECT_FALSE(cache.Find("s3://b/p", "j", 1, "\"e1\"").has_value());
  EXPECT_EQ(cache.Find("s3://b/p", "j", 1, "\"e2\"")->bytes, 7u);
  cache.Put("s3://b/p", "j", 2, "", {1, 1});  // an untagged manifest is never kept
  EXPECT_EQ(cache.size(), 1u);
}

TEST(DurableManifestCacheTest, RetainForgetsStepsNoLongerListedAndTheBoundDropsTheLeastRecentlyUsed) {
  DurableManifestCache cache(3);
  cache.Put("b", "j", 1, "t", {1, 1});
  cache.Put("b", "j", 2, "t", {2, 1});
  cache.Put("b", "k", 1, "t", {3, 1});
  cache.Retain("b", "j", {2});
  EXPECT_FALSE(cache.Find("b", "j", 1, "t").has_value());
  EXPECT_TRUE(cache.Find("b", "j", 2, "t").has_value());
  EXPECT_TRUE(cache.Find("b", "k", 1, "t").has_value());  // other namespaces stay
  cache.Put("b", "j", 3, "t", {4, 1});
  ASSERT_TRUE(cache.Find("b", "j", 2, "t").has_value());  // j/2 used last, k/1 first
  cache.Put("b", "j", 4, "t", {5, 1});                    // over 3: k/1 goes
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.Find("b", "k", 1, "t").has_value());
  EXPECT_TRUE(cache.Find("b", "j", 2, "t").has_value());
}

class DurableListingS3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = std::make_unique<S3ObjectStore>(TestConfig(), s3_, std::make_shared<MarkingSigner>(),
                                             InstantRetries());
  }
  void Commit(uint64_t step, const std::string& data) {
    ASSERT_TRUE(store_->PutObject("job", step, "obj", data.data(), data.size()).ok());
    ASSERT_TRUE(store_->CommitStep(MakeManifest("job", step, {{"obj", data}})).ok());
  }
  static std::string ManifestKey(uint64_t step) {
    return "pre/job/" + StepDirName(step) + "/" + std::string(kManifestName);
  }
  // What Handlers::List does for namespace "job" with no step in memory: the
  // tagged listing, the cache told what is listed, every step summarized.
  std::vector<Result<ManifestSummary>> Ls(std::vector<uint64_t>* steps = nullptr) {
    Result<std::vector<CommittedStep>> listed = store_->ListCommittedStepsTagged("job");
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    if (!listed.ok()) return {};
    std::set<uint64_t> set;
    std::vector<ListedDurableStep> all;
    for (const CommittedStep& c : *listed) {
      set.insert(c.step);
      all.push_back({"job", c});
    }
    if (steps != nullptr) steps->assign(set.begin(), set.end());
    cache_.Retain(store_->DescribeNamespace("job"), "job", set);
    return ReadManifestSummaries(*store_, cache_, all, 8);
  }
  size_t RequestsSince(size_t mark) const { return s3_->Log().size() - mark; }
  int CountSince(size_t mark, const std::string& entry) const {
    auto log = s3_->Log();
    return static_cast<int>(std::count(log.begin() + static_cast<ptrdiff_t>(mark), log.end(), entry));
  }

  std::shared_ptr<FakeS3> s3_ = std::make_shared<FakeS3>("bkt");
  std::unique_ptr<S3ObjectStore> store_;
  DurableManifestCache cache_;
};

// The stress campaign's `ls` checks cost a HEAD per durable step and a GET per
// durable-only step on every call (1,551 HEADs, 1,220 GETs in moto's log).
TEST_F(DurableListingS3Test, ASecondLsOfManyDurableStepsIsOneListingPerPageAndNoManifestRead) {
  s3_->SetMaxKeys(100);  // pages of 100 keys: 150 steps of 2 keys are 3 pages
  for (uint64_t step = 1; step <= 150; ++step) Commit(step, std::string(step, 'x'));
  size_t mark = s3_->Log().size();
  std::vector<uint64_t> steps;
  auto first = Ls(&steps);
  ASSERT_EQ(steps.size(), 150u);
  EXPECT_EQ(CountSince(mark, "HEAD object"), 0);  // committed is read off the listing
  EXPECT_EQ(CountSince(mark, "GET list-type"), 3);
  EXPECT_EQ(CountSince(mark, "GET object"), 150);  // each manifest read once
  for (size_t i = 0; i < first.size(); ++i) {
    ASSERT_TRUE(first[i].ok()) << first[i].status().ToString();
    EXPECT_EQ(first[i]->bytes, i + 1);
    EXPECT_EQ(first[i]->objects, 1u);
  }
  mark = s3_->Log().size();
  auto second = Ls();
  EXPECT_EQ(RequestsSince(mark), 3u);  // ceil(300 keys / 100): the listing alone
  ASSERT_EQ(second.size(), 150u);
  for (size_t i = 0; i < second.size(); ++i) {
    ASSERT_TRUE(second[i].ok());
    EXPECT_EQ(second[i]->bytes, i + 1);
  }
}

TEST_F(DurableListingS3Test, AManifestWhoseETagChangedIsReadAgain) {
  Commit(1, "aaaa");
  Commit(2, "bbbb");
  (void)Ls();
  // Step 2 deleted and committed again behind the agent's back, other sizes.
  s3_->PutRaw("pre/job/step_0000000002/obj", "bbbbbbbb");
  s3_->PutRaw(ManifestKey(2), MakeManifest("job", 2, {{"obj", "bbbbbbbb"}}).ToJson());
  const size_t mark = s3_->Log().size();
  auto again = Ls();
  EXPECT_EQ(CountSince(mark, "GET object"), 1);  // step 2's manifest only
  ASSERT_EQ(again.size(), 2u);
  ASSERT_TRUE(again[1].ok());
  EXPECT_EQ(again[0]->bytes, 4u);
  EXPECT_EQ(again[1]->bytes, 8u);
}

TEST_F(DurableListingS3Test, ADeletedStepDisappearsAndIsForgotten) {
  Commit(1, "aaaa");
  Commit(2, "bbbb");
  (void)Ls();
  EXPECT_EQ(cache_.size(), 2u);
  ASSERT_TRUE(store_->DeleteStep("job", 1).ok());
  std::vector<uint64_t> steps;
  auto again = Ls(&steps);
  EXPECT_EQ(steps, std::vector<uint64_t>{2});
  EXPECT_EQ(again.size(), 1u);
  EXPECT_EQ(cache_.size(), 1u);
  // A step whose manifest is gone but whose objects stay is not committed.
  s3_->PutRaw("pre/job/step_0000000003/obj", "cccc");
  (void)Ls(&steps);
  EXPECT_EQ(steps, std::vector<uint64_t>{2});
}

TEST_F(DurableListingS3Test, ADamagedManifestIsReportedDamagedOnEveryLsNeverFromTheCache) {
  Commit(1, "aaaa");
  ASSERT_TRUE(Ls()[0].ok());  // cached as good
  s3_->PutRaw(ManifestKey(1), "{\"not\": \"a manifest\"");
  for (int round = 0; round < 2; ++round) {
    const size_t mark = s3_->Log().size();
    auto listed = Ls();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0].status().code(), Code::kCorruption) << listed[0].status().ToString();
    EXPECT_EQ(CountSince(mark, "GET object"), 1) << "round " << round;
  }
}

}  // namespace
}  // namespace tierckpt::agent
