// MemoryTier: index lookups, pins, budget and eviction, dropping and
// recycling steps, listings. The write path, reads, persistence, restore and
// recovery live in memory_tier_*.cc.
#include "tier/memory_tier.h"

#include "ops/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"
#include "common/names.h"
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
      pool_(layout_.PoolDir(), &read_mappings_) {}

MemoryTier::~MemoryTier() = default;

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

StepState* MemoryTier::FindLocked(std::string_view ns, uint64_t step) const {
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) return nullptr;
  auto st = it->second.steps.find(step);
  return st == it->second.steps.end() ? nullptr : st->second.get();
}

StepPin MemoryTier::PinLocked(StepState* s) {
  ++s->files->pins;
  return StepPin(this, s->files);
}

void MemoryTier::Unpin(const std::shared_ptr<StepFiles>& files) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  MutexLock lock(&mu_);
  UnpinLocked(files.get());
}

void MemoryTier::UnpinLocked(StepFiles* files) {
  if (--files->pins > 0) return;
  if (files->dropped) {
    RecycleLocked(files);
    return;
  }
  // A pin may have held back retention of its namespace; re-apply it.
  for (auto& [ns, nss] : namespaces_) {
    for (auto& [step, s] : nss.steps) {
      if (s->files.get() == files) {
        if (s->committed) {
          std::string name = ns;  // ApplyRetentionLocked may erase the map entry
          ApplyRetentionLocked(name, options_.keep_last, nullptr);
        }
        return;
      }
    }
  }
}

// ---- Budget ----

Status MemoryTier::EnsureSpaceLocked(uint64_t size, std::string_view what, SpaceFor purpose) {
  if (size == 0) return Status::Ok();
  for (;;) {
    uint64_t reuse = PoolFitLocked(size).value_or(0);
    uint64_t used = UsedLocked();
    if (used - reuse + size <= options_.budget_bytes) return Status::Ok();
    Result<uint64_t> freed = pool_.ReleaseOne(size);
    if (!freed.ok()) return freed.status().WithContext("shrinking the segment pool");
    if (*freed > 0) continue;
    if (EvictOneLocked(purpose)) continue;
    const std::string kept = KeptStepsLocked();
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

std::string MemoryTier::KeptStepsLocked() const {
  std::string out;
  size_t listed = 0;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (!s->committed || !AwaitsDurable(*s)) continue;
      if (++listed > 8) return out + ", ...";
      out += (out.empty() ? "" : ", ") + StepLabel(ns, step) + " " + PersistStateName(s->persist);
      if (s->persist == PersistState::kFailed) out += " to persist: " + s->persist_error.message();
    }
  }
  return out;
}

std::optional<uint64_t> MemoryTier::PoolFitLocked(uint64_t size) const {
  std::optional<uint64_t> fit = pool_.BestFit(size);
  // A small object does not take a segment many times its size: truncating
  // it would free warm pages (a preallocated 256 MiB segment for a 4 KiB
  // `.metadata`) that a large object is about to need, and fresh pages for a
  // small file cost next to nothing.
  if (fit && size < kPoolSmallObject && *fit > 4 * size) return std::nullopt;
  return fit;
}

// Under mu_: a pool segment's rename (SegmentPool), and a restore's fresh
// file (CreateObject makes fresh files outside mu_ itself; a restore could
// too, the same way).
Result<UniqueFd> MemoryTier::CreateFileLocked(const std::string& step_dir, const std::string& name,
                                              uint64_t size) {
  const std::string path = Layout::ObjectPath(step_dir, name);
  // The step dir exists (BeginLocked); only names with '/' need more.
  if (name.find('/') != std::string::npos) TC_RETURN_IF_ERROR(MakeDirs(DirName(path), 0700));
  if (size > 0 && PoolFitLocked(size)) {  // a segment we created: already mode 0600
    TC_RETURN_IF_ERROR(pool_.Take(size, path).status());
    object_bytes_ += size;
    Result<UniqueFd> fd = OpenFile(path, O_RDWR);
    if (!fd.ok()) {
      RecycleFileLocked(path, size);
      return fd.status();
    }
    return fd;
  }
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDWR | O_CREAT | O_TRUNC, 0600));
  Status made;
  if (::fchmod(fd.get(), 0600) != 0) {  // whatever the umask
    made = ErrnoStatus("chmod " + path);
  } else if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    made = ErrnoStatus("size " + path + " to " + std::to_string(size) + " bytes");
  }
  if (!made.ok()) {
    read_mappings_.ForgetPath(path);  // O_TRUNC may have reused a file of ours
    RemoveFile(path, IfMissing::kOk).IgnoreError();  // the failure to make it is the answer
    return made;
  }
  object_bytes_ += size;
  return fd;
}

