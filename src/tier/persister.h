// persister.h — background copies of committed memory-tier steps to the
// durable tier.
//
// A job is one committed step (Enqueue(ns, step); MemoryTier calls it through
// its persist hook). A persist thread takes the step from the memory tier
// (StartPersist: pinned, kRunning), clears what an interrupted earlier
// attempt left of the step in the durable tier (an uncommitted step is
// garbage; the agent persists whole steps), maps each object file read-only, checks
// its checksum against the manifest (a damaged memory copy is never
// persisted), PutObjects() the whole step in one call (S3 plans the requests
// of all its objects together), then commits the manifest in the durable tier
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
// agent start retries; a retriable error is also tried again every
// retry_later while the agent runs (RetryLater), so a durable filesystem
// that filled up gets the step once space returns. Memory retention keeps a
// failed step (MemoryTier), so nothing waits for a retry that is gone.
//
// Steps spanning nodes (docs/multinode.md): each member persists its own part:
// its objects, then its part record (PartRecordName(node): its part
// manifest with the members as a count and digest, tier/part_record.h,
// decision 113) into the shared step directory, which is never cleared first
// (other nodes' objects are there). One member, the merger (MergeTurn,
// tier/parts.h; decision 87), then waits for the other members' part records,
// reading each once it exists and adding it to a PartMerger at once (which
// keeps its objects only, decision 112), and writes the merged manifest
// with the store's exclusive commit; every other member only reads the
// manifest (backoff 50 ms doubling to 1 s) until it appears, or until its turn
// to take over comes (turn × takeover_after: a merger that died), when it
// merges as the merger does. Two mergers race safely: the loser of the
// exclusive commit finds the same objects committed, which is success; so
// does a member whose upload the store refused because a follower committed
// the step while it was stopped or slow (the manifest lists its part). So a
// step of N nodes costs O(N) store requests. A member whose part record is still
// missing after takeover_after is asked, through ask_elsewhere, to upload
// it, and when it cannot answer one of its holders uploads it from its
// replica; after wait_limit the step fails (marker kept: the next start
// retries). UploadPart is that upload alone, from any tier (this node's, or
// a replica tier when this node takes over for another).
// The wait holds no persist thread (decision 152): once this node's part is
// uploaded, each look at the durable tier (MergePass) is a job of its own;
// between two looks the step is parked (its lease, so its pin, and where its
// wait stands kept in parked_) and a timer thread (parts_timer_) queues the
// next look after the backoff. A step whose other parts never come (a part
// committed down a commit tree whose coordinator then failed the step) so
// waits out wait_limit without delaying any other step's persist; before,
// two such steps held both persist threads for an hour and every other step
// of the node waited behind them. The step stays kRunning while parked, as
// it did while a thread waited.
//
// Caps (docs/agent.md, "Background work"): with options.rate, each object is
// paid for (RateLimiter::Acquire of its size, shared by every persist thread
// and so capping the agent's upload rate) before it is checked and put, and
// a batch goes out once it holds a burst's worth; a cap paces per object, as
// the store writes an object in one call. options.priority lowers the persist
// threads' CPU/IO priority (os/thread_priority.h) when they start.
//
// Shutdown: Stop(grace) lets running jobs finish for up to `grace`, then
// cancels them before their next store request (the step returns to kQueued and
// resumes at the next start); jobs not started yet are left queued; parked
// steps return to kQueued too.
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "common/rate_limiter.h"
#include "common/work_queue.h"
#include "ops/recent_errors.h"
#include "os/thread_priority.h"
#include "store/object_store.h"
#include "tier/memory_tier.h"
#include "tier/part_record.h"
#include "tier/parts.h"

