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
// on demand, the scrub (agent/scrubber.h) every --scrub-interval, and
// restores from durable verify every object ("size check at start, lazy full
// verification"); recovered objects count as never verified until then. Steps with a persist marker come back
// as kQueued and are listed in the report so the agent re-enqueues them.
//
// Reads by agent threads (the hash at seal, Verify, the persister) go through
// read_mappings(): one read-only mapping per object or pool file, kept while
// the file lives and reused when the file is recycled (tier/read_mappings.h).
// Every place that unlinks an object or pool file tells it first.
//
// Structure: MemoryTier is the facade and coordinator. The index and its
// retention/eviction policy are a StepIndex (tier/step_index.h: decisions
// only), the file-system side a TierFiles (tier/tier_files.h: no lock), the
// start-up scan a TierRecovery (tier/tier_recovery.h), recycled files a
// SegmentPool, agent reads ReadMappings.
//
// Thread safety: every public method is thread-safe. One mutex (mu_) guards
// the index, the pool's index and the byte accounting (GUARDED_BY, checked by
// clang: common/thread_annotations.h); waits (commit, restore, WaitPersist,
// a step's dir being made, a path being moved) use cv_. No file-system call
// of the save path runs under mu_: each locked section decides (reserves a
// name, a pool segment, a path in busy_paths_, the bytes) and the file work
// runs with mu_ released — making a step's partial dir, creating an object
// beneath the step dir's fd or moving a pool segment there, reserving its
// pages, a commit's records and its publish rename, and (queued in io_, run
// by the TierLock that releases mu_) moving dropped steps aside, recycling
// their files into the pool, unlinking released segments and removing empty
// namespace dirs. Then mu_ is taken again only where something must be
// recorded (a dir made, a publish, segments adopted into the pool, a path
// released). A seal stats its file before taking mu_. Still under mu_:
// the persistence marker's write and removal (RequestPersist, FinishPersist,
// MarkDurable), off the save path. Lock order: mu_, then ReadMappings' own
// lock (and TierFiles calls ReadMappings without mu_).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/work_queue.h"
#include "os/fd.h"
#include "store/object_store.h"
#include "tier/layout.h"
#include "tier/namespace_policy.h"
#include "tier/read_mappings.h"
#include "tier/segment_pool.h"
#include "tier/step_index.h"
#include "tier/step_state.h"
#include "tier/tier_files.h"
#include "tier/tier_recovery.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class Metrics;

