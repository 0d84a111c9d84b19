// rate_limiter.h — a token bucket that caps the bytes per second a kind of
// background work sends (the persister's uploads, replica streams), shared by
// every thread doing that work so the cap holds per agent, not per thread.
//
// Tokens are bytes. The bucket fills at rate_bytes_per_s up to burst_bytes.
// Acquire(n) takes n tokens at once, letting the bucket go into debt when it
// holds fewer, and then sleeps until the debt this call added is repaid: the
// caller sends its n bytes after the wait. Reservations are made in call order
// under the mutex; the sleep happens without it, so concurrent callers wait
// one behind the other and together never send faster than the rate (plus
// one burst). A request larger than the burst passes: it just waits longer.
// Charge in the units the bytes go out in (a stream's chunk, an object).
//
// rate_bytes_per_s = 0 means unlimited: Acquire returns at once.
//
// The clock is injected (RateLimiterClock) so tests run without sleeping.
//
// Thread-safe. The clock must outlive the limiter and be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace tierckpt {

class RateLimiterClock {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  virtual ~RateLimiterClock() = default;
  virtual TimePoint Now() = 0;
  virtual void SleepFor(std::chrono::nanoseconds d) = 0;
  // steady_clock and std::this_thread::sleep_for.
  static RateLimiterClock* Real();
};

class RateLimiter {
 public:
  // burst_bytes = 0 picks a quarter second's worth of the rate (at least 1 MiB).
  explicit RateLimiter(uint64_t rate_bytes_per_s, uint64_t burst_bytes = 0,
                       RateLimiterClock* clock = RateLimiterClock::Real());
  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;

  // Takes `bytes` tokens and waits until they are paid for. Returns how
  // long it waited. `cancelled` (may be empty) is asked every
  // kCancelCheck while waiting; once it says true, Acquire returns early
  // (the tokens stay spent) and sets *was_cancelled when given.
  std::chrono::nanoseconds Acquire(uint64_t bytes, const std::function<bool()>& cancelled = {},
                                   bool* was_cancelled = nullptr);

  uint64_t rate_bytes_per_s() const { return rate_; }
  uint64_t burst_bytes() const { return burst_; }
  bool unlimited() const { return rate_ == 0; }
  // Bytes charged so far (tests, logs).
  uint64_t charged_bytes() const;

  static constexpr std::chrono::milliseconds kCancelCheck{50};

 private:
  // Const after construction.
  const uint64_t rate_;
  const uint64_t burst_;
  RateLimiterClock* const clock_;

  mutable Mutex mu_;
  double tokens_ GUARDED_BY(mu_);  // may be negative: a debt being repaid
  RateLimiterClock::TimePoint last_ GUARDED_BY(mu_);
  uint64_t charged_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierckpt
