// fake_clock.h — a RateLimiterClock for tests (test-only): time moves only
// when a caller sleeps (advance_on_sleep, the default) or the test calls
// Advance, so rate-limited code runs at full speed and its waits are exact.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "common/rate_limiter.h"

namespace tierckpt::testing {

class FakeClock final : public RateLimiterClock {
 public:
  explicit FakeClock(bool advance_on_sleep = true) : advance_on_sleep_(advance_on_sleep) {}
  TimePoint Now() override { return TimePoint(std::chrono::nanoseconds(now_ns_.load())); }
  void SleepFor(std::chrono::nanoseconds d) override {
    slept_ns_ += d.count();
    if (advance_on_sleep_) now_ns_ += d.count();
  }
  void Advance(std::chrono::nanoseconds d) { now_ns_ += d.count(); }
  // Total asked to sleep, over every thread.
  int64_t slept_ns() const { return slept_ns_.load(); }

 private:
  const bool advance_on_sleep_;
  std::atomic<int64_t> now_ns_{1'000'000'000};
  std::atomic<int64_t> slept_ns_{0};
};

}  // namespace tierckpt::testing
