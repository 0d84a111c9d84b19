// The persister under --persist-rate and --background-priority.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "os/thread_priority.h"
#include "store/mem_store.h"
#include "testing/fake_clock.h"
#include "testing/fault_store.h"
#include "tier/persister.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TierHarness;
using testing::WriteStep;

struct CappedPersist {
  explicit CappedPersist(RateLimiter* rate, ThreadPriority priority = ThreadPriority::kNormal)
      : h(64u << 20, 3, /*has_durable=*/true) {
    mem = std::make_shared<MemObjectStore>("persist-caps-test");
    store = std::make_unique<FaultInjectingStore>(mem);
    PersisterOptions o;
    o.threads = 2;
    o.metrics = &h.metrics;
    o.rate = rate;
    o.priority = priority;
    persister = std::make_unique<Persister>(o, h.tier.get(), store.get(), &errors);
    Persister* p = persister.get();
    h.tier->SetPersistHook([p](const std::string& ns, uint64_t step) { p->Enqueue(ns, step); });
  }
  ~CappedPersist() { persister->Stop(std::chrono::milliseconds(0)); }

  PersistState Wait(const std::string& ns, uint64_t step) {
    Result<PersistStatus> w = h.tier->WaitPersist(ns, step, std::chrono::seconds(20));
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? w->state : PersistState::kFailed;
  }

  TierHarness h;
  RecentErrors errors{&h.metrics};
  std::shared_ptr<MemObjectStore> mem;
  std::unique_ptr<FaultInjectingStore> store;
  std::unique_ptr<Persister> persister;
};

TEST(PersisterCapsTest, EveryObjectIsPaidForAtTheRateAndTheStepStillBecomesDurable) {
  ::tierckpt::testing::FakeClock clock;
  RateLimiter rate(1u << 20, 1u << 20, &clock);  // 1 MiB/s, 1 MiB of burst
  CappedPersist p(&rate);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1,
                        {{"a", std::string(2u << 20, 'a')}, {"b", std::string(2u << 20, 'b')}, {"c", "c"}},
                        true)
                  .ok());
  EXPECT_EQ(p.Wait("job", 1), PersistState::kDurable);
  EXPECT_EQ(rate.charged_bytes(), (4u << 20) + 1);
  // 4 MiB + 1 B at 1 MiB/s after a 1 MiB burst: 3 s (and a microsecond) of waits.
  EXPECT_GE(clock.slept_ns(), 3'000'000'000);
  EXPECT_LT(clock.slept_ns(), 3'100'000'000);
  // A batch goes out once it holds a burst: "a", then "b", then "c".
  EXPECT_EQ(p.store->PutObjectsBatches(), (std::vector<size_t>{1, 1, 1}));
  ASSERT_TRUE(p.mem->ReadManifest("job", 1).ok());
}

TEST(PersisterCapsTest, AnUnlimitedRateKeepsOneBatchAndNeverWaits) {
  ::tierckpt::testing::FakeClock clock;
  RateLimiter rate(0, 0, &clock);
  CappedPersist p(&rate);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", std::string(2u << 20, 'a')}, {"b", "b"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 1), PersistState::kDurable);
  EXPECT_EQ(clock.slept_ns(), 0);
  EXPECT_EQ(p.store->PutObjectsBatches(), std::vector<size_t>{2});
}

TEST(PersisterCapsTest, StopCancelsAPersistWaitingForTokens) {
  RateLimiter rate(1u << 20, 1u << 20);  // the real clock: 24 MiB take 23 s at 1 MiB/s
  CappedPersist p(&rate);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", std::string(24u << 20, 'a')}}, true).ok());
  while (rate.charged_bytes() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const auto t0 = std::chrono::steady_clock::now();
  p.persister->Stop(std::chrono::milliseconds(0));  // the wait is cancelled, not sat out
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
  EXPECT_FALSE(p.mem->ReadManifest("job", 1).ok());
  std::vector<StepInfo> steps = p.h.tier->ListSteps("job");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].persist, PersistState::kQueued);  // resumes at the next start
}

}  // namespace
}  // namespace tierckpt::agent
