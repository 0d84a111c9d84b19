// StepIndex: the retention and eviction policy as decisions over the index
// alone (no files).
#include "tier/step_index.h"

#include <gtest/gtest.h>

namespace tierckpt::agent {
namespace {

class StepIndexTest : public ::testing::Test {
 protected:
  StepState* Add(StepIndex& index, const std::string& ns, uint64_t step, bool committed, uint64_t seq,
                 PersistState persist = PersistState::kNone) {
    auto s = std::make_unique<StepState>();
    s->instance = ++next_;
    s->committed = committed;
    s->commit_seq = seq;
    s->persist = persist;
    s->files = std::make_shared<StepFiles>();
    return index.Insert(ns, step, std::move(s));
  }
  uint64_t next_ = 0;
};

TEST_F(StepIndexTest, EvictsTheOldestCommitNeverTheNewestOfANamespace) {
  StepIndex index;
  Add(index, "a", 1, true, 5);
  Add(index, "a", 2, true, 6);
  Add(index, "b", 1, true, 1);  // oldest commit, but b's newest: kept
  Add(index, "b", 2, false, 0);
  std::optional<StepRef> v = index.PickEviction(SpaceFor::kWrite);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, StepRef("a", 1));
  EXPECT_EQ(index.WritingSteps(), 1u);
  EXPECT_EQ(index.CommittedSteps(), 3u);
}

TEST_F(StepIndexTest, NeverEvictsPinnedOrAwaitingDurable) {
  StepIndex index;
  Add(index, "a", 1, true, 1)->files->pins = 1;
  Add(index, "a", 2, true, 2, PersistState::kFailed);
  Add(index, "a", 3, true, 3);
  EXPECT_FALSE(index.PickEviction(SpaceFor::kWrite).has_value());
  EXPECT_NE(index.KeptSteps().find("a/2"), std::string::npos);
}

TEST_F(StepIndexTest, ARestoreEvictsOnlyDurableStepsWithADurableTier) {
  StepIndex with_durable(/*has_durable=*/true);
  Add(with_durable, "a", 1, true, 1);
  Add(with_durable, "a", 2, true, 2);
  EXPECT_FALSE(with_durable.PickEviction(SpaceFor::kRestore).has_value());
  EXPECT_TRUE(with_durable.PickEviction(SpaceFor::kWrite).has_value());
  with_durable.Find("a", 1)->persist = PersistState::kDurable;
  EXPECT_EQ(with_durable.PickEviction(SpaceFor::kRestore), StepRef("a", 1));
}

TEST_F(StepIndexTest, RetentionDropsOldStepsKeepsPendingAndRechecksDurable) {
  StepIndex index(/*has_durable=*/true);
  Add(index, "a", 1, true, 1);                          // dropped
  Add(index, "a", 2, true, 2, PersistState::kQueued);   // kept: memory is its only copy
  Add(index, "a", 3, true, 3, PersistState::kDurable);  // rechecked before it goes
  Add(index, "a", 4, true, 4);
  Add(index, "a", 5, false, 0);  // being written: not counted
  PruneResult result;
  RetentionPlan plan = index.PlanRetention("a", 1, &result, std::nullopt, false);
  EXPECT_EQ(plan.drop, std::vector<uint64_t>({1}));
  EXPECT_EQ(plan.recheck, std::vector<uint64_t>({3}));
  EXPECT_EQ(result.kept_pending.size(), 2u);
  EXPECT_EQ(result.rechecking.size(), 1u);
  // The caller checks durable copies itself: listed, not queued.
  RetentionPlan own = index.PlanRetention("a", 1, nullptr, std::nullopt, true);
  EXPECT_TRUE(own.recheck.empty());
  // Protected and confirmed.
  index.Find("a", 3)->durable_confirmed = true;
  RetentionPlan p = index.PlanRetention("a", 1, nullptr, /*protect=*/1, false);
  EXPECT_EQ(p.drop, std::vector<uint64_t>({3}));
}

TEST_F(StepIndexTest, RemoveTellsWhenTheNamespaceEmpties) {
  StepIndex index;
  Add(index, "a", 1, true, 1);
  Add(index, "a", 2, true, 2);
  bool emptied = true;
  EXPECT_NE(index.Remove("a", 1, &emptied), nullptr);
  EXPECT_FALSE(emptied);
  EXPECT_NE(index.Remove("a", 2, &emptied), nullptr);
  EXPECT_TRUE(emptied);
  EXPECT_FALSE(index.HasNamespace("a"));
  EXPECT_EQ(index.Remove("a", 2, &emptied), nullptr);
}

TEST_F(StepIndexTest, OrderByCreationNumbersOldestFirst) {
  StepIndex index;
  Add(index, "a", 1, true, 0)->manifest.created_unix_ms = 30;
  Add(index, "b", 1, true, 0)->manifest.created_unix_ms = 10;
  uint64_t seq = 7;
  index.OrderByCreation(&seq);
  EXPECT_EQ(index.Find("b", 1)->commit_seq, 7u);
  EXPECT_EQ(index.Find("a", 1)->commit_seq, 8u);
  EXPECT_EQ(seq, 9u);
  EXPECT_EQ(index.FindInstance("a", 1, 999), nullptr);
}

}  // namespace
}  // namespace tierckpt::agent
