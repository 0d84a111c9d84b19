// metrics.h — what the agent counts, and its Prometheus text exposition
// (docs/operations.md lists every series).
//
// One Metrics is the set the agent's parts report into, as they log. The
// agent owns it and passes it to each part (MemoryTierOptions::metrics,
// PersisterOptions::metrics, PeerServiceDeps::metrics, CommitDeps, the
// cluster, RecentErrors, MetricsServer), as leveldb passes its statistics in
// through Options; there is no process-wide instance, so a test reads the
// one it passed in. What is counted: a commit, a restore, a replication, a persist (count, bytes,
// latency histogram, failures), evictions by reason, errors by kind, persist
// retries, commits per namespace, the scrub's objects hashed, corrupt
// and repaired. Gauges that describe state (budget, bytes,
// queues, peers) are not stored here: the caller passes them to Render at
// scrape time, read from the tier and the queues then.
//
// Thread-safe: counters are atomics, the labelled maps and histogram sums
// take a mutex. Render output is the text format 0.0.4, one HELP and TYPE
// per family, label values escaped.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace tierckpt::agent {

// Latency buckets (seconds) shared by every operation histogram.
inline constexpr std::array<double, 12> kLatencyBuckets = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25,
                                                           0.5,   1,     2.5,  10,   60,  300};

class Histogram {
 public:
  void Observe(double seconds);
  // Cumulative counts per bucket (then +Inf = count), and the sum.
  void Read(std::array<uint64_t, kLatencyBuckets.size()>* cumulative, uint64_t* count, double* sum) const;

 private:
  std::array<std::atomic<uint64_t>, kLatencyBuckets.size()> buckets_{};  // not cumulative
  std::atomic<uint64_t> count_{0};
  mutable Mutex mu_;
  double sum_ GUARDED_BY(mu_) = 0;
};

// One kind of operation: how many succeeded and failed, bytes moved by the
// successful ones, and their latency.
struct OpMetrics {
  std::atomic<uint64_t> ok{0};
  std::atomic<uint64_t> failed{0};
  std::atomic<uint64_t> bytes{0};
  Histogram seconds;

  void Succeeded(uint64_t bytes_moved, double secs);
  void Failed() { failed.fetch_add(1, std::memory_order_relaxed); }
};

// A gauge value the caller reads at scrape time.
struct Gauge {
  std::string name;    // full series name, e.g. "tierckpt_memory_budget_bytes"
  std::string help;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;
};

class Metrics {
 public:
  OpMetrics commit;     // memory commits (a node's part for steps spanning nodes)
  OpMetrics restore;    // steps restored into memory (durable or peers)
  OpMetrics replicate;  // replications of a committed step to its holders
  OpMetrics persist;    // steps made durable
  std::atomic<uint64_t> persist_retries{0};
  // The scrub (agent/scrubber.h): objects re-hashed, found corrupt, and
  // replaced from another tier.
  std::atomic<uint64_t> scrub_objects{0};
  std::atomic<uint64_t> scrub_corrupt{0};
  std::atomic<uint64_t> scrub_repaired{0};

  // A committed step dropped from memory; why is the drop's reason text.
  void Dropped(std::string_view why);
  void CommittedStep(std::string_view ns);
  void Error(std::string_view kind);

  // The whole exposition: every family above, then the gauges.
  std::string Render(const std::vector<Gauge>& gauges) const;

  // Zeroes everything (tests).
  void ResetForTest();

 private:
  mutable Mutex mu_;
  std::map<std::string, uint64_t, std::less<>> evictions_ GUARDED_BY(mu_);  // by reason
  std::map<std::string, uint64_t, std::less<>> commits_ GUARDED_BY(mu_);    // by namespace
  std::map<std::string, uint64_t, std::less<>> errors_ GUARDED_BY(mu_);     // by kind
};

// "retention" | "budget" | "deleted" | "aborted" | "other", from a drop's why.
std::string_view DropReason(std::string_view why);

}  // namespace tierckpt::agent
