// MemoryTier::Recover — what an agent restart (or kill -9) finds on tmpfs.
#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/agent_test_util.h"
#include "agent/memory_tier.h"
#include "os/files.h"

namespace tierckpt::agent {
namespace {

using testing::ReadFd;
using testing::TierHarness;
using testing::WriteObject;
using testing::WriteStep;

std::string ReadObject(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name) {
  Result<OpenedObject> o = tier.OpenObject(ns, step, name);
  if (!o.ok()) return "<" + o.status().ToString() + ">";
  return ReadFd(o->fd.get());
}

TEST(RecoveryTest, CommittedStepsSurviveAndPartialOnesAreDropped) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", std::string(5000, 'a')}, {"d/b", "bb"}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "other", 3, {{"x", "xx"}}).ok());
  ASSERT_TRUE(WriteObject(*h.tier, "job", 2, "a", std::string(8192, 'p')).ok());  // never committed
  h.verifier->Drain();

  Result<RecoveryReport> r = h.Reopen();  // the old agent is gone; a new one scans the root
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->committed_steps, 2u);
  EXPECT_EQ(r->partial_dropped, 1u);
  EXPECT_EQ(r->damaged_dropped, 0u);
  EXPECT_TRUE(r->errors.empty());
  MemoryTier& t = *h.tier;
  EXPECT_TRUE(t.HasCommitted("job", 1));
  EXPECT_TRUE(t.HasCommitted("other", 3));
  EXPECT_FALSE(StatPath(h.PartialDir("job", 2))->exists);
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), std::string(5000, 'a'));
  EXPECT_EQ(ReadObject(t, "job", 1, "d/b"), "bb");
  TierStats s = t.Stats();
  EXPECT_EQ(s.object_bytes, 5004u);
  EXPECT_EQ(s.pool_segments, 1u);  // the partial step's file was recycled
  EXPECT_EQ(s.pool_bytes, 8192u);
  // The step number is free again and the old steps are not in the way.
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"a", "new"}}).ok());
}

TEST(RecoveryTest, TruncatedObjectOrDamagedManifestDropsTheStep) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", std::string(4096, '1')}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 2, {{"a", std::string(4096, '2')}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 3, {{"a", std::string(4096, '3')}}).ok());
  ASSERT_EQ(::truncate(Layout::ObjectPath(h.StepDir("job", 2), "a").c_str(), 100), 0);
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(h.StepDir("job", 3)), "{\"format\": 1", false).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->committed_steps, 1u);
  EXPECT_EQ(r->damaged_dropped, 2u);
  ASSERT_EQ(r->errors.size(), 2u);
  EXPECT_NE(r->errors[0].message().find("truncated"), std::string::npos) << r->errors[0].ToString();
  EXPECT_EQ(r->errors[1].code(), Code::kCorruption);
  EXPECT_TRUE(h.tier->HasCommitted("job", 1));
  EXPECT_FALSE(h.tier->HasCommitted("job", 2));
  EXPECT_FALSE(h.tier->HasCommitted("job", 3));
  EXPECT_FALSE(StatPath(h.StepDir("job", 2))->exists);
  EXPECT_FALSE(StatPath(h.StepDir("job", 3))->exists);
}

TEST(RecoveryTest, MissingObjectAndMisplacedManifestDropTheStep) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", "a"}, {"b", "b"}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 2, {{"a", "a"}}).ok());
  ASSERT_EQ(::unlink(Layout::ObjectPath(h.StepDir("job", 1), "b").c_str()), 0);
  // Step 2's directory renamed to step 5: its manifest names another step.
  ASSERT_TRUE(RenamePath(h.StepDir("job", 2), h.StepDir("job", 5)).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->committed_steps, 0u);
  EXPECT_EQ(r->damaged_dropped, 2u);
}

TEST(RecoveryTest, PersistMarkerIsReEnqueued) {
  TierHarness h(64u << 20, 5, /*has_durable=*/true);
  h.tier->SetPersistHook([](const std::string&, uint64_t) {});  // the agent "dies" before persisting
  ASSERT_TRUE(WriteStep(*h.tier, "job", 4, {{"a", "a"}}, /*persist=*/true).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 5, {{"a", "a"}}).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->persist_pending.size(), 1u);
  EXPECT_EQ(r->persist_pending[0], (std::pair<std::string, uint64_t>("job", 4)));
  std::vector<StepInfo> steps = h.tier->ListSteps("job");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].persist, PersistState::kQueued);
  EXPECT_EQ(steps[1].persist, PersistState::kNone);
  EXPECT_TRUE(h.tier->StartPersist("job", 4).ok());

  // Without a durable tier the marker stays on disk but nothing is queued.
  h.options.has_durable = false;
  r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->persist_pending.empty());
  EXPECT_TRUE(StatPath(Layout::MarkerPath(h.StepDir("job", 4)))->exists);
}

TEST(RecoveryTest, LeftoversAndTrashAreCleanedUp) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", "a"}}).ok());
  const std::string step_dir = h.StepDir("job", 1);
  ASSERT_TRUE(WriteFileAtomic(JoinPath(step_dir, "_tierckpt_persist.tmp.1.0"), "", false).ok());
  ASSERT_TRUE(MakeDirs(h.dir.Sub("root/trash/7/sub")).ok());
  ASSERT_TRUE(WriteFileAtomic(h.dir.Sub("root/trash/7/sub/obj"), std::string(4096, 't'), false).ok());
  ASSERT_TRUE(WriteFileAtomic(h.dir.Sub("root/ns/job/stray.tmp"), "x", false).ok());
  ASSERT_TRUE(MakeDirs(h.dir.Sub("root/ns/bad name")).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(h.tier->HasCommitted("job", 1));
  EXPECT_FALSE(StatPath(JoinPath(step_dir, "_tierckpt_persist.tmp.1.0"))->exists);
  EXPECT_FALSE(StatPath(h.dir.Sub("root/trash"))->exists);
  EXPECT_FALSE(StatPath(h.dir.Sub("root/ns/job/stray.tmp"))->exists);
  EXPECT_TRUE(StatPath(h.dir.Sub("root/ns/bad name"))->exists);  // not ours to judge: left alone
  EXPECT_EQ(h.tier->Stats().pool_bytes, 4096u);                    // trash recycled into the pool
}

TEST(RecoveryTest, LoweredBudgetEvictsByPolicy) {
  TierHarness h(64u << 20, 10);
  for (uint64_t s = 1; s <= 4; ++s) ASSERT_TRUE(WriteStep(*h.tier, "job", s, {{"a", std::string(300 << 10, 'a')}}).ok());
  h.options.budget_bytes = 1u << 20;
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(h.tier->HasCommitted("job", 1));
  EXPECT_TRUE(h.tier->HasCommitted("job", 4));
  EXPECT_LE(h.tier->Stats().used_bytes, 1u << 20);
}

}  // namespace
}  // namespace tierckpt::agent
