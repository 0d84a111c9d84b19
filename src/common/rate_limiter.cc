// rate_limiter.cc — see rate_limiter.h.
#include "common/rate_limiter.h"

#include <algorithm>
#include <thread>

namespace tierckpt {
namespace {

class RealClock final : public RateLimiterClock {
 public:
  TimePoint Now() override { return std::chrono::steady_clock::now(); }
  void SleepFor(std::chrono::nanoseconds d) override { std::this_thread::sleep_for(d); }
};

uint64_t DefaultBurst(uint64_t rate) { return std::max<uint64_t>(rate / 4, 1u << 20); }

}  // namespace

RateLimiterClock* RateLimiterClock::Real() {
  static RealClock clock;
  return &clock;
}

RateLimiter::RateLimiter(uint64_t rate_bytes_per_s, uint64_t burst_bytes, RateLimiterClock* clock)
    : rate_(rate_bytes_per_s),
      burst_(burst_bytes != 0 ? burst_bytes : DefaultBurst(rate_bytes_per_s)),
      clock_(clock),
      tokens_(static_cast<double>(burst_)),
      last_(clock->Now()) {}

uint64_t RateLimiter::charged_bytes() const {
  MutexLock lock(&mu_);
  return charged_;
}

std::chrono::nanoseconds RateLimiter::Acquire(uint64_t bytes, const std::function<bool()>& cancelled,
                                              bool* was_cancelled) {
  if (was_cancelled != nullptr) *was_cancelled = false;
  if (rate_ == 0) return std::chrono::nanoseconds(0);
  std::chrono::nanoseconds wait{0};
  {
    MutexLock lock(&mu_);
    const auto now = clock_->Now();
    if (now > last_) {
      const double elapsed_s = std::chrono::duration<double>(now - last_).count();
      tokens_ = std::min(static_cast<double>(burst_), tokens_ + elapsed_s * static_cast<double>(rate_));
      last_ = now;
    }
    tokens_ -= static_cast<double>(bytes);
    charged_ += bytes;
    if (tokens_ < 0) {
      wait = std::chrono::nanoseconds(static_cast<int64_t>(-tokens_ / static_cast<double>(rate_) * 1e9));
    }
  }
  // Never sleep under mu_: others reserve behind this call meanwhile.
  std::chrono::nanoseconds left = wait;
  while (left.count() > 0) {
    if (cancelled && cancelled()) {
      if (was_cancelled != nullptr) *was_cancelled = true;
      return wait - left;
    }
    const std::chrono::nanoseconds slice = std::min<std::chrono::nanoseconds>(left, kCancelCheck);
    clock_->SleepFor(slice);
    left -= slice;
  }
  return wait;
}

}  // namespace tierckpt
