// MemoryTier with its file work outside the lock: steps dropped while their
// dirs are made or their objects created, the same step begun again at once,
// and the accounting afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TierHarness;
using testing::WriteObject;

// Regression guard for the reserve / unlock / record protocol: creators,
// sealers and aborters of one step race; whatever interleaving, nothing is
// left behind and the bytes add up.
TEST(MemoryTierRacesTest, CreatesAndAbortsOfOneStepLeaveNothingBehind) {
  TierHarness h(64u << 20);
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  std::vector<std::thread> threads;
  std::atomic<int> created{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const std::string name = "o" + std::to_string(t) + "_" + std::to_string(i % 7);
        const std::string data(4096 + 512 * t, static_cast<char>('a' + t));
        if (WriteObject(*h.tier, "ns", 1, name, data, /*conn=*/t + 1).ok()) ++created;
        if (i % 5 == t % 5) h.tier->AbortStep("ns", 1).IgnoreError();
        if (i % 11 == 0) h.tier->ReleaseWriter(t + 1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_GT(created.load(), 0);
  ASSERT_TRUE(h.tier->AbortStep("ns", 1).ok());
  TierStats st = h.tier->Stats();
  EXPECT_EQ(st.writing_steps, 0u);
  EXPECT_EQ(st.object_bytes, 0u);
  EXPECT_EQ(st.used_bytes, st.pool_bytes);
  EXPECT_FALSE(StatPath(h.PartialDir("ns", 1))->exists);
  // The pool holds what it says it holds.
  Result<std::vector<std::string>> segs = ListDir(Layout(h.options.root).PoolDir());
  ASSERT_TRUE(segs.ok());
  EXPECT_EQ(segs->size(), st.pool_segments);
  // And the step can be written again.
  ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 1, {{"a", "hello"}}).ok());
  EXPECT_TRUE(h.tier->HasCommitted("ns", 1));
}

// A committed step dropped and written again under the same number at once:
// its old dir moves aside outside the lock while the new one publishes.
TEST(MemoryTierRacesTest, ADeletedStepCanBeWrittenAgainAtOnce) {
  TierHarness h(64u << 20, /*keep_last=*/1);
  for (int round = 0; round < 30; ++round) {
    const std::string data(8192, static_cast<char>('a' + round % 26));
    ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 7, {{"x", data}, {"d/y", data}}).ok()) << round;
    Result<OpenedObject> o = h.tier->OpenObject("ns", 7, "d/y");
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(testing::ReadFd(o->fd.get()), data);
    ASSERT_TRUE(*h.tier->DeleteStep("ns", 7));
  }
  TierStats st = h.tier->Stats();
  EXPECT_EQ(st.object_bytes, 0u);
  EXPECT_EQ(st.committed_steps, 0u);
  // Everything came back through the pool, and a restart finds it so.
  ASSERT_TRUE(h.Reopen().ok());
  EXPECT_EQ(h.tier->Stats().pool_bytes, st.pool_bytes);
}

// Retention after a commit recycles the old steps' files into the pool before
// CommitStep returns: the next save of the same sizes takes them (same inodes).
TEST(MemoryTierRacesTest, RetentionRecyclesBeforeTheCommitReturns) {
  TierHarness h(64u << 20, /*keep_last=*/1);
  const std::string data(2u << 20, 'z');
  ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 1, {{"big", data}}).ok());
  const uint64_t inode = testing::InodeOf(h.StepDir("ns", 1) + "/big");
  ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 2, {{"big", data}}).ok());
  EXPECT_FALSE(h.tier->HasCommitted("ns", 1));
  EXPECT_EQ(h.tier->Stats().pool_segments, 1u);
  ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 3, {{"big", data}}).ok());
  EXPECT_EQ(testing::InodeOf(h.StepDir("ns", 3) + "/big"), inode);
}

}  // namespace
}  // namespace tierckpt::agent
