// memory_tier_verified_test.cc — verification times (memory_tier.h,
// "Verification times"): which hashes count as the agent verifying a
// committed object, and the age OpenObject reports.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "store/mem_store.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::TierHarness;
using testing::WriteObject;

const std::string kVerifiedData = std::string(200000, 'v') + "end";

uint64_t AgeOf(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name) {
  Result<OpenedObject> o = tier.OpenObject(ns, step, name);
  EXPECT_TRUE(o.ok()) << o.status().ToString();
  return o.ok() ? o->verified_age_ms : 0;
}

TEST(MemoryTierVerifiedTest, TheHashAfterSealVerifiesAndTheAgeGrows) {
  TierHarness h;
  ASSERT_TRUE(WriteObject(*h.tier, "job", 1, "a", kVerifiedData, 1, /*checksum=*/"").ok());  // the agent hashes
  ASSERT_TRUE(h.tier->CommitStep("job", 1, 1, false, {}).ok());
  const uint64_t first = AgeOf(*h.tier, "job", 1, "a");
  EXPECT_LT(first, 10'000u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const uint64_t later = AgeOf(*h.tier, "job", 1, "a");
  EXPECT_GE(later, first + 30);
  EXPECT_NE(later, kNeverVerified);
}

TEST(MemoryTierVerifiedTest, ATrustedClientChecksumIsNeverVerifiedUntilAVerifyHashesIt) {
  TierHarness h;
  ASSERT_TRUE(testing::WriteStep(*h.tier, "job", 2, {{"a", kVerifiedData}, {"b", "bee"}}).ok());  // client checksums
  EXPECT_EQ(AgeOf(*h.tier, "job", 2, "a"), kNeverVerified);
  Result<MemoryVerifyResult> v = h.tier->VerifyStep("job", 2);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
  EXPECT_LT(AgeOf(*h.tier, "job", 2, "a"), 10'000u);
  EXPECT_LT(AgeOf(*h.tier, "job", 2, "b"), 10'000u);
}

TEST(MemoryTierVerifiedTest, VerifyDoesNotMarkACorruptObjectAndNamesIt) {
  TierHarness h;
  ASSERT_TRUE(testing::WriteStep(*h.tier, "job", 3, {{"a", kVerifiedData}}).ok());
  const std::string path = Layout::ObjectPath(h.StepDir("job", 3), "a");
  Result<UniqueFd> fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(PwriteAll(fd->get(), "X", 1, 10, path).ok());
  Result<MemoryVerifyResult> v = h.tier->VerifyStep("job", 3);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->failed_objects, std::vector<std::string>{"a"});
  EXPECT_EQ(AgeOf(*h.tier, "job", 3, "a"), kNeverVerified);
}

TEST(MemoryTierVerifiedTest, ARestoreVerifiesAndARestartForgets) {
  TierHarness h(64u << 20, 3, /*has_durable=*/true);
  MemObjectStore store("verified-restore");
  Manifest m;
  m.ns = "job";
  m.step = 4;
  m.node = "node-t";
  ASSERT_TRUE(store.PutObject("job", 4, "a", kVerifiedData.data(), kVerifiedData.size()).ok());
  m.objects.push_back({"a", kVerifiedData.size(), ChecksumOf(kVerifiedData), "node-t"});
  ASSERT_TRUE(store.CommitStep(m).ok());
  ASSERT_TRUE(h.tier->Restore(store, "job", 4).ok());
  EXPECT_LT(AgeOf(*h.tier, "job", 4, "a"), 10'000u);
  ASSERT_TRUE(h.Reopen().ok());  // recovered at start: sizes checked, bytes not hashed
  EXPECT_EQ(AgeOf(*h.tier, "job", 4, "a"), kNeverVerified);
}

TEST(MemoryTierVerifiedTest, MarkVerifiedIgnoresAnotherLifeOfTheStep) {
  TierHarness h;
  ASSERT_TRUE(testing::WriteStep(*h.tier, "job", 5, {{"a", kVerifiedData}}).ok());
  Result<PinnedObject> pinned = h.tier->ReadCommittedObject("job", 5, "a");
  ASSERT_TRUE(pinned.ok());
  const uint64_t old_life = pinned->instance;
  *pinned = PinnedObject();
  ASSERT_TRUE(h.tier->DeleteStep("job", 5).ok());
  ASSERT_TRUE(testing::WriteStep(*h.tier, "job", 5, {{"a", kVerifiedData}}).ok());
  h.tier->MarkVerified("job", 5, old_life, "a", std::chrono::steady_clock::now());
  EXPECT_EQ(AgeOf(*h.tier, "job", 5, "a"), kNeverVerified);
  pinned = h.tier->ReadCommittedObject("job", 5, "a");
  ASSERT_TRUE(pinned.ok());
  h.tier->MarkVerified("job", 5, pinned->instance, "a", std::chrono::steady_clock::now());
  EXPECT_LT(AgeOf(*h.tier, "job", 5, "a"), 10'000u);
}

}  // namespace
}  // namespace tierckpt::agent
