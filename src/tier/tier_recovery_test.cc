// TierRecovery on its own: a root scanned into an index and a report, with
// no MemoryTier and no lock.
#include "tier/tier_recovery.h"

#include <gtest/gtest.h>

#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::TempDir;

TEST(TierRecoveryTest, ScansCommittedStepsAndRecyclesTheRest) {
  TempDir dir;
  const Layout layout(dir.Sub("root"));
  ASSERT_TRUE(MakeDirs(layout.root(), 0700).ok());
  // A committed step with one object and a persist marker.
  const std::string step = layout.StepDir("ns", 1);
  ASSERT_TRUE(MakeDirs(step, 0700).ok());
  const std::string data(3000, 'd');
  ASSERT_TRUE(WriteFileAtomic(step + "/obj", data, false).ok());
  Manifest m;
  m.ns = "ns";
  m.step = 1;
  m.created_unix_ms = 5;
  m.objects.push_back(ObjectEntry{"obj", data.size(), ChecksumOf(data), "node-t"});
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(step), m.ToJson(), false).ok());
  ASSERT_TRUE(WriteFileAtomic(Layout::MarkerPath(step), "", false).ok());
  // A partial step and a damaged one (its object truncated).
  ASSERT_TRUE(MakeDirs(layout.PartialDir("ns", 2), 0700).ok());
  ASSERT_TRUE(WriteFileAtomic(layout.PartialDir("ns", 2) + "/x", std::string(500, 'x'), false).ok());
  const std::string damaged = layout.StepDir("ns", 3);
  ASSERT_TRUE(MakeDirs(damaged, 0700).ok());
  Manifest m3 = m;
  m3.step = 3;
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(damaged), m3.ToJson(), false).ok());
  ASSERT_TRUE(WriteFileAtomic(damaged + "/obj", "short", false).ok());

  ReadMappings mappings(ReadMappingsOptions{.max_bytes = 1u << 30, .min_file_bytes = 1});
  SegmentPool pool(layout.PoolDir(), &mappings);
  TierRecovery recovery(layout, &mappings, /*budget_bytes=*/1u << 20, /*has_durable=*/true);
  Result<RecoveredTier> found = recovery.Run(&pool);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->report.committed_steps, 1u);
  EXPECT_EQ(found->report.partial_dropped, 1u);
  EXPECT_EQ(found->report.damaged_dropped, 1u);
  EXPECT_EQ(found->object_bytes, data.size());
  StepState* s = found->index.Find("ns", 1);
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->committed);
  EXPECT_EQ(s->persist, PersistState::kQueued);  // marker found, durable tier configured
  EXPECT_GT(found->next_id, s->instance);
  EXPECT_EQ(found->index.Find("ns", 3), nullptr);
  // The damaged step's object and manifest; the partial's file is unlinked (its writer may
  // still hold a mapping of it: decision 77).
  EXPECT_EQ(pool.count(), 2u);
  EXPECT_FALSE(StatPath(layout.PartialDir("ns", 2))->exists);
  EXPECT_FALSE(StatPath(damaged)->exists);
}

TEST(TierRecoveryTest, AMissingRootIsAnError) {
  TempDir dir;
  const Layout layout(dir.Sub("nowhere"));
  ReadMappings mappings(ReadMappingsOptions{.max_bytes = 1u << 20, .min_file_bytes = 1});
  SegmentPool pool(layout.PoolDir(), &mappings);
  TierRecovery recovery(layout, &mappings, 1u << 20, false);
  EXPECT_FALSE(recovery.Run(&pool).ok());
}

}  // namespace
}  // namespace tierckpt::agent
