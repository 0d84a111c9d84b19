// memory_tier.h — the node agent's shared-memory tier: committed and
// in-flight steps as files on a tmpfs root, under a byte budget, with
// per-namespace retention, recycled segments, and crash recovery.
//
// Layout on disk: tier/layout.h. Index: tier/step_state.h.
//
// Write path (one or more client connections per step):
//   BeginStep → CreateObject (an O_RDWR fd of a tmpfs file sized exactly;
//   the client fills it through mmap) → SealObject (size checked; hashing runs
//   on the verifier queue) → CommitStep (waits for the hashes, writes the
//   manifest last, renames step_<n>.partial → step_<n>: the atomic publish).
// CreateObject begins the step implicitly if no connection has (documented
// in docs/agent.md). A reader never sees a step without its manifest.
//
// One writer per step: the first to begin a step owns it, by its writer id
// (a job's identity, the same on all its ranks: docs/agent.md "One writer
// per step"). Another writer id beginning, creating in, sealing, committing
// or aborting the step while it is being written gets kAlreadyExists naming
// the owner, and nothing of it lands; the owner's step is untouched. The id
// "" is the anonymous writer (clients that send none: they share steps with
// each other, as before ids existed, and with no one else). kAnyWriter is for
// the agent's own calls (a peer committing this node's part) and skips the
// check.
//
// Budget: used = bytes of every object file we hold (partial + committed +
// pool + trash). CreateObject needing more than the free budget releases pool
// segments first, then evicts committed steps oldest-first (lowest step of a
// namespace; across namespaces the oldest commit), never the newest
// committed step of a namespace, never a step asked to be durable that is
// not durable yet (persist queued, running or failed: its memory copy is the
// only one), never a pinned step. A restore (a read) evicts only durable
// steps (in a tier with a durable tier): a read never destroys the only copy
// of another step. If that is not enough it fails with kResourceExhausted
// naming what is kept and why, and nothing committed is touched.
//
// Retention: after each commit (and when a persist finishes) only the newest
// keep_last committed steps of the namespace stay; older ones go to the pool,
// except steps asked to be durable and not durable yet (queued, running or
// failed: kept until durable or deleted), and durable steps whose durable
// copy the persister has not confirmed since retention chose them: those
// are queued for a persist, which finds the durable copy (or writes it again
// if it was deleted) and then lets retention drop them.
//
// Recovery (Recover, once at start): *.partial and trash dirs are recycled;
// each committed step's manifest is parsed and every object file must exist
// with its manifest size (else the step is dropped and logged). Checksums
// are NOT re-hashed at start: clients verify on every read, Verify re-hashes
// on demand, and restores from durable verify every object ("size check at
// start, lazy full verification"). Steps with a persist marker come back as
// kQueued and are listed in the report so the agent re-enqueues them.
//
// Reads by agent threads (the hash at seal, Verify, the persister) go through
// read_mappings(): one read-only mapping per object or pool file, kept while
// the file lives and reused when the file is recycled (tier/read_mappings.h).
// Every place that unlinks an object or pool file tells it first.
//
// Thread safety: every public method is thread-safe. One mutex (mu_) guards
// the index, the pool and the byte accounting (GUARDED_BY, checked by clang:
// common/thread_annotations.h); waits (commit, restore, WaitPersist) use cv_.
// Outside mu_, on pinned files or with their bytes reserved: hashing,
// persisting, restoring, verifying, creating a fresh object file (open,
// chmod, truncate, as pool/creating_<n>), reserving its pages (fallocate),
// writing a commit's manifest (the step is committing: no writer, abort or
// disconnect touches it), preallocating segments, and removing the dirs of
// dropped steps (RemoveRecycledDirs). Under mu_, as the publishing steps of
// what was decided under it: renames (an object into its step, a partial
// dir to step_<n>, segments into and out of the pool, dropped dirs aside),
// the unlinks of recycling, making a step's partial dir at begin (its path
// is the next instance's too: it is made while the index says whose it is),
// a restore's object files, and recovery at start. Lock order: mu_, then
// ReadMappings' own lock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/work_queue.h"
#include "os/fd.h"
#include "store/object_store.h"
#include "tier/layout.h"
#include "tier/read_mappings.h"
#include "tier/segment_pool.h"
#include "tier/step_state.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class Metrics;

