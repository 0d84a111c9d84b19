#include "ops/recent_errors.h"

#include <chrono>

namespace tierckpt::agent {

uint64_t NowUnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void RecentErrors::Add(std::string event, const Status& status) {
  if (status.ok()) return;
  metrics_->Error(event);
  ErrorRecord r;
  r.unix_ms = NowUnixMs();
  r.event = std::move(event);
  r.code = std::string(ToString(status.code()));
  r.message = status.message();
  MutexLock lock(&mu_);
  records_.push_back(std::move(r));
  while (records_.size() > capacity_) records_.pop_front();
}

std::vector<ErrorRecord> RecentErrors::Snapshot() const {
  MutexLock lock(&mu_);
  return {records_.begin(), records_.end()};
}

}  // namespace tierckpt::agent
