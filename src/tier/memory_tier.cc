// MemoryTier: index lookups, pins, budget and eviction, dropping and
// recycling steps, listings. The write path, reads, persistence, restore and
// recovery live in memory_tier_*.cc.
#include "tier/memory_tier.h"

#include <algorithm>

#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "os/files.h"
#include "tier/budget.h"

namespace tierckpt::agent {

void StepPin::Reset() {
  if (tier_ != nullptr && files_ != nullptr) tier_->Unpin(files_);
  tier_ = nullptr;
  files_.reset();
}

MemoryTier::MemoryTier(MemoryTierOptions options, WorkQueue* verifier)
    : options_(std::move(options)),
      layout_(options_.root),
      verifier_(verifier),
      read_mappings_(ReadMappingsOptions{.max_bytes = options_.budget_bytes,
                                         .min_file_bytes = options_.keep_mapping_min_bytes}),
      files_(&layout_, &read_mappings_),
      index_(options_.has_durable),
      pool_(layout_.PoolDir(), &read_mappings_) {}

MemoryTier::~MemoryTier() = default;

// Not analysed: clang does not tie a scoped lock's member functions to
// tier_->mu_; the constructor and the class's ACQUIRE/RELEASE say it.
void MemoryTier::TierLock::Unlock() NO_THREAD_SAFETY_ANALYSIS {
  FileJobs jobs = std::move(tier_->io_);
  tier_->io_ = FileJobs{};
  tier_->mu_.Unlock();
  held_ = false;
  if (!jobs.empty()) tier_->RunIo(std::move(jobs));
}

void MemoryTier::RunIo(FileJobs jobs) {
  while (!jobs.empty()) {
    FileOutcomes out = files_.Run(std::move(jobs));
    jobs = FileJobs{};
    if (!out.needs_record()) return;
    MutexLock lock(&mu_);
    RecordLocked(std::move(out));
    jobs = std::move(io_);  // recording may queue more (a trashed step unpinned meanwhile)
    io_ = FileJobs{};
  }
}

void MemoryTier::RecordLocked(FileOutcomes out) {
  to_pool_bytes_ -= std::min(to_pool_bytes_, out.recycled_recorded);
  for (FileOutcomes::Adopted& a : out.adopted) pool_.Adopt(a.id, a.bytes, std::move(a.affinity));
  for (const std::string& p : out.released) busy_paths_.erase(p);
  for (auto& [files, st] : out.trashed) {
    files->moving = false;
    if (st.ok()) {
      busy_paths_.erase(files->dir);
      files->dir = layout_.TrashDir() + "/" + files->trash_name;
    }
    if (files->pins == 0) RecycleLocked(files);
  }
  cv_.SignalAll();
}

void MemoryTier::AwaitPathLocked(const std::string& path) {
  while (busy_paths_.count(path) != 0) cv_.Wait();
}

Result<RecoveryReport> MemoryTier::Recover() {
  // The scan runs without mu_ (nothing serves yet) on a pool of its own.
  SegmentPool pool(layout_.PoolDir(), &read_mappings_);
  TierRecovery recovery(layout_, &read_mappings_, options_.budget_bytes, options_.has_durable);
  TC_ASSIGN_OR_RETURN(RecoveredTier found, recovery.Run(&pool));
  TierLock lock(this);
  index_ = std::move(found.index);
  pool_ = std::move(pool);
  object_bytes_ = found.object_bytes;
  next_id_ = std::max(next_id_, found.next_id);
  RecoveryReport report = std::move(found.report);
  // Oldest commit first for eviction: order recovered steps by creation time.
  index_.OrderByCreation(&next_commit_seq_);
  // A lowered budget: shrink the pool, then evict by policy.
  while (UsedLocked() > options_.budget_bytes) {
    if (std::optional<SegmentPool::Segment> seg = pool_.PickRelease(std::nullopt)) {
      io_.unlink_segments.push_back(seg->path);
      continue;
    }
    if (!EvictOneLocked()) break;
  }
  if (UsedLocked() > options_.budget_bytes) {
    Log(LogLevel::kWarn, "recovery")
        .Kv("used", UsedLocked())
        .Kv("budget", options_.budget_bytes)
        .Kv("why",
            "the newest steps alone exceed --memory-budget; new writes will fail until steps are deleted");
  }
  for (const auto& [ns, nss] : index_.namespaces()) {
    for (const auto& [step, s] : nss.steps) {
      if (s->persist == PersistState::kQueued) report.persist_pending.emplace_back(ns, step);
    }
  }
  return report;
}

void MemoryTier::SetPersistHook(std::function<void(const std::string&, uint64_t)> hook) {
  MutexLock lock(&mu_);
  persist_hook_ = std::move(hook);
}

void MemoryTier::CallPersistHook(const std::vector<StepRef>& refs) {
  std::function<void(const std::string&, uint64_t)> hook;
  {
    MutexLock lock(&mu_);
    hook = persist_hook_;
  }
  if (!hook) return;
  for (const auto& [ns, step] : refs) hook(ns, step);
}

void MemoryTier::CallPersistHookLocked(const std::string& ns, uint64_t step) {
  if (persist_hook_) persist_hook_(ns, step);
}

StepPin MemoryTier::PinLocked(StepState* s) {
  ++s->files->pins;
  return StepPin(this, s->files);
}

void MemoryTier::Unpin(const std::shared_ptr<StepFiles>& files) {
  TierLock lock(this);
  UnpinLocked(files);
}

void MemoryTier::UnpinLocked(const std::shared_ptr<StepFiles>& files) {
  if (--files->pins > 0) return;
  if (files->dropped) {
    if (!files->moving) RecycleLocked(files);  // else when it is in the trash (RecordLocked)
    return;
  }
  // Retention of its namespace skipped this step for the pin: re-apply it.
  // (Only then: a read that pinned a step retention never wanted, such as
  // an open of an older step restored for a reader, leaves it be.)
  if (!files->retention_waits) return;
  files->retention_waits = false;
  if (std::optional<std::string> ns = index_.CommittedNamespaceOf(files.get())) {
    ApplyRetentionLocked(*ns, KeepLocked(*ns), nullptr);
  }
}

// ---- Budget ----

Status MemoryTier::EnsureSpaceLocked(uint64_t size, std::string_view what, SpaceFor purpose) {
  if (size == 0) return Status::Ok();
  for (;;) {
    uint64_t reuse = PoolFitLocked(size).value_or(0);
    uint64_t used = UsedLocked();
    if (used - reuse + size <= options_.budget_bytes) {
      pending_need_ = 0;
      return Status::Ok();
    }
    // Released segments leave the accounting now; the caller unlinks them
    // (TierLock) before it makes its own file.
    if (std::optional<SegmentPool::Segment> seg = pool_.PickRelease(size)) {
      io_.unlink_segments.push_back(seg->path);
      continue;
    }
    // Files on their way to the pool (ours queued, or another call's moving)
    // count as used but cannot be released yet: let them land, then retry,
    // before evicting more (the last eviction's file may be the one this
    // object takes). The caller re-finds its step afterwards (mu_ may have
    // been released).
    if (!io_.empty()) {
      FileJobs jobs = std::move(io_);
      io_ = FileJobs{};
      mu_.Unlock();
      RunIo(std::move(jobs));
      mu_.Lock();
      continue;
    }
    if (to_pool_bytes_ > 0) {
      cv_.Wait();
      continue;
    }
    pending_need_ = size;  // the evicted step's best-fitting file goes to the pool for this object
    const bool evicted = EvictOneLocked(purpose);
    pending_need_ = 0;
    if (evicted) continue;
    const std::string kept = index_.KeptSteps();
    const bool restore = purpose == SpaceFor::kRestore;
    return ResourceExhausted(
        "memory budget exhausted " + std::string(restore ? "restoring " : "creating ") + std::string(what) +
        " (" + std::to_string(size) + " bytes): used " + std::to_string(used) + " of " +
        std::to_string(options_.budget_bytes) + " (" + FormatBytes(used) + " of " +
        FormatBytes(options_.budget_bytes) +
        "), and no step can be evicted: the newest step of each namespace, steps being written, and "
        "steps whose only copy is in memory (asked to be durable and not durable yet" +
        std::string(restore ? ", or not durable at all: a restore never evicts those" : "") + ") are kept" +
        (kept.empty() ? "" : " (" + kept + ")") +
        "; raise --memory-budget, lower --keep-last, persist the failed steps again (`tierckpt persist "
        "NS STEP`) or delete steps you no longer need (`tierckpt rm NS STEP`)");
  }
}

std::optional<uint64_t> MemoryTier::PoolFitLocked(uint64_t size) const {
  std::optional<uint64_t> fit = pool_.BestFit(size);
  if (fit && TooLargeFor(size, *fit)) return std::nullopt;
  return fit;
}

bool MemoryTier::TooLargeFor(uint64_t size, uint64_t file_size) {
  // A small object does not take a segment many times its size: truncating
  // it would free warm pages (a preallocated 256 MiB segment for a 4 KiB
  // `.metadata`) that a large object is about to need, and fresh pages for a
  // small file cost next to nothing.
  return size < kPoolSmallObject && file_size > 4 * size;
}

// ---- Eviction and retention ----

bool MemoryTier::EvictOneLocked(SpaceFor purpose) {
  std::optional<StepRef> victim = index_.PickEviction(purpose);
  if (!victim) return false;
  ++budget_evictions_;
  DropLocked(victim->first, victim->second, "evicted to make room in the memory budget");
  return true;
}

void MemoryTier::ApplyRetentionLocked(const std::string& ns, uint32_t keep, PruneResult* result,
                                      std::optional<uint64_t> protect, bool caller_checks_durable) {
  if (keep < 1) keep = 1;
  const RetentionPlan plan = index_.PlanRetention(ns, keep, result, protect, caller_checks_durable);
  for (uint64_t step : plan.recheck) {
    StepState* s = FindLocked(ns, step);
    s->persist = PersistState::kQueued;
    s->durable_recheck = true;
    CallPersistHookLocked(ns, step);
  }
  for (uint64_t step : plan.drop) {
    DropLocked(ns, step, "retention keeps the newest " + std::to_string(keep));
    if (result != nullptr) result->evicted.emplace_back(ns, step);
  }
  for (uint64_t step : plan.pinned) FindLocked(ns, step)->files->retention_waits = true;
}

// ---- Dropping and recycling ----

void MemoryTier::DropLocked(const std::string& ns, uint64_t step, std::string_view why) {
  bool ns_emptied = false;
  std::unique_ptr<StepState> s = index_.Remove(ns, step, &ns_emptied);
  if (s == nullptr) return;
  if (ns_emptied) io_.namespace_rmdirs.push_back(layout_.NamespaceDir(ns));  // best effort: only if empty
  const std::shared_ptr<StepFiles>& files = s->files;
  files->dropped = true;
  cv_.SignalAll();
  if (!s->dir_ready) return;  // no object yet; its maker removes the dir (BeginLocked)
  files->objects.clear();
  if (s->committed) {
    for (const auto& o : s->manifest.objects) files->objects.push_back({o.name, o.size, true});
  } else {
    for (const auto& [name, o] : s->objects) files->objects.push_back({name, o.size, o.sealed});
  }
  if (s->committed) options_.metrics->Dropped(why);
  Log(LogLevel::kInfo, "drop")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("committed", s->committed)
      .Kv("bytes", s->Bytes())
      .Kv("why", why);
  if (files->pins == 0) {
    RecycleLocked(files);
    return;
  }
  // Read by an agent thread: into the trash (the step's name is free for its
  // next instance once moved), recycled on the last unpin.
  busy_paths_.insert(files->dir);
  files->moving = true;
  files->trash_name = std::to_string(next_id_++);
  io_.trash.push_back(TrashJob{files->dir, layout_.TrashDir() + "/" + files->trash_name, files});
}

const StepFiles::DroppedObject* MemoryTier::FileForNeedLocked(
    const std::vector<StepFiles::DroppedObject>& objects) const {
  if (pending_need_ == 0) return nullptr;
  // As SegmentPool::Take picks: the smallest file that holds the need, else the largest (grown).
  const StepFiles::DroppedObject* best = nullptr;
  for (const StepFiles::DroppedObject& o : objects) {
    if (!o.writer_done || o.size == 0) continue;
    const bool holds = o.size >= pending_need_;
    if (best == nullptr) {
      best = &o;
    } else if (holds ? best->size < pending_need_ || o.size < best->size
                     : best->size < pending_need_ && o.size > best->size) {
      best = &o;
    }
  }
  if (best != nullptr && TooLargeFor(pending_need_, best->size)) return nullptr;
  return best;
}

bool MemoryTier::PoolMayKeepLocked(uint64_t size) const {
  return size > 0 && UsedLocked() + pending_need_ + size <= options_.budget_bytes;
}

void MemoryTier::RecycleLocked(const std::shared_ptr<StepFiles>& files) {
  RecycleJob job;
  job.dir = files->dir;
  job.files_of = files;  // its creators still at work finish first
  const std::string trash = layout_.TrashDir();
  if (job.dir.compare(0, trash.size() + 1, trash + "/") != 0) {
    // A layout dir: reserved until it has moved aside to pool/dropped_<n>
    // (SegmentPool keeps only seg_* files and Load removes the rest after a
    // crash), so no next instance of the step makes or publishes onto it.
    job.aside = JoinPath(layout_.PoolDir(), "dropped_" + std::to_string(next_id_++));
    job.reserved = true;
    busy_paths_.insert(job.dir);
  }
  for (const StepFiles::DroppedObject& o : files->objects) object_bytes_ -= std::min(object_bytes_, o.size);
  const StepFiles::DroppedObject* for_need = FileForNeedLocked(files->objects);
  for (const StepFiles::DroppedObject& o : files->objects) {
    RecycledFile f{o.name, o.size, std::nullopt, {}};
    const bool keep = &o == for_need ? UsedLocked() + o.size <= options_.budget_bytes : PoolMayKeepLocked(o.size);
    if (o.writer_done && keep) {
      f.pool_id = pool_.NewId();
      f.affinity = SegmentAffinity(files->ns, o.name);
      to_pool_bytes_ += o.size;
    }
    job.files.push_back(std::move(f));
  }
  files->objects.clear();
  io_.recycles.push_back(std::move(job));
}

void MemoryTier::RecycleObjectLocked(const StepFiles& files, const std::string& name,
                                     uint64_t recorded_size, bool writer_done) {
  object_bytes_ -= std::min(object_bytes_, recorded_size);
  RecycleJob job;
  job.dir = files.dir;
  job.keep_dir = true;
  RecycledFile f{name, recorded_size, std::nullopt, {}};
  if (writer_done && PoolMayKeepLocked(recorded_size)) {
    f.pool_id = pool_.NewId();
    f.affinity = SegmentAffinity(files.ns, name);
    to_pool_bytes_ += recorded_size;
  }
  job.files.push_back(std::move(f));
  io_.recycles.push_back(std::move(job));
}

// ---- Listings ----

std::vector<StepInfo> MemoryTier::ListSteps(std::string_view ns) const {
  MutexLock lock(&mu_);
  std::vector<StepInfo> out;
  for (const auto& [name, nss] : index_.namespaces()) {
    if (!ns.empty() && name != ns) continue;
    for (const auto& [step, s] : nss.steps) {
      StepInfo info;
      info.ns = name;
      info.step = step;
      info.committed = s->committed;
      info.bytes = s->Bytes();
      info.objects = static_cast<uint32_t>(s->committed ? s->manifest.objects.size() : s->objects.size());
      info.created_unix_ms = s->committed ? s->manifest.created_unix_ms : 0;
      info.persist = s->persist;
      info.persist_error = s->persist_error.ok() ? "" : s->persist_error.ToString();
      out.push_back(std::move(info));
    }
  }
  return out;
}

TierStats MemoryTier::Stats() const {
  MutexLock lock(&mu_);
  TierStats t;
  t.budget_bytes = options_.budget_bytes;
  t.object_bytes = object_bytes_;
  t.pool_bytes = pool_.bytes();
  t.used_bytes = UsedLocked();
  t.pool_segments = pool_.count();
  ReadMappingsStats rm = read_mappings_.Stats();
  t.read_mappings = rm.mappings;
  t.read_mapped_bytes = rm.mapped_bytes;
  t.writing_steps = index_.WritingSteps();
  t.committed_steps = index_.CommittedSteps();
  t.budget_evictions = budget_evictions_;
  return t;
}

void MemoryTier::Shutdown() {
  MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

}  // namespace tierckpt::agent
