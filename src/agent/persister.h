// persister.h — background copies of committed memory-tier steps to the
// durable tier.
//
// A job is one committed step (Enqueue(ns, step); MemoryTier calls it through
// its persist hook). A persist thread takes the step from the memory tier
// (StartPersist: pinned, kRunning), clears what an interrupted earlier
// attempt left of the step in the durable tier (an uncommitted step is
// garbage; the agent persists whole steps), maps each object file read-only, checks
// its checksum against the manifest (a damaged memory copy is never
// persisted), PutObject()s it, then commits the manifest in the durable tier
// (a durable step already committed with an identical manifest counts as
// success). Then durable retention (keep the newest durable_keep steps of the
// namespace; 0 = all; never the newest), the marker is removed and the step
// is kDurable. One "persist" log line per step with bytes, ms and MB/s.
//
// Garbage collection: the first time a step of a namespace becomes durable
// in this agent's life, the persister sweeps the namespace's uncommitted
// durable steps older than that step (what interrupted persists of steps no
// longer in memory left behind: objects without a manifest, open multipart
// uploads), except steps this persister is writing; jobs wait to start while
// the sweep runs. Once per namespace and start, because on S3 a sweep costs a
// listing plus one HEAD per step. Assumes one agent persists a namespace
// (multi-node writers: issue 5). A failed sweep is logged, never fails the
// persist.
//
// Errors: retriable ones (I/O, unavailable, timeout, resource exhausted,
// internal) are retried up to max_retries times after backoffs of
// first_backoff, x4, x16 (100 ms, 400 ms, 1.6 s by default); then, as for
// non-retriable errors, the step is kFailed with the error (logged, kept in
// RecentErrors, returned by WaitDurable). The marker stays, so the next
// agent start retries.
//
// Shutdown: Stop(grace) lets running jobs finish for up to `grace`, then
// cancels them at the next object boundary (the step returns to kQueued and
// resumes at the next start); jobs not started yet are left queued.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include "agent/memory_tier.h"
#include "agent/recent_errors.h"
#include "agent/work_queue.h"
#include "store/object_store.h"

namespace tierckpt::agent {

struct PersisterOptions {
  int threads = 2;
  uint32_t durable_keep = 0;  // 0 = keep every durable step
  int max_retries = 3;
  std::chrono::milliseconds first_backoff{100};
};

class Persister {
 public:
  // tier, store and errors must outlive the persister.
  Persister(PersisterOptions options, MemoryTier* tier, ObjectStore* store, RecentErrors* errors);
  ~Persister();  // Stop(0)
  Persister(const Persister&) = delete;
  Persister& operator=(const Persister&) = delete;

  void Enqueue(const std::string& ns, uint64_t step);
  void Stop(std::chrono::milliseconds grace);

  size_t queued() const { return queue_.queued(); }
  size_t running() const { return queue_.running(); }

 private:
  void Run(const std::string& ns, uint64_t step);
  Status PersistOnce(const PersistLease& lease);
  void ApplyDurableRetention(const std::string& ns);
  // The once-per-namespace sweep described above.
  void SweepOnce(const std::string& ns, uint64_t durable_step);
  // Sleeps unless cancelled; false when cancelled.
  bool Backoff(std::chrono::milliseconds d);

  // Const after construction.
  const PersisterOptions options_;
  MemoryTier* const tier_;
  ObjectStore* const store_;
  RecentErrors* const errors_;

  std::atomic<bool> stopping_{false};  // no new jobs start
  std::atomic<bool> cancel_{false};    // running jobs stop at the next object
  std::mutex sleep_mu_;
  std::condition_variable sleep_cv_;   // wakes backoffs on cancel
  WorkQueue queue_;
  std::mutex gc_mu_;  // held by a sweep; jobs take it to (un)register
  std::set<std::pair<std::string, uint64_t>> running_;  // guarded by gc_mu_
  std::set<std::string> swept_;                         // guarded by gc_mu_
};

// True for codes worth retrying against a durable medium.
bool IsRetriable(const Status& s);

}  // namespace tierckpt::agent