struct MemoryTierOptions {
  std::string root;            // tmpfs root (created by the caller)
  uint64_t budget_bytes = 0;   // capacity of the tier
  uint32_t keep_last = 3;      // committed steps kept per namespace (>= 1)
  uint64_t persist_every = 0;  // cadence; 0 = only when asked
  bool has_durable = false;    // a durable tier is configured
  bool verify_on_seal = false;  // re-hash client-supplied checksums at seal
  std::string node_id;
  // Files at least this large keep a read mapping (tier/read_mappings.h);
  // the mappings kept are bounded by budget_bytes of address space.
  uint64_t keep_mapping_min_bytes = 1 << 20;
  // Where commits, restores and drops are counted (required; must outlive
  // the tier): the agent's one, shared with its replica tiers.
  Metrics* metrics = nullptr;
};

class MemoryTier;

// The writer id of the agent's internal calls: never a client's (client ids
// are [A-Za-z0-9_.:@/+=-]{0,128}, wire/protocol.h).
inline constexpr std::string_view kAnyWriter = "*";

// Keeps a step's files from being recycled while an agent thread reads them.
// Move-only; releases on destruction (never destroy one while holding mu_).
class StepPin {
 public:
  StepPin() = default;
  StepPin(MemoryTier* tier, std::shared_ptr<StepFiles> files) : tier_(tier), files_(std::move(files)) {}
  ~StepPin() { Reset(); }
  StepPin(StepPin&& o) noexcept : tier_(std::exchange(o.tier_, nullptr)), files_(std::move(o.files_)) {}
  StepPin& operator=(StepPin&& o) noexcept {
    if (this != &o) {
      Reset();
      tier_ = std::exchange(o.tier_, nullptr);
      files_ = std::move(o.files_);
    }
    return *this;
  }
  StepPin(const StepPin&) = delete;
  StepPin& operator=(const StepPin&) = delete;
  void Reset();

 private:
  MemoryTier* tier_ = nullptr;
  std::shared_ptr<StepFiles> files_;
};

struct CreatedObject {
  UniqueFd fd;       // O_RDWR, sized exactly
  std::string path;  // where it lives (partial dir)
};

struct OpenedObject {
  UniqueFd fd;  // O_RDONLY
  uint64_t size = 0;
  std::string checksum;
};

// A committed object read by an agent thread (the peer service): the step
// stays pinned (its files are not recycled) while this lives.
struct PinnedObject {
  StepPin pin;
  ReadView view;  // empty for an empty object
  std::string checksum;
};

struct StepInfo {
  std::string ns;
  uint64_t step = 0;
  bool committed = false;  // false: being written or restored
  uint64_t bytes = 0;
  uint32_t objects = 0;
  uint64_t created_unix_ms = 0;  // committed only
  PersistState persist = PersistState::kNone;
  std::string persist_error;
};

struct TierStats {
  uint64_t budget_bytes = 0;
  uint64_t used_bytes = 0;    // object_bytes + pool_bytes
  uint64_t object_bytes = 0;  // partial + committed + trash object files
  uint64_t pool_bytes = 0;
  size_t pool_segments = 0;
  size_t writing_steps = 0;
  size_t committed_steps = 0;
  size_t read_mappings = 0;        // files the agent keeps mapped for its own reads
  uint64_t read_mapped_bytes = 0;  // their mapped length
};

struct RecoveryReport {
  size_t committed_steps = 0;
  size_t partial_dropped = 0;
  size_t damaged_dropped = 0;
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> persist_pending;  // re-enqueue these
  std::vector<Status> errors;  // damaged steps dropped, leftovers that could not be removed
};