struct MemoryTierOptions {
  std::string root;             // tmpfs root (created by the caller)
  uint64_t budget_bytes = 0;    // capacity of the tier
  uint32_t keep_last = 3;       // committed steps kept per namespace (>= 1)
  uint64_t persist_every = 0;   // cadence; 0 = only when asked
  bool has_durable = false;     // a durable tier is configured
  bool verify_on_seal = false;  // re-hash client-supplied checksums at seal
  // Commit publishes a step without waiting for the agent's own hash of
  // objects sealed without a checksum (decision 68): their manifest entries
  // are filled in as the hashes land, and every reader of the step's
  // manifest or bytes (OpenObject, ReadCommittedObject, GetManifest,
  // VerifyStep, StartPersist, PinCommitted) waits for them. Objects sealed
  // with a client checksum that the agent re-hashes (verify_on_seal) still
  // hold the commit back: a mismatch must fail it. A hash that fails after
  // commit (the file resized behind the agent) drops the step. A new step
  // of the namespace begins (BeginStep, CreateObject) once no committed step
  // of it waits for its hashes.
  bool commit_before_hash = false;
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

// The verification age of an object the agent never verified in memory.
inline constexpr uint64_t kNeverVerified = UINT64_MAX;

struct OpenedObject {
  UniqueFd fd;  // O_RDONLY
  uint64_t size = 0;
  std::string checksum;
  // Milliseconds since the agent last found the bytes matching checksum
  // (the time its hash began: "Verification times" below); kNeverVerified.
  uint64_t verified_age_ms = kNeverVerified;
  // The step stays pinned while this lives: its files are not recycled (an
  // agent thread reading through fd, e.g. an HTTP GET, never reads a file
  // that became another object, nor SIGBUSes on one that shrank). A client
  // process that receives fd holds no pin: it checks its copy afterwards
  // (docs/agent.md, "What clients must know about recycling").
  StepPin pin;
};

// A committed object read by an agent thread (the peer service): the step
// stays pinned (its files are not recycled) while this lives.
struct PinnedObject {
  StepPin pin;
  ReadView view;  // empty for an empty object
  std::string checksum;
  uint64_t instance = 0;  // the step's life in memory, for MarkVerified
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
  // Committed steps dropped since start to make room in the budget (not by
  // retention): the budget, not --keep-last, limits the steps kept.
  uint64_t budget_evictions = 0;
};

struct MemoryVerifyResult {
  uint32_t objects_checked = 0;
  std::vector<std::string> errors;  // empty: every object matches its manifest
  std::vector<std::string> failed_objects;  // the objects errors are about, in the same order
  Manifest manifest;
};

// What a commit records beyond its objects (multi-node).
struct StepSpan {
  // The nodes the step spans (docs/multinode.md), this node among them;
  // empty for a step on this node only.
  std::vector<std::string> members;
  // The replica placement as "tierckpt.placement" JSON (docs/placement.md); "" = none.
  std::string placement;
  // The step's coordinator when it is another node: this node's part then
  // names the members by a MemberRef (their count and digest, its index,
  // the coordinator) and records no placement, so it is O(its own objects)
  // whatever N (decision 116). "" (or this node): the coordinator's part,
  // with the list and the placement.
  std::string coordinator;
};

struct PersistLease {
  StepPin pin;
  Manifest manifest;
  std::string dir;  // the committed step dir
  // Retention asked for this run: the step was recorded durable, and its
  // durable copy is checked (written again only if gone) before the memory
  // copy may go (StepState::durable_recheck).
  bool recheck = false;
  // Set by the persister: the durable tier already held the step, nothing was uploaded.
  bool found_durable = false;
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
  Result<CreatedObject> CreateObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t size,
                                     uint64_t conn, std::string_view writer = kAnyWriter);
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
  // Removes object name (sealed or not) from an uncommitted step, its file
  // recycled; ok if the step or the object is absent. A hash of it in
  // progress is waited for. kFailedPrecondition if the step is committed or
  // committing; kAlreadyExists if another writer owns it. The caller must
  // not write through the object's fd afterwards (the file is recycled).
  Status DropObject(std::string_view ns, uint64_t step, std::string_view name,
                    std::string_view writer = kAnyWriter);
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
  // Re-hashes every object of a committed step (pinned, outside mu_); each
  // object that matches is marked verified (MarkVerified).
  Result<MemoryVerifyResult> VerifyStep(std::string_view ns, uint64_t step);

  // ---- Verification times (attested reads: docs/agent.md, "The scrub") ----
  // Every committed object records when the agent last found its bytes at
  // rest matching its manifest checksum: the hash after seal (objects sealed
  // without a checksum, or with --verify-on-seal), a restore (every object is
  // verified on the way in: from durable, a replica holder, a peer), a
  // VerifyStep, the scrub, a repair's re-hash. The time recorded is when that
  // hash began (a flip during the hash may be missed: the age is never
  // younger than the bytes' last full check). Objects recovered at start and
  // objects sealed with a trusted client checksum are never verified until
  // one of those hashes them. OpenObject reports the age.
  //
  // Records `hash_began` for object name of (ns, step) if the step is still
  // the life `instance` (PinnedObject::instance) and committed, and nothing
  // newer is recorded; a no-op otherwise.
  void MarkVerified(std::string_view ns, uint64_t step, uint64_t instance, std::string_view name,
                    std::chrono::steady_clock::time_point hash_began);
  // A hash of object name (begun at hash_began) did NOT match its manifest:
  // its verification time is cleared, so attested reads re-hash it (and
  // fail or repair) instead of trusting an age the bytes no longer earn,
  // and no hash begun before hash_began records it verified again. Every
  // agent hash that finds a mismatch calls this (Verify, the scrub, a
  // repair's re-hash). Same no-op rules as MarkVerified.
  void MarkMismatch(std::string_view ns, uint64_t step, uint64_t instance, std::string_view name,
                    std::chrono::steady_clock::time_point hash_began);
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
  // The committed steps kept for ns from now on, instead of keep_last
  // (0 = back to keep_last); applied at once. Not persisted: whoever sets it
  // (the HTTP API's namespaces) sets it again after a restart.
  void SetNamespaceKeep(std::string_view ns, uint32_t keep);
  // The save policies writers declare per namespace (SetPolicy): retention
  // (KeepLocked) and CommitStep's persist decision read them, and so does
  // the persister's durable retention (decision 118). Thread-safe.
  NamespacePolicies& policies() { return policies_; }
  const NamespacePolicies& policies() const { return policies_; }

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
  // only_node: for a step spanning nodes, restores only the objects the
  // durable manifest places on that node (another member's part, into the
  // tier of this node's copies of that member's parts: read_path.h), and
  // publishes them as that node's part; kNotFound when it has none there.
  Status Restore(ObjectStore& store, std::string_view ns, uint64_t step, std::string_view only_node = {});

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
  class TierLock;

