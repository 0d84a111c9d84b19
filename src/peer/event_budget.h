// event_budget.h — a budget of log lines per time window, so that a flood of
// events caused by strangers (connections to the peer port turned away)
// cannot flood the log.
//
// Admit(now) says whether one more event may be logged: at most `burst` per
// window of `window` length, windows starting at the first event after the
// previous one ended. Events beyond the burst are counted, not logged;
// TakeSuppressed() hands that count (and resets it) so the owner can log one
// summary line ("N more suppressed") at the end of the window or on close.
// The caller passes the time, so tests drive it without sleeping.
//
// Thread safety: none; the owner serialises calls (HandshakingListener holds
// its mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace tierckpt::peer {

class EventBudget {
 public:
  using Clock = std::chrono::steady_clock;

  // Precondition: burst >= 1, window > 0.
  EventBudget(size_t burst, Clock::duration window) : burst_(burst), window_(window) {}

  // True when the event may be logged; false when it is counted as
  // suppressed.
  bool Admit(Clock::time_point now);

  // Events suppressed and not yet taken.
  uint64_t suppressed() const { return suppressed_; }
  // When the current window ends (meaningful once an event was admitted):
  // the time to report a non-zero suppressed() count.
  Clock::time_point window_end() const { return window_start_ + window_; }
  // Returns suppressed() and resets it.
  uint64_t TakeSuppressed();

 private:
  // Const after construction.
  const size_t burst_;
  const Clock::duration window_;

  bool started_ = false;
  Clock::time_point window_start_{};
  size_t admitted_ = 0;  // in the current window
  uint64_t suppressed_ = 0;
};

}  // namespace tierckpt::peer
