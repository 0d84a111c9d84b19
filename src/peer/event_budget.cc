#include "peer/event_budget.h"

namespace tierckpt::peer {

bool EventBudget::Admit(Clock::time_point now) {
  if (!started_ || now >= window_start_ + window_) {
    started_ = true;
    window_start_ = now;
    admitted_ = 0;
  }
  if (admitted_ < burst_) {
    ++admitted_;
    return true;
  }
  ++suppressed_;
  return false;
}

uint64_t EventBudget::TakeSuppressed() {
  uint64_t n = suppressed_;
  suppressed_ = 0;
  return n;
}

}  // namespace tierckpt::peer