  StepState* FindLocked(std::string_view ns, uint64_t step) const REQUIRES(mu_) {
    return index_.Find(ns, step);
  }
  // FindLocked, after waiting (on cv_) for the hashes of a step committed
  // before them (MemoryTierOptions::commit_before_hash); nullptr also when
  // the tier shuts down first.
  StepState* AwaitChecksumsLocked(std::string_view ns, uint64_t step) const REQUIRES(mu_);
  // Moves the finished hashes of committed step s (all of them, or only
  // object *only) into its manifest; once none is pending, clears
  // Manifest::checksums_pending and rewrites the record. A failed hash drops
  // the step.
  void SettleChecksLocked(const std::string& ns, uint64_t step, StepState* s, const std::string* only = nullptr)
      REQUIRES(mu_);
  // SettleChecksLocked for one object: a finished hash into its manifest
  // entry (or into *failed), the object out of s->objects; returns the next.
  std::map<std::string, ObjectState>::iterator SettleObjectLocked(const std::string& ns, uint64_t step,
                                                                  StepState* s,
                                                                  std::map<std::string, ObjectState>::iterator it,
                                                                  Status* failed) REQUIRES(mu_);
  // Whether a committed step of ns still waits for its hashes.
  bool HashesPendingLocked(std::string_view ns) const REQUIRES(mu_);
  // The committed steps retention keeps for ns: SetNamespaceKeep's, else
  // keep_last, combined with a declared policy (EffectiveKeepMemory).
  uint32_t KeepLocked(std::string_view ns) const REQUIRES(mu_);
  static constexpr uint64_t kPoolSmallObject = 1u << 20;
  // Bytes of files we hold or are about to: objects, the pool, the segment
  // Preallocate writes, and files of dropped steps on their way to the pool.
  uint64_t UsedLocked() const REQUIRES(mu_) {
    return object_bytes_ + pool_.bytes() + preallocating_bytes_ + to_pool_bytes_;
  }
  StepPin PinLocked(StepState* s) REQUIRES(mu_);
  void Unpin(const std::shared_ptr<StepFiles>& files) EXCLUDES(mu_);
  void UnpinLocked(const std::shared_ptr<StepFiles>& files) REQUIRES(mu_);
  // Finds the step being written or begins it. A new step's partial dir is
  // made by its first caller with mu_ released (the path reserved in
  // busy_paths_, the step in the index with dir_ready false); other callers
  // wait for it on cv_. Returns the step with its dir made.
  Result<StepState*> BeginLocked(std::string_view ns, uint64_t step, uint64_t conn, std::string_view writer)
      REQUIRES(mu_);
  // kAlreadyExists naming the owner when writer may not write s.
  Status CheckWriterLocked(const StepState& s, std::string_view label, std::string_view writer) REQUIRES(mu_);
  // The size of the pool segment an object of size bytes would take
  // (SegmentPool::BestFit), nullopt for a fresh file: an empty pool, or an
  // object under kPoolSmallObject whose best fit is over 4x its size.
  std::optional<uint64_t> PoolFitLocked(uint64_t size) const REQUIRES(mu_);
  // Whether a pooled file of file_size bytes is too large to become an
  // object of size bytes (PoolFitLocked's and FileForNeedLocked's one rule).
  static bool TooLargeFor(uint64_t size, uint64_t file_size);
  // Makes room for size more bytes (pool first, then eviction). May release
  // mu_ (to let files moving to the pool land): callers re-find their step.
  Status EnsureSpaceLocked(uint64_t size, std::string_view what, SpaceFor purpose = SpaceFor::kWrite)
      REQUIRES(mu_);
  // An object being made: recorded in the index under mu_ (its bytes
  // counted, a pool segment reserved or a fresh file to create), its file
  // made by MakeObjectFile outside mu_.
  struct Creation {
    std::shared_ptr<StepFiles> files;
    std::string dir;  // the step's dir when reserved
    uint64_t instance = 0;
    uint64_t id = 0;
    uint64_t size = 0;
    std::optional<SegmentPool::Segment> segment;  // nullopt: a fresh file
  };
  Creation ReserveObjectLocked(StepState* s, const std::string& name, uint64_t size, bool sealed,
                               const std::string& checksum) REQUIRES(mu_);
  Result<UniqueFd> MakeObjectFile(const Creation& c, const std::string& name, uint64_t* seg_size_now) const;
  // After a failed MakeObjectFile (or reservation of its pages): the
  // segment back to the pool, the object out of the index if still this one.
  void UndoObjectLocked(std::string_view ns, uint64_t step, const std::string& name, const Creation& c,
                        uint64_t seg_size_now, bool file_made) REQUIRES(mu_);
  bool EvictOneLocked(SpaceFor purpose = SpaceFor::kWrite) REQUIRES(mu_);
  // protect: a step kept this time even if retention would drop it.
  void ApplyRetentionLocked(const std::string& ns, uint32_t keep, PruneResult* result,
                            std::optional<uint64_t> protect = std::nullopt,
                            bool caller_checks_durable = false) REQUIRES(mu_);
  // Removes the step from the index and queues the recycling (or trashing)
  // of its files in io_ (done once mu_ is released: TierLock).
  void DropLocked(const std::string& ns, uint64_t step, std::string_view why) REQUIRES(mu_);
  // Decides where each object file of a dropped, unpinned step goes (a
  // reserved pool segment name, or unlinked) and queues the I/O; a layout
  // dir stays reserved in busy_paths_ until it has moved aside.
  void RecycleLocked(const std::shared_ptr<StepFiles>& files) REQUIRES(mu_);
  // Queues one object file of a live step (an unsealed object created
  // again) for the pool or unlinking, before the caller makes its new file.
  // writer_done false (an unsealed object whose writer may still write
  // through a mapping): unlinked, never pooled (StepFiles::DroppedObject).
  void RecycleObjectLocked(const StepFiles& files, const std::string& name, uint64_t recorded_size,
                           bool writer_done) REQUIRES(mu_);
  // Whether a file of size bytes may go to the pool now (the budget).
  bool PoolMayKeepLocked(uint64_t size) const REQUIRES(mu_);
  // During EnsureSpaceLocked's eviction: the dropped file that will hold the
  // object being made room for (the one SegmentPool::Take would pick), which
  // goes to the pool whenever it fits the budget by itself, so that its pages
  // (faulted in, and mapped by the client that wrote them) are written again
  // instead of freed and faulted in anew; nullptr outside an eviction.
  const StepFiles::DroppedObject* FileForNeedLocked(const std::vector<StepFiles::DroppedObject>& objects) const
      REQUIRES(mu_);
  // Runs I/O queued under mu_ (without it), then records what happened.
  void RunIo(FileJobs jobs) EXCLUDES(mu_);
  void RecordLocked(FileOutcomes out) REQUIRES(mu_);
  // Waits while another call works on path (busy_paths_).
  void AwaitPathLocked(const std::string& path) REQUIRES(mu_);
  void OnChecked(const StepRef& ref, uint64_t instance, const std::string& name, uint64_t object_id,
                 const std::shared_ptr<StepFiles>& files, const Result<std::string>& actual,
                 std::chrono::steady_clock::time_point hash_began) EXCLUDES(mu_);
  // The path of object name of the step's life `instance` once no publish
  // is renaming its dir (StepState::publishing).
  std::string CurrentObjectPath(const StepRef& ref, uint64_t instance, const StepFiles& files,
                                const std::string& name) EXCLUDES(mu_);
  void SubmitCheckLocked(const std::string& ns, uint64_t step, StepState* s, const std::string& name,
                         ObjectState* o) REQUIRES(mu_);
  // Writes the records and renames the partial dir to step_<n> with mu_
  // released (the step is committing or restoring: nothing else touches
  // it), then marks the step committed. s is re-found by instance.
  // verified: the objects' verification times (StepState::verified).
  Status PublishLocked(const std::string& ns, uint64_t step, StepState** s, Manifest manifest,
                       bool persist_marker,
                       std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> verified)
      REQUIRES(mu_);
  // Restores the manifest's objects, kRestoreThreads at a time.
  Status RestoreObjects(ObjectStore& store, const StepRef& ref, uint64_t instance, const Manifest& manifest)
      EXCLUDES(mu_);
  Status RestoreObject(ObjectStore& store, const StepRef& ref, uint64_t instance, const ObjectEntry& e)
      EXCLUDES(mu_);
  static constexpr size_t kRestoreThreads = 4;
  // Hashes the object file at path through its kept mapping; kCorruption if
  // it does not hold exactly size bytes.
  void MarkVerifiedLocked(StepState* s, std::string_view name, std::chrono::steady_clock::time_point at)
      REQUIRES(mu_);
  void CallPersistHook(const std::vector<StepRef>& refs) EXCLUDES(mu_);
  // The same under mu_: the hook only queues (Persister::Enqueue) and never
  // calls back into the tier synchronously.
  void CallPersistHookLocked(const std::string& ns, uint64_t step) REQUIRES(mu_);