// ---- Eviction and retention ----

bool MemoryTier::AwaitsDurable(const StepState& s) {
  // A durable step queued only to have its durable copy checked is still
  // recorded durable: the budget may evict it, as any durable step.
  if (s.persist == PersistState::kQueued && s.durable_recheck) return false;
  return s.persist == PersistState::kQueued || s.persist == PersistState::kRunning ||
         s.persist == PersistState::kFailed;
}

bool MemoryTier::EvictableLocked(const NamespaceState& nss, const StepState& s, SpaceFor purpose) const {
  if (!s.committed || s.files->pins > 0) return false;
  // Asked to be durable and not durable yet: memory holds the only copy.
  if (AwaitsDurable(s)) return false;
  // A read never destroys the only copy of another step.
  if (purpose == SpaceFor::kRestore && options_.has_durable && s.persist != PersistState::kDurable &&
      !s.durable_recheck) {
    return false;
  }
  // Never the newest committed step of the namespace.
  for (auto it = nss.steps.rbegin(); it != nss.steps.rend(); ++it) {
    if (it->second->committed) return it->second.get() != &s;
  }
  return false;
}

bool MemoryTier::EvictOneLocked(SpaceFor purpose) {
  const std::string* best_ns = nullptr;
  uint64_t best_step = 0;
  uint64_t best_seq = 0;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (!EvictableLocked(nss, *s, purpose)) continue;
      if (best_ns == nullptr || s->commit_seq < best_seq) {
        best_ns = &ns;
        best_step = step;
        best_seq = s->commit_seq;
      }
      break;  // only the oldest evictable step of each namespace competes
    }
  }
  if (best_ns == nullptr) return false;
  std::string ns = *best_ns;
  DropLocked(ns, best_step, "evicted to make room in the memory budget");
  return true;
}

void MemoryTier::ApplyRetentionLocked(const std::string& ns, uint32_t keep, PruneResult* result,
                                      std::optional<uint64_t> protect, bool caller_checks_durable) {
  if (keep < 1) keep = 1;
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) return;
  std::vector<uint64_t> drop;
  std::vector<uint64_t> recheck;
  uint32_t kept = 0;
  for (auto st = it->second.steps.rbegin(); st != it->second.steps.rend(); ++st) {
    const StepState& s = *st->second;
    if (!s.committed) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (AwaitsDurable(s) || s.durable_recheck) {  // memory may hold the only copy
      if (result != nullptr) result->kept_pending.emplace_back(ns, st->first);
      if (result != nullptr && s.durable_recheck) result->rechecking.emplace_back(ns, st->first);
      continue;
    }
    if (s.files->pins > 0) continue;  // retried on unpin
    if (protect && *protect == st->first) continue;  // just committed out of order
    if (s.persist == PersistState::kDurable && options_.has_durable && !s.durable_confirmed) {
      // Recorded durable, but the durable copy may have been deleted since:
      // the persister checks it (writing it again if it is gone) before
      // this copy, perhaps the last one, goes (FinishPersist re-applies).
      if (!caller_checks_durable) recheck.push_back(st->first);
      if (result != nullptr) result->kept_pending.emplace_back(ns, st->first);
      if (result != nullptr) result->rechecking.emplace_back(ns, st->first);
      continue;
    }
    drop.push_back(st->first);
  }
  for (uint64_t step : recheck) {
    StepState* s = FindLocked(ns, step);
    s->persist = PersistState::kQueued;
    s->durable_recheck = true;
    CallPersistHookLocked(ns, step);
  }
  for (uint64_t step : drop) {
    DropLocked(ns, step, "retention keeps the newest " + std::to_string(keep));
    if (result != nullptr) result->evicted.emplace_back(ns, step);
  }
}

// ---- Dropping and recycling ----