struct PruneResult {
  std::vector<std::pair<std::string, uint64_t>> evicted;
  std::vector<std::pair<std::string, uint64_t>> kept_pending;  // persistence not done yet
  // Recorded durable, kept until the durable copy is seen (also in
  // kept_pending): ConfirmDurable after checking it, then Prune again.
  std::vector<std::pair<std::string, uint64_t>> rechecking;
};

struct MemoryVerifyResult {
  uint32_t objects_checked = 0;
  std::vector<std::string> errors;  // empty: every object matches its manifest
  Manifest manifest;
};

// What a commit records beyond its objects (multi-node).
struct StepSpan {
  // The nodes the step spans (docs/multinode.md), this node among them;
  // empty for a step on this node only.
  std::vector<std::string> members;
  // The replica placement as "tierckpt.placement" JSON (docs/placement.md); "" = none.
  std::string placement;
};

struct PersistLease {
  StepPin pin;
  Manifest manifest;
  std::string dir;  // the committed step dir
};

struct PersistStatus {
  PersistState state = PersistState::kNone;
  Status error;  // when kFailed
};

class MemoryTier {
 public:
  // verifier runs hash jobs; it must outlive the tier's use (the agent stops
  // the verifier before destroying the tier).
  MemoryTier(MemoryTierOptions options, WorkQueue* verifier);
  ~MemoryTier();
  MemoryTier(const MemoryTier&) = delete;
  MemoryTier& operator=(const MemoryTier&) = delete;

  // Called (outside mu_) for each step that needs persisting: on commit with
  // the persist flag or cadence, on RequestPersist. Set before serving.
  void SetPersistHook(std::function<void(const std::string&, uint64_t)> hook);

  // Start-up recovery (see the header comment). Call once, before serving.
  Result<RecoveryReport> Recover();

