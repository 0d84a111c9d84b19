// scrubber.h — the periodic scrub: re-hashes every committed step of this
// node's memory tier once per interval, in the background, so that rot at
// rest is found in steps nobody loads, and so that reads in "attested" mode
// (Client::ReadVerify) can trust a recent verification instead of hashing.
//
// A pass (ScrubOnce) walks the committed steps (ns, step order) and their
// objects one at a time: it pins the object (MemoryTier::ReadCommittedObject;
// the tier's mutex is not held while hashing), hashes it through the agent's
// kept read mapping, and
//   * on a match records the verification (MemoryTier::MarkVerified: the time
//     the hash began), which OpenObject then reports as verified_age_ms;
//   * on a mismatch does what a client's repair does (ReadPath::Open with
//     repair: the copy is re-hashed, dropped only when another tier holds the
//     step, and the step restored from the replica holders or the durable
//     tier; verified on the way in), then moves to the next step. Either way
//     the finding goes to the recent-errors ring (event "scrub") and the
//     metrics (scrub_corrupt, scrub_repaired). A corrupt copy no other tier
//     holds stays (as a repair leaves it), and is reported again each pass.
// Steps dropped or replaced while a pass runs are skipped (their objects'
// verification is not recorded on the new copy).
//
// The thread (Start) runs a pass every `interval` (the first one interval
// after Start), at the agent's --background-priority; interval 0 = no thread.
// With deps.replicas, a pass then walks the replicas this node holds for
// other nodes (ReplicaTiers) the same way (one object pinned at a time, no
// tier mutex held while hashing); a corrupt replica step is re-checked (same
// life, still mismatching) and dropped: it is a spare copy, its origin or the
// durable tier holds the step. Counted in corrupt/scrub_corrupt and
// replicas_dropped; event "scrub_replica". With deps.parity, a pass ends
// with ParityHolder::Scrub: every sealed group's pieces re-hashed against
// its record, a group that fails dropped (its members' rebuilds then use
// their other pieces; decision 160). Counted in corrupt/scrub_corrupt and
// parity_dropped; event "scrub_parity". What it does not scrub: this
// node's copies of other members' parts (docs/agent.md, "The scrub").
//
// Thread safety: ScrubOnce may run from any thread, but one at a time (the
// thread's and a test's must not overlap); Start/Stop from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "agent/read_path.h"
#include "common/mutex.h"
#include "ops/metrics.h"
#include "ops/recent_errors.h"
#include "os/thread_priority.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

class ParityHolder;
class ReplicaTiers;

struct ScrubberOptions {
  // Between passes; 0 = no background scrub (ScrubOnce still works).
  std::chrono::milliseconds interval = std::chrono::minutes(10);
  ThreadPriority priority = ThreadPriority::kLow;
};

struct ScrubberDeps {
  MemoryTier* tier = nullptr;      // this node's memory tier (required)
  ReadPath* read_path = nullptr;   // repairs (required), shared with the handlers
  RecentErrors* errors = nullptr;  // required
  Metrics* metrics = nullptr;      // required
  ReplicaTiers* replicas = nullptr;  // the replicas held for other nodes; null = none
  ParityHolder* parity = nullptr;    // the parity pieces held for groups (--redundancy rs:K+M); null = none
};

// What one pass did.
struct ScrubReport {
  uint32_t steps = 0;                 // committed steps looked at
  uint32_t objects = 0;               // objects hashed
  uint32_t corrupt = 0;               // objects that did not match their manifest
  uint32_t repaired = 0;              // of those, replaced from another tier
  uint32_t replicas_dropped = 0;      // corrupt replica steps (held for other nodes) dropped
  uint32_t parity_groups = 0;         // sealed parity groups held here whose every piece checked out
  uint32_t parity_dropped = 0;        // parity groups that did not, dropped
  std::vector<std::string> findings;  // one line per corrupt object: what was found and done
};

// What the scrub has done since construction (Stats' "scrub"): the sums of
// the passes' ScrubReports (background or ScrubOnce) and when the last ended.
struct ScrubCounters {
  uint64_t passes = 0;
  uint64_t last_pass_unix_ms = 0;  // 0 = no pass has ended yet
  uint64_t objects = 0;
  uint64_t corrupt = 0;
  uint64_t repaired = 0;
};

class Scrubber {
 public:
  // The collaborators must outlive the Scrubber.
  Scrubber(ScrubberOptions options, ScrubberDeps deps);
  ~Scrubber();  // Stop()
  Scrubber(const Scrubber&) = delete;
  Scrubber& operator=(const Scrubber&) = delete;

  // Starts the background thread (nothing when the interval is 0).
  void Start();
  // Stops the thread: a running pass ends after the object it is hashing.
  void Stop();

  // One pass now, on the calling thread.
  ScrubReport ScrubOnce();

  ScrubCounters counters() const {
    MutexLock lock(&mu_);
    return counters_;
  }

 private:
  void Loop();
  bool stopping() const;
  // Scrubs one step; false when the pass must stop (Stop called).
  bool ScrubStep(const std::string& ns, uint64_t step, ScrubReport* report);
  // The same for a replica step held for `origin` in `tier`; drops it if corrupt.
  bool ScrubReplicaStep(const std::string& origin, MemoryTier* tier, const std::string& ns, uint64_t step,
                        ScrubReport* report);
  // The parity pieces this node holds (deps.parity): groups that fail dropped.
  void ScrubParity(ScrubReport* report);

  // Const after construction.
  const ScrubberOptions options_;
  const ScrubberDeps d_;

  mutable Mutex mu_;
  CondVar cv_{&mu_};  // Stop
  bool stopping_ GUARDED_BY(mu_) = false;
  ScrubCounters counters_ GUARDED_BY(mu_);  // added to at the end of each ScrubOnce
  std::thread thread_;
};

}  // namespace tierckpt::agent