namespace tierckpt::agent {

// Whether two manifests name the same step with the same objects (names,
// sizes, checksums): a durable copy that counts as the memory copy's.
bool SameObjects(const Manifest& a, const Manifest& b);

struct PersisterOptions {
  int threads = 2;
  uint32_t durable_keep = 0;  // 0 = keep every durable step
  int max_retries = 3;
  std::chrono::milliseconds first_backoff{100};
  // A step that still fails with a retriable error (a full filesystem:
  // ENOSPC, EDQUOT; EIO; an unreachable store) after max_retries is kFailed
  // (its waiters get the error) and is requested again this long after, and
  // so on while it fails and is in memory: it persists once the medium has
  // room again, without a restart.
  std::chrono::milliseconds retry_later{10000};
  // A step goes to the store in one PutObjects call (the store plans its
  // requests together) unless it holds more than batch_objects objects or
  // more than batch_copied_bytes of objects small enough to be read into
  // heap copies (ReadMappings' min_file_bytes): then in batches of those
  // bounds, whose memory copies and mappings are released batch by batch.
  size_t batch_objects = 4096;
  uint64_t batch_copied_bytes = 256ULL << 20;
  // Caps the bytes per second of uploads (null or unlimited: no cap). Shared
  // with nothing else; must outlive the persister.
  RateLimiter* rate = nullptr;
  // Priority of the persist threads.
  ThreadPriority priority = ThreadPriority::kNormal;
  // Where persists and retries are counted (required; must outlive the
  // persister): the agent's one.
  Metrics* metrics = nullptr;
};

struct PartsOptions {
  std::string node_id;
  // Has another node upload origin's part (agent: Replicator::PersistPartElsewhere); returns who did.
  std::function<Result<std::string>(const std::string& origin, const std::string& ns, uint64_t step)> ask_elsewhere;
  std::chrono::milliseconds takeover_after{60000};
  std::chrono::milliseconds wait_limit{3600 * 1000};
};

class Persister {
 public:
  // tier, store and errors must outlive the persister.
  Persister(PersisterOptions options, MemoryTier* tier, ObjectStore* store, RecentErrors* errors);
  ~Persister();  // Stop(0)
  Persister(const Persister&) = delete;
  Persister& operator=(const Persister&) = delete;

  // Before the first Enqueue.
  void SetParts(PartsOptions parts) { parts_ = std::move(parts); }

  void Enqueue(const std::string& ns, uint64_t step);
  // Uploads the committed (ns, step) of tier (its objects, checked against
  // the manifest, then its part record) without merging. Thread-safe.
  Status UploadPart(MemoryTier* tier, const std::string& ns, uint64_t step);
  void Stop(std::chrono::milliseconds grace);

  size_t queued() const { return queue_.queued(); }
  size_t running() const { return queue_.running(); }
  // Steps spanning nodes parked until the other members' parts are durable.
  size_t awaiting_parts() const;
  // Ends the wait of a parked (ns, step) as shutdown would (kQueued, its
  // marker kept), so that a delete by hand can drop a part whose other parts
  // will never come (decision 152). False when the step is not parked (not
  // spanning nodes, durable, or in the middle of one of its looks: a delete
  // then says it is being persisted, and a second try a moment later finds
  // it parked).
  bool CancelAwaitingParts(const std::string& ns, uint64_t step) EXCLUDES(parked_mu_);

 private:
  using StepKey = std::pair<std::string, uint64_t>;
  // Where the wait of a parked step stands (decision 152): what AwaitParts'
  // loop kept in its locals, and the lease, so the pin, while parked.
  struct PartsWait {
    explicit PartsWait(const Manifest& part);
    PersistLease lease;  // moved in by Run when the step parks
    std::chrono::steady_clock::time_point start;     // when the part was uploaded
    std::chrono::steady_clock::time_point last_ask;  // of ask_elsewhere
    std::chrono::steady_clock::time_point t0;        // when the persist started (its log line's ms)
    std::chrono::milliseconds delay{50};             // the next backoff: 50 ms doubling to 1 s
    int attempt = 1;                                 // of the persist, for its log line
    int errors = 0;                                  // retriable errors of the looks, in a row
    size_t turn = 0;                                 // MergeTurn of this node
    bool merging = false;                            // the merger, or a follower whose turn came
    std::optional<PartMerger> merger;                // the records found so far
  };