  // Const after construction.
  const MemoryTierOptions options_;
  const Layout layout_;
  WorkQueue* const verifier_;
  ReadMappings read_mappings_;  // thread-safe on its own; declared before pool_, which uses it
  const TierFiles files_;       // no state of its own; called without mu_
  NamespacePolicies policies_;  // thread-safe on its own (a leaf lock, taken under mu_)

  mutable Mutex mu_;
  mutable CondVar cv_{&mu_};  // commits, restores, persist progress, dirs made, paths released
  // The index and its policy (tier/step_index.h); its StepStates are guarded by mu_ too.
  StepIndex index_ GUARDED_BY(mu_);
  // SetNamespaceKeep's overrides of options_.keep_last.
  std::map<std::string, uint32_t, std::less<>> keep_by_ns_ GUARDED_BY(mu_);
  SegmentPool pool_ GUARDED_BY(mu_);
  uint64_t object_bytes_ GUARDED_BY(mu_) = 0;
  uint64_t preallocating_bytes_ GUARDED_BY(mu_) = 0;  // the segment Preallocate is writing
  uint64_t to_pool_bytes_ GUARDED_BY(mu_) = 0;        // recorded bytes of files moving to the pool
  uint64_t budget_evictions_ GUARDED_BY(mu_) = 0;     // TierStats::budget_evictions
  // During EnsureSpaceLocked: the bytes being made room for: the evicted
  // step's file that best fits them goes to the pool for them
  // (FileForNeedLocked), its other files only if they fit beside them.
  uint64_t pending_need_ GUARDED_BY(mu_) = 0;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;  // instances, objects, trash and aside entries
  uint64_t next_commit_seq_ GUARDED_BY(mu_) = 1;
  bool shutting_down_ GUARDED_BY(mu_) = false;
  // I/O decided under mu_, run by the TierLock that releases it.
  FileJobs io_ GUARDED_BY(mu_);
  // Layout dirs another call is making or moving right now (a step's
  // partial dir being made, a dropped step's dir moving aside): a call that
  // would make, publish onto or remove one waits (AwaitPathLocked).
  std::set<std::string, std::less<>> busy_paths_ GUARDED_BY(mu_);
  std::function<void(const std::string&, uint64_t)> persist_hook_ GUARDED_BY(mu_);  // set before serving
};

// The tier's scoped lock: as MutexLock, and on every release it takes the
// I/O queued under mu_ (io_) and runs it (MemoryTier::RunIo) right after
// mu_ is released: whoever decided a drop does its file work, unlocked,
// before it goes on (a create after an eviction finds the pages freed).
// Never hold another TierLock of the same tier.
class SCOPED_CAPABILITY MemoryTier::TierLock {
 public:
  explicit TierLock(MemoryTier* tier) ACQUIRE(tier->mu_) : tier_(tier) { tier_->mu_.Lock(); }
  ~TierLock() RELEASE() {
    if (held_) Unlock();
  }
  TierLock(const TierLock&) = delete;
  TierLock& operator=(const TierLock&) = delete;
  void Unlock() RELEASE();
  void Lock() ACQUIRE() {
    tier_->mu_.Lock();
    held_ = true;
  }

 private:
  MemoryTier* const tier_;
  bool held_ = true;
};

}  // namespace tierckpt::agent