  // ---- Write path (conn: the caller's connection id, 0 = internal) ----
  // writer: the caller's writer id (see "One writer per step" above).
  Status BeginStep(std::string_view ns, uint64_t step, uint64_t conn, std::string_view writer = kAnyWriter);
  Result<CreatedObject> CreateObject(std::string_view ns, uint64_t step, std::string_view name,
                                     uint64_t size, uint64_t conn, std::string_view writer = kAnyWriter);
  Status SealObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t size,
                    std::string_view checksum, std::string_view writer = kAnyWriter);
  // expected empty: every created object. persist: also persist to durable.
  // span: the nodes the step spans and its replica placement, recorded in
  // the manifest (StepSpan).
  Result<Manifest> CommitStep(std::string_view ns, uint64_t step, uint32_t world_size, bool persist,
                              const std::vector<std::string>& expected, const StepSpan& span = {},
                              std::string_view writer = kAnyWriter);
  // Drops an uncommitted step (ok if absent); kAlreadyExists, dropping
  // nothing, if another writer owns it.
  Status AbortStep(std::string_view ns, uint64_t step, std::string_view writer = kAnyWriter);
  // The connection closed: drop the uncommitted steps it wrote that have no
  // other live writer.
  void ReleaseWriter(uint64_t conn);

  // ---- Read path ----
  bool HasCommitted(std::string_view ns, uint64_t step) const;
  Result<OpenedObject> OpenObject(std::string_view ns, uint64_t step, std::string_view name);
  // The bytes of a committed object through the kept read mapping
  // (read_mappings()), pinned; kNotFound as OpenObject.
  Result<PinnedObject> ReadCommittedObject(std::string_view ns, uint64_t step, std::string_view name);
  // kNotFound when not committed in memory.
  Result<Manifest> GetManifest(std::string_view ns, uint64_t step) const;
  // ns "" = all; sorted by (ns, step).
  std::vector<StepInfo> ListSteps(std::string_view ns) const;
  // Re-hashes every object of a committed step.
  Result<MemoryVerifyResult> VerifyStep(std::string_view ns, uint64_t step);
  TierStats Stats() const;

  // ---- Administration ----
  // Drops a committed step from memory (true) or nothing (false: absent).
  // kFailedPrecondition if it is being written or persisted right now.
  Result<bool> DeleteStep(std::string_view ns, uint64_t step);
  // Retention with keep (0 = keep_last) over ns ("" = all namespaces).
  // caller_checks_durable: durable steps not confirmed since retention chose
  // them are only listed in `rechecking` (not queued for the persister): the
  // caller checks their durable copy, ConfirmDurable()s or RequestPersist()s
  // them, and prunes again.
  PruneResult Prune(std::string_view ns, uint32_t keep, bool caller_checks_durable = false);

  // ---- Persistence bookkeeping ----
  // Marks a committed step for persistence (marker + kQueued + hook). Ok if
  // already durable, queued or running. kNotFound if not committed in memory.
  Status RequestPersist(std::string_view ns, uint64_t step);
  // A persist thread takes a kQueued step: kRunning, pinned. kNotFound if the
  // step is gone, kAborted if it is no longer queued (nothing to do).
  Result<PersistLease> StartPersist(std::string_view ns, uint64_t step);
  // Pins a committed step for an upload outside the persist queue (a part
  // another node asked for, docs/multinode.md); its persist state is left
  // alone. kNotFound if not committed in memory.
  Result<PersistLease> PinCommitted(std::string_view ns, uint64_t step);
  // Ok → kDurable (marker removed, retention applied); kAborted → back to
  // kQueued (the agent is stopping; the marker stays); other → kFailed.
  void FinishPersist(std::string_view ns, uint64_t step, const Status& result);
  // Marks a committed step durable (found committed in the durable tier).
  void MarkDurable(std::string_view ns, uint64_t step);
  // The durable copy of a kDurable step was deleted on purpose (durable
  // retention, prune --keep-durable): back to kNone, so memory retention
  // treats it as a step never persisted instead of writing it again.
  void MarkNotDurable(std::string_view ns, uint64_t step);
  // The caller saw the durable copy of a step recorded durable (an explicit
  // prune checks it itself instead of waiting for the persister): retention
  // may drop its memory copy.
  void ConfirmDurable(std::string_view ns, uint64_t step);
  // Waits while the step is queued/running, up to timeout (nullopt = forever).
  // kNotFound if the step is not committed in memory.
  Result<PersistStatus> WaitPersist(std::string_view ns, uint64_t step,
                                    std::optional<std::chrono::milliseconds> timeout);

  // ---- Restore from the durable tier ----
  // Copies a durable step into memory, verifying every object, then
  // publishes it like a commit (already durable). Ok at once if committed in
  // memory; waits if another restore of it runs.
  Status Restore(ObjectStore& store, std::string_view ns, uint64_t step);

  // Fills the segment pool with up to `bytes` of written, resident tmpfs
  // pages in segments of `segment` bytes (the last may be smaller), so that
  // the first saves and restores after a start write into allocated pages: a
  // fresh tmpfs page costs about as much as receiving its bytes over
  // loopback TCP (docs/agent.md, "Preallocation"). Counts the pool's current
  // bytes toward `bytes`; never goes past the budget and evicts nothing;
  // stops early at Shutdown or once a step is being written or restored (the
  // budget is theirs). Each segment is written outside mu_, counted as used
  // while it is, so other calls proceed. For a background thread right
  // after Recover; one call at a time. Returns the bytes added.
  Result<uint64_t> Preallocate(uint64_t bytes, uint64_t segment);

  // Wakes every waiter with kUnavailable; later waits fail the same way.
  void Shutdown();

  const Layout& layout() const { return layout_; }
  const MemoryTierOptions& options() const { return options_; }
  // Reads of object files by agent threads (pin the step first). Thread-safe.
  ReadMappings& read_mappings() { return read_mappings_; }

 private:
  friend class StepPin;
  using StepRef = std::pair<std::string, uint64_t>;

  // All *Locked methods require mu_ held.
  StepState* FindLocked(std::string_view ns, uint64_t step) const REQUIRES(mu_);
  // Steps being written or restored (not committed), every namespace.
  size_t WritingStepsLocked() const REQUIRES(mu_);
  static constexpr uint64_t kPoolSmallObject = 1u << 20;
  uint64_t UsedLocked() const REQUIRES(mu_) { return object_bytes_ + pool_.bytes() + preallocating_bytes_; }
  StepPin PinLocked(StepState* s) REQUIRES(mu_);
  void Unpin(const std::shared_ptr<StepFiles>& files) EXCLUDES(mu_);
  void UnpinLocked(StepFiles* files) REQUIRES(mu_);
  Result<StepState*> BeginLocked(std::string_view ns, uint64_t step, uint64_t conn, std::string_view writer)
      REQUIRES(mu_);
  // kAlreadyExists naming the owner when writer may not write s.
  Status CheckWriterLocked(const StepState& s, std::string_view label, std::string_view writer) REQUIRES(mu_);
  // The size of the pool segment CreateFileLocked would take for an object
  // of size bytes (SegmentPool::BestFit), nullopt when it would create a
  // fresh file: an empty pool, or an object under kPoolSmallObject whose best
  // fit is over 4x its size.
  std::optional<uint64_t> PoolFitLocked(uint64_t size) const REQUIRES(mu_);
  // Who needs the room: a write may evict any evictable step; a restore (a
  // read) only steps with a durable copy.
  enum class SpaceFor { kWrite, kRestore };
  // Makes room for size more bytes (pool first, then eviction).
  Status EnsureSpaceLocked(uint64_t size, std::string_view what, SpaceFor purpose = SpaceFor::kWrite)
      REQUIRES(mu_);
  // Why nothing more can be evicted, for the kResourceExhausted message.
  std::string KeptStepsLocked() const REQUIRES(mu_);
  // Creates object `name` in step_dir, exactly size bytes, mode 0600 (a
  // pool segment when there is one); the budget must already allow it.
  Result<UniqueFd> CreateFileLocked(const std::string& step_dir, const std::string& name, uint64_t size)
      REQUIRES(mu_);
  bool EvictOneLocked(SpaceFor purpose = SpaceFor::kWrite) REQUIRES(mu_);
  bool EvictableLocked(const NamespaceState& nss, const StepState& s, SpaceFor purpose) const REQUIRES(mu_);
  // Persist queued, running or failed: asked to be durable, not durable yet.
  static bool AwaitsDurable(const StepState& s);
  // protect: a step kept this time even if retention would drop it.
  void ApplyRetentionLocked(const std::string& ns, uint32_t keep, PruneResult* result,
                            std::optional<uint64_t> protect = std::nullopt,
                            bool caller_checks_durable = false) REQUIRES(mu_);
  // Removes the step from the index and recycles (or trashes) its files.
  void DropLocked(const std::string& ns, uint64_t step, std::string_view why) REQUIRES(mu_);
  // Recycles the step's object files and hands its directory to
  // RemoveRecycledDirs (renamed to pool/dropped_<n> first: the next instance
  // of the step may reuse its name).
  void RecycleLocked(StepFiles* files) REQUIRES(mu_);
  // Removes the directories RecycleLocked left, outside mu_. Every method
  // that may drop a step runs one (a RecycledDirsRemover) as it returns.
  void RemoveRecycledDirs() EXCLUDES(mu_);
  class RecycledDirsRemover;
  // Moves an object file into the pool, or unlinks it (and forgets its
  // mapping) when the pool may not keep it.
  void RecycleFileLocked(const std::string& path, uint64_t recorded_size) REQUIRES(mu_);
  // Recovery walks the root from directory fds and never follows a symbolic
  // link (memory_tier_recovery.cc; docs/agent.md, "Root directory safety").
  void RecoverNamespaceLocked(int namespaces_fd, const std::string& ns, RecoveryReport* report) REQUIRES(mu_);
  void RecoverStepDirLocked(int ns_fd, const std::string& ns, const std::string& entry, uint64_t step,
                            RecoveryReport* report) REQUIRES(mu_);
  // Recycles the files of the tree `name` in parent_fd into the pool and
  // removes it; links in it are removed as links.
  void RecycleTreeAtLocked(int parent_fd, const std::string& name, const std::string& path) REQUIRES(mu_);
  void OnChecked(const StepRef& ref, uint64_t instance, const std::string& name, uint64_t object_id,
                 StepFiles* files, const Result<std::string>& actual) EXCLUDES(mu_);
  void SubmitCheckLocked(const std::string& ns, uint64_t step, StepState* s, const std::string& name,
                         ObjectState* o) REQUIRES(mu_);
  // Writes the manifest (and the persist marker) into a partial step dir,
  // outside mu_: the step is committing or restoring, so nothing else
  // touches it. On failure neither file is left.
  static Status WriteStepRecords(const std::string& partial_dir, const Manifest& manifest,
                                 bool persist_marker);
  // The atomic publish: renames the partial dir (its records written) to
  // step_<n> and marks the step committed. On failure the records go.
  Status PublishLocked(const std::string& ns, uint64_t step, StepState* s, Manifest manifest,
                       bool persist_marker) REQUIRES(mu_);
  // Restores the manifest's objects, kRestoreThreads at a time.
  Status RestoreObjects(ObjectStore& store, const StepRef& ref, uint64_t instance,
                        const Manifest& manifest);
  Status RestoreObject(ObjectStore& store, const StepRef& ref, uint64_t instance, const ObjectEntry& e);
  static constexpr size_t kRestoreThreads = 4;
  // Hashes the object file at path through its kept mapping; kCorruption if
  // it does not hold exactly size bytes.
  Result<std::string> HashObjectFile(const std::string& path, uint64_t size);
  void CallPersistHook(const std::vector<StepRef>& refs) EXCLUDES(mu_);
  // The same under mu_: the hook only queues (Persister::Enqueue) and never
  // calls back into the tier synchronously.
  void CallPersistHookLocked(const std::string& ns, uint64_t step) REQUIRES(mu_);

  // Const after construction.
  const MemoryTierOptions options_;
  const Layout layout_;
  WorkQueue* const verifier_;
  ReadMappings read_mappings_;  // thread-safe on its own; declared before pool_, which uses it

  mutable Mutex mu_;
  CondVar cv_{&mu_};  // commits, restores, persist progress
  // The index: its StepStates (tier/step_state.h) are guarded by mu_ too.
  std::map<std::string, NamespaceState, std::less<>> namespaces_ GUARDED_BY(mu_);
  SegmentPool pool_ GUARDED_BY(mu_);
  uint64_t object_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t preallocating_bytes_ GUARDED_BY(mu_) = 0;  // the segment Preallocate is writing
  uint64_t next_id_ GUARDED_BY(mu_) = 1;              // instances, objects, trash entries
  uint64_t next_commit_seq_ GUARDED_BY(mu_) = 1;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  // Dirs of dropped steps holding no object file any more (a manifest, a
  // marker, empty dirs): RemoveRecycledDirs removes them outside mu_.
  std::vector<std::string> recycled_dirs_ GUARDED_BY(mu_);
  std::function<void(const std::string&, uint64_t)> persist_hook_ GUARDED_BY(mu_);  // set before serving
};

// Runs MemoryTier::RemoveRecycledDirs as its scope ends: declared before the
// scope's MutexLock, it runs after mu_ is released.
class MemoryTier::RecycledDirsRemover {
 public:
  explicit RecycledDirsRemover(MemoryTier* tier) : tier_(tier) {}
  ~RecycledDirsRemover() { tier_->RemoveRecycledDirs(); }
  RecycledDirsRemover(const RecycledDirsRemover&) = delete;
  RecycledDirsRemover& operator=(const RecycledDirsRemover&) = delete;

 private:
  MemoryTier* const tier_;
};

}  // namespace tierckpt::agent