  void Run(const std::string& ns, uint64_t step);
  // One persist attempt. For a step spanning nodes whose other parts are not
  // durable yet it returns Ok with *wait set (this node's part uploaded,
  // where the wait stands): the caller parks the step. Sets
  // lease.found_durable when the durable tier already held the step.
  Status PersistOnce(PersistLease& lease, std::shared_ptr<PartsWait>* wait);
  // A retriable failure about to be tried again after backoff: counted and logged (`persist retry`).
  void CountRetry(const std::string& ns, uint64_t step, int attempt, std::chrono::milliseconds backoff,
                  const Status& st);
  // The end of a persist (durable, failed or cancelled): the tier's state,
  // the log line, metrics, durable retention, a later retry. A recheck that
  // found the durable copy in place logs `durable_confirmed`, not `persist`,
  // and counts in no persist metric: nothing was written (decision 167).
  void Finish(const std::string& ns, uint64_t step, PersistLease lease, Status st, int attempt,
              std::chrono::steady_clock::time_point t0);
  // One look for w (MergePass), then the step's end or its parking.
  void Look(std::shared_ptr<PartsWait> w) EXCLUDES(parked_mu_);
  // Parks w (its lease moved in) until its next look, after w->delay.
  void Park(std::shared_ptr<PartsWait> w) EXCLUDES(parked_mu_);
  // The job of a parked step's next look (on queue_).
  void Resume(const StepKey& key) EXCLUDES(parked_mu_);
  // Removes and returns the parked wait of key; null when none.
  std::shared_ptr<PartsWait> Unpark(const StepKey& key) EXCLUDES(parked_mu_);
  // A parked step given up by shutdown: back to kQueued (the marker brings it back).
  void Abandon(std::shared_ptr<PartsWait> w);
  // Puts every object of the lease's step from tier, each checked first, in
  // PutObjects batches (options_.batch_objects, batch_copied_bytes): one
  // for any usual step.
  Status UploadObjects(MemoryTier* tier, const PersistLease& lease);
  Status UploadPartOf(MemoryTier* tier, const PersistLease& lease);
  // One look of the merge wait described above, for this node's part: true
  // when the durable tier holds the step with this part (merged here or by
  // another member), false while parts are missing (look again after
  // w.delay), an error when the step cannot become durable (wait_limit
  // passed, a different durable copy, a store error).
  Result<bool> MergePass(PartsWait& w);
  // The part record of member, or kNotFound.
  Result<PartRecord> ReadPartRecord(const Manifest& part, const std::string& member);
  void ApplyDurableRetention(const std::string& ns);
  // The once-per-namespace sweep described above.
  void SweepOnce(const std::string& ns, uint64_t durable_step);
  // Sleeps unless cancelled; false when cancelled.
  bool Backoff(std::chrono::milliseconds d);
  // Requests (ns, step) again retry_later from now (on retry_queue_, whose
  // one thread takes the requests in the order they fall due).
  void RetryLater(const std::string& ns, uint64_t step);

  // Const after construction.
  const PersisterOptions options_;
  PartsOptions parts_;  // set before the first job
  MemoryTier* const tier_;
  ObjectStore* const store_;
  RecentErrors* const errors_;

  std::atomic<bool> stopping_{false};  // no new jobs start
  std::atomic<bool> cancel_{false};    // running jobs stop at the next object
  Mutex sleep_mu_;
  CondVar sleep_cv_{&sleep_mu_};  // wakes backoffs on cancel
  WorkQueue queue_;
  WorkQueue retry_queue_;
  // One thread: queues each parked step's next look on queue_ when it falls due.
  WorkQueue parts_timer_;
  mutable Mutex parked_mu_;
  std::map<StepKey, std::shared_ptr<PartsWait>> parked_ GUARDED_BY(parked_mu_);
  Mutex gc_mu_;  // held by a sweep; jobs take it to (un)register
  std::set<std::pair<std::string, uint64_t>> running_ GUARDED_BY(gc_mu_);
  std::set<std::string> swept_ GUARDED_BY(gc_mu_);
};

// True for codes worth retrying against a durable medium.
bool IsRetriable(const Status& s);

}  // namespace tierckpt::agent
