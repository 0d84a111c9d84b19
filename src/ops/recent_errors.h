// recent_errors.h — the last few errors the agent met, for `tierckpt agent
// status` (Stats "last_errors").
//
// Each error added is also counted in metrics (tierckpt_errors_total, by
// event).
//
// Thread-safe. Holds at most `capacity` entries; the oldest is dropped first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "ops/metrics.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct ErrorRecord {
  uint64_t unix_ms = 0;
  std::string event;    // "persist", "recovery", "commit", "connection", ...
  std::string code;     // ToString(code)
  std::string message;
};

class RecentErrors {
 public:
  // metrics must outlive this.
  explicit RecentErrors(Metrics* metrics, size_t capacity = 10) : metrics_(metrics), capacity_(capacity) {}

  void Add(std::string event, const Status& status);
  std::vector<ErrorRecord> Snapshot() const;  // oldest first

 private:
  Metrics* const metrics_;
  const size_t capacity_;
  mutable Mutex mu_;
  std::deque<ErrorRecord> records_ GUARDED_BY(mu_);
};

uint64_t NowUnixMs();

}  // namespace tierckpt::agent