void MemoryTier::DropLocked(const std::string& ns, uint64_t step, std::string_view why) {
  auto nit = namespaces_.find(ns);
  if (nit == namespaces_.end()) return;
  auto sit = nit->second.steps.find(step);
  if (sit == nit->second.steps.end()) return;
  std::unique_ptr<StepState> s = std::move(sit->second);
  nit->second.steps.erase(sit);
  if (nit->second.steps.empty()) {
    namespaces_.erase(nit);
    ::rmdir(layout_.NamespaceDir(ns).c_str());  // best effort: only if empty
  }
  StepFiles* files = s->files.get();
  files->objects.clear();
  if (s->committed) {
    for (const auto& o : s->manifest.objects) files->objects.emplace_back(o.name, o.size);
  } else {
    for (const auto& [name, o] : s->objects) files->objects.emplace_back(name, o.size);
  }
  if (s->committed) options_.metrics->Dropped(why);
  Log(LogLevel::kInfo, "drop")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("committed", s->committed)
      .Kv("bytes", s->Bytes())
      .Kv("why", why);
  files->dropped = true;
  if (files->pins == 0) {
    RecycleLocked(files);
  } else {
    std::string trash = layout_.TrashEntry(next_id_++);
    Status st = MakeDirs(layout_.TrashDir(), 0700);
    if (st.ok()) st = RenamePath(files->dir, trash);
    if (st.ok()) {
      files->dir = trash;
    } else {
      Log(LogLevel::kError, "drop").Kv("ns", ns).Kv("step", step).Kv("dir", files->dir).Err(st);
    }
  }
  cv_.SignalAll();
}

void MemoryTier::RecycleFileLocked(const std::string& path, uint64_t recorded_size) {
  object_bytes_ -= std::min(object_bytes_, recorded_size);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (S_ISREG(st.st_mode) && size > 0 && UsedLocked() + size <= options_.budget_bytes) {
    Status s = pool_.Put(path).status();  // same inode: its read mapping stays valid
    if (s.ok()) return;
    Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(s);
  }
  // Unlinked: a kept mapping would pin the file's pages.
  if (S_ISREG(st.st_mode)) read_mappings_.Forget(KeyOf(st));
  if (Status s = RemoveFile(path, IfMissing::kOk); !s.ok())
    Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(s);
}

void MemoryTier::RecycleLocked(StepFiles* files) {
  for (const auto& [name, size] : files->objects) {
    RecycleFileLocked(Layout::ObjectPath(files->dir, name), size);
  }
  files->objects.clear();
  // No object file is left in the directory (the budget is settled): only
  // its removal remains, done outside mu_ under a name no step uses (a trash
  // entry already, or pool/dropped_<n>: SegmentPool keeps only seg_* files
  // and Load removes the rest after a crash).
  std::string dir = files->dir;
  const std::string trash = layout_.TrashDir();
  if (dir.compare(0, trash.size() + 1, trash + "/") != 0) {
    const std::string entry = JoinPath(layout_.PoolDir(), "dropped_" + std::to_string(next_id_++));
    Status st = RenamePath(dir, entry);
    if (!st.ok()) {  // gone already, or not movable: remove it here
      Status s = RemoveTree(dir);
      if (!s.ok()) Log(LogLevel::kWarn, "recycle").Kv("dir", dir).Err(s);
      return;
    }
    dir = entry;
  }
  recycled_dirs_.push_back(std::move(dir));
}

void MemoryTier::RemoveRecycledDirs() {
  std::vector<std::string> dirs;
  {
    MutexLock lock(&mu_);
    dirs.swap(recycled_dirs_);
  }
  for (const std::string& dir : dirs) {
    Status s = RemoveTree(dir);
    if (!s.ok()) Log(LogLevel::kWarn, "recycle").Kv("dir", dir).Err(s);
  }
}

// ---- Listings ----

std::vector<StepInfo> MemoryTier::ListSteps(std::string_view ns) const {
  MutexLock lock(&mu_);
  std::vector<StepInfo> out;
  for (const auto& [name, nss] : namespaces_) {
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
  t.writing_steps = WritingStepsLocked();
  for (const auto& [name, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) t.committed_steps += s->committed ? 1 : 0;
  }
  return t;
}

size_t MemoryTier::WritingStepsLocked() const {
  size_t n = 0;
  for (const auto& [name, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) n += s->committed ? 0 : 1;
  }
  return n;
}

void MemoryTier::Shutdown() {
  MutexLock lock(&mu_);
  shutting_down_ = true;
  cv_.SignalAll();
}

}  // namespace tierckpt::agent
