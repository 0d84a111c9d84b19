// MemoryTier::Preallocate: the segment pool written at start (--preallocate).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>

#include "os/files.h"
#include "tier/layout.h"
#include "tier/memory_tier.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::InodeOf;
using testing::TierHarness;
using testing::WriteStep;

constexpr uint64_t kMiB = 1u << 20;

// Bytes the kernel holds for the file: written pages, not a sparse size.
uint64_t AllocatedBytes(const std::string& path) {
  struct stat st{};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

TEST(PreallocateTest, FillsThePoolWithWrittenSegmentsThatObjectsThenUse) {
  TierHarness h(16 * kMiB);
  MemoryTier& t = *h.tier;
  Result<uint64_t> added = t.Preallocate(5 * kMiB, 2 * kMiB);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 5 * kMiB);
  TierStats s = t.Stats();
  EXPECT_EQ(s.pool_segments, 3u);  // 2 + 2 + 1 MiB
  EXPECT_EQ(s.pool_bytes, 5 * kMiB);
  EXPECT_EQ(s.used_bytes, 5 * kMiB);
  const std::string pool = Layout(h.options.root).PoolDir();
  Result<std::vector<std::string>> names = ListDir(pool);
  ASSERT_TRUE(names.ok());
  ASSERT_EQ(names->size(), 3u);
  uint64_t allocated = 0;
  for (const std::string& n : *names) {
    EXPECT_EQ(n.rfind("seg_", 0), 0u) << n;  // nothing half-written left behind
    allocated += AllocatedBytes(pool + "/" + n);
  }
  EXPECT_GE(allocated, 5 * kMiB);  // written pages, not holes

  // An object of a segment's size takes one (the pool's inode), and a second
  // call tops the pool up to the target again.
  Result<CreatedObject> o = t.CreateObject("job", 1, "a", 2 * kMiB, 1);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(AllocatedBytes(o->path), 2 * kMiB);
  EXPECT_EQ(t.Stats().pool_segments, 2u);
  // Aborted unsealed, its file is unlinked, not pooled (its writer may still
  // write through a mapping: memory_tier_holes_test.cc); a second call tops
  // the pool up again.
  ASSERT_TRUE(t.AbortStep("job", 1).ok());
  EXPECT_EQ(t.Stats().pool_bytes, 3 * kMiB);
  EXPECT_EQ(*t.Preallocate(5 * kMiB, 2 * kMiB), 2 * kMiB);
  EXPECT_EQ(*t.Preallocate(5 * kMiB, 2 * kMiB), 0u);
}

TEST(PreallocateTest, ASmallObjectLeavesALargeSegmentForALargeOne) {
  TierHarness h(16 * kMiB);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(t.Preallocate(5 * kMiB, 4 * kMiB).ok());  // segments of 4 and 1 MiB
  Result<CreatedObject> meta = t.CreateObject("job", 1, ".metadata", 4096, 1);
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  EXPECT_EQ(t.Stats().pool_bytes, 5 * kMiB);  // a fresh file: both segments stay
  Result<CreatedObject> half = t.CreateObject("job", 1, "half", 512 * 1024, 1);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(t.Stats().pool_bytes, 4 * kMiB);  // the 1 MiB segment is within 4x: taken
  Result<CreatedObject> big = t.CreateObject("job", 1, "big", 3 * kMiB, 1);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(t.Stats().pool_segments, 0u);
  EXPECT_EQ(AllocatedBytes(big->path), 3 * kMiB);
}

TEST(PreallocateTest, StopsAtTheBudgetAndLeavesItUsable) {
  TierHarness h(4 * kMiB);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"a", std::string(kMiB, 'a')}}).ok());
  Result<uint64_t> added = t.Preallocate(16 * kMiB, 2 * kMiB);
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 3 * kMiB);  // 2 + 1: the budget less the committed object
  EXPECT_EQ(t.Stats().used_bytes, 4 * kMiB);
  // The pool yields to saves: a step of the whole rest of the budget fits.
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"a", std::string(3 * kMiB, 'b')}}).ok());
  EXPECT_TRUE(t.HasCommitted("job", 2));
}

TEST(PreallocateTest, YieldsToAStepBeingWrittenAndStopsAtShutdown) {
  TierHarness h(16 * kMiB);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(t.BeginStep("job", 1, 1).ok());
  EXPECT_EQ(*t.Preallocate(8 * kMiB, kMiB), 0u);
  ASSERT_TRUE(t.AbortStep("job", 1).ok());
  t.Shutdown();
  EXPECT_EQ(*t.Preallocate(8 * kMiB, kMiB), 0u);
  EXPECT_EQ(t.Stats().pool_bytes, 0u);
  EXPECT_EQ(t.Preallocate(8 * kMiB, 0).status().code(), Code::kInvalidArgument);
}

TEST(PreallocateTest, ASegmentHalfWrittenAtACrashIsRemovedAtTheNextStart) {
  TierHarness h(16 * kMiB);
  ASSERT_TRUE(h.tier->Preallocate(2 * kMiB, kMiB).ok());
  const std::string pool = Layout(h.options.root).PoolDir();
  ASSERT_TRUE(WriteFileAtomic(pool + "/preallocating", std::string(4096, 'x'), false).ok());
  ASSERT_TRUE(h.Reopen().ok());
  EXPECT_FALSE(StatPath(pool + "/preallocating")->exists);
  EXPECT_EQ(h.tier->Stats().pool_bytes, 2 * kMiB);  // the finished segments stay
}

}  // namespace
}  // namespace tierckpt::agent
