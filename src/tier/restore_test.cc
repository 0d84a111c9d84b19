// MemoryTier::Restore — durable tier → memory tier.
#include <gtest/gtest.h>

#include "store/mem_store.h"
#include "testing/fault_store.h"
#include "tier/memory_tier.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::ReadFd;
using testing::TierHarness;

void PutDurableStep(ObjectStore& store, const std::string& ns, uint64_t step,
                    const std::map<std::string, std::string>& objects) {
  Manifest m;
  m.ns = ns;
  m.step = step;
  m.node = "elsewhere";
  m.created_unix_ms = 1700000000000ull;
  for (const auto& [name, data] : objects) {
    ASSERT_TRUE(store.PutObject(ns, step, name, data.data(), data.size()).ok());
    m.objects.push_back({name, data.size(), ChecksumOf(data), "elsewhere"});
  }
  ASSERT_TRUE(store.CommitStep(m).ok());
}

TEST(RestoreTest, BringsADurableStepIntoMemory) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("restore-test");
  const std::string big(3u << 20, 'q');
  PutDurableStep(store, "job", 12, {{"a", big}, {"d/e", "e"}, {"z", ""}});
  ASSERT_TRUE(h.tier->Restore(store, "job", 12).ok());
  EXPECT_TRUE(h.tier->HasCommitted("job", 12));
  Result<OpenedObject> o = h.tier->OpenObject("job", 12, "a");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(ReadFd(o->fd.get()), big);
  EXPECT_EQ(o->checksum, ChecksumOf(big));
  std::vector<StepInfo> steps = h.tier->ListSteps("job");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].persist, PersistState::kDurable);
  EXPECT_FALSE(StatPath(Layout::MarkerPath(h.StepDir("job", 12)))->exists);
  EXPECT_EQ(h.tier->GetManifest("job", 12)->node, "elsewhere");
  EXPECT_TRUE(h.tier->Restore(store, "job", 12).ok());  // already in memory
}

TEST(RestoreTest, CorruptedDurableCopyCommitsNothing) {
  TierHarness h(64u << 20, 3, true);
  auto mem = std::make_shared<MemObjectStore>("restore-corrupt");
  FaultInjectingStore store(mem);
  PutDurableStep(store, "job", 5, {{"a", "aaaa"}, {"b", "bbbb"}});
  store.CorruptReads("b");
  Status s = h.tier->Restore(store, "job", 5);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("job/5/b"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find(store.Describe()), std::string::npos) << s.ToString();
  EXPECT_FALSE(h.tier->HasCommitted("job", 5));
  EXPECT_FALSE(StatPath(h.PartialDir("job", 5))->exists);
  EXPECT_FALSE(StatPath(h.StepDir("job", 5))->exists);
  EXPECT_EQ(h.tier->Stats().object_bytes, 0u);
  store.ClearFaults();
  EXPECT_TRUE(h.tier->Restore(store, "job", 5).ok());
}

TEST(RestoreTest, MissingStepAndTooLargeStep) {
  TierHarness h(/*budget=*/1u << 20, 3, true);
  MemObjectStore store("restore-missing");
  Status s = h.tier->Restore(store, "job", 1);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("in no tier"), std::string::npos) << s.ToString();
  PutDurableStep(store, "job", 2, {{"a", std::string(2u << 20, 'a')}});
  s = h.tier->Restore(store, "job", 2);
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_NE(s.message().find("--memory-budget"), std::string::npos);
}

TEST(RestoreTest, ReadErrorsAreReportedWithTheStore) {
  TierHarness h(64u << 20, 3, true);
  auto mem = std::make_shared<MemObjectStore>("restore-io");
  FaultInjectingStore store(mem);
  PutDurableStep(store, "job", 1, {{"a", "aaaa"}});
  store.FailNthCall(StoreOp::kReadObject, 1, IoError("network reset"));
  Status s = h.tier->Restore(store, "job", 1);
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_NE(s.message().find("network reset"), std::string::npos);
  EXPECT_FALSE(h.tier->HasCommitted("job", 1));
  EXPECT_TRUE(h.tier->Restore(store, "job", 1).ok());
}

// Issue 16 item 2: restoring an old step from the durable tier under a tight
// budget evicted newer committed steps that were never persisted.
TEST(RestoreTest, ARestoreUnderATightBudgetNeverEvictsAStepWhoseOnlyCopyIsInMemory) {
  TierHarness h(/*budget=*/5u << 20, /*keep_last=*/5, /*has_durable=*/true);
  MemObjectStore store("restore-budget");
  PutDurableStep(store, "job", 1, {{"a", std::string(2u << 20, 'o')}});
  for (uint64_t step : {5, 6}) {
    ASSERT_TRUE(testing::WriteStep(*h.tier, "job", step, {{"a", std::string(2u << 20, 'n')}}).ok());
  }
  Status s = h.tier->Restore(store, "job", 1);
  ASSERT_EQ(s.code(), Code::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("restoring"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("a restore never evicts"), std::string::npos) << s.ToString();
  EXPECT_TRUE(h.tier->HasCommitted("job", 5));
  EXPECT_TRUE(h.tier->HasCommitted("job", 6));
  EXPECT_FALSE(h.tier->HasCommitted("job", 1));
  // A step that is durable has another copy: a restore may evict it.
  h.tier->MarkDurable("job", 5);
  ASSERT_TRUE(h.tier->Restore(store, "job", 1).ok());
  EXPECT_FALSE(h.tier->HasCommitted("job", 5));
  EXPECT_TRUE(h.tier->HasCommitted("job", 6));
  EXPECT_TRUE(h.tier->HasCommitted("job", 1));
}

}  // namespace
}  // namespace tierckpt::agent
