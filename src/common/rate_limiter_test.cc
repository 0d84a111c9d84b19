#include "common/rate_limiter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "testing/fake_clock.h"

namespace tierckpt {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;

using testing::FakeClock;

TEST(RateLimiterTest, UnlimitedNeverWaits) {
  FakeClock clock;
  RateLimiter limiter(0, 0, &clock);
  EXPECT_TRUE(limiter.unlimited());
  EXPECT_EQ(limiter.Acquire(1ull << 40).count(), 0);
  EXPECT_EQ(clock.slept_ns(), 0);
}

TEST(RateLimiterTest, BurstPassesThenBytesWaitForTheRate) {
  FakeClock clock;
  RateLimiter limiter(1000, 1000, &clock);      // 1000 B/s, 1000 B of burst
  EXPECT_EQ(limiter.Acquire(1000).count(), 0);  // the full bucket
  EXPECT_EQ(limiter.Acquire(500), milliseconds(500));
  EXPECT_EQ(limiter.Acquire(2000), milliseconds(2000));  // larger than the burst: waits longer
  EXPECT_EQ(clock.slept_ns(), 2'500'000'000);
  EXPECT_EQ(limiter.charged_bytes(), 3500u);
}

TEST(RateLimiterTest, IdleTimeRefillsUpToTheBurstOnly) {
  FakeClock clock;
  RateLimiter limiter(1000, 1000, &clock);
  EXPECT_EQ(limiter.Acquire(1000).count(), 0);
  clock.Advance(std::chrono::seconds(60));  // would be 60000 tokens without the cap
  EXPECT_EQ(limiter.Acquire(1000).count(), 0);
  EXPECT_EQ(limiter.Acquire(1000), milliseconds(1000));
}

TEST(RateLimiterTest, DefaultBurstIsAQuarterSecondAtLeastOneMiB) {
  EXPECT_EQ(RateLimiter(400u << 20).burst_bytes(), 100u << 20);
  EXPECT_EQ(RateLimiter(1u << 20).burst_bytes(), 1u << 20);
}

// Threads share one limiter: their waits add up to the total over the rate,
// whatever their number (the cap is per limiter, not per thread).
TEST(RateLimiterTest, ConcurrentCallersShareOneRate) {
  FakeClock clock(
      /*advance_on_sleep=*/false);  // time stands still: every reservation queues behind the others
  RateLimiter limiter(1 << 20, 1 << 20, &clock);   // 1 MiB/s
  ASSERT_EQ(limiter.Acquire(1 << 20).count(), 0);  // empty the bucket
  std::atomic<int64_t> max_wait{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4; ++i) {
        int64_t w = limiter.Acquire(1 << 20).count();
        int64_t m = max_wait.load();
        while (w > m && !max_wait.compare_exchange_weak(m, w)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  // 32 MiB at 1 MiB/s: the last reservation waits 32 s.
  EXPECT_EQ(max_wait.load(), 32'000'000'000);
  EXPECT_EQ(limiter.charged_bytes(), 33u << 20);
}

TEST(RateLimiterTest, CancelledWaitReturnsEarly) {
  FakeClock clock;
  RateLimiter limiter(1000, 1000, &clock);
  ASSERT_EQ(limiter.Acquire(1000).count(), 0);
  int asked = 0;
  bool cancelled = false;
  nanoseconds waited = limiter.Acquire(
      10000, [&] { return ++asked > 2; }, &cancelled);  // 10 s of debt, cancelled after two slices
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(waited, 2 * RateLimiter::kCancelCheck);
  EXPECT_LT(clock.slept_ns(), 1'000'000'000);
}

}  // namespace
}  // namespace tierckpt
