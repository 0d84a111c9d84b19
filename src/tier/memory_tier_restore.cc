// MemoryTier::Restore: durable tier → memory tier, verified, then published
// like a commit (already durable, so no persist marker).
#include <chrono>

#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "os/files.h"
#include "tier/memory_tier.h"
#include "tier/step_state.h"
#include "tier/tier_restore.h"

namespace tierckpt::agent {

Status MemoryTier::Restore(ObjectStore& store, std::string_view ns, uint64_t step, std::string_view only_node) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateStep(step));
  const std::string label = StepLabel(ns, step);
  const auto t0 = std::chrono::steady_clock::now();
  // Waits out a concurrent restore; true when the step is committed already.
  auto settle = [&]() REQUIRES(mu_) -> Result<bool> {
    for (;;) {
      if (shutting_down_)
        return Unavailable("tierckptd is shutting down; retry " + label + " after the restart");
      StepState* s = FindLocked(ns, step);
      if (s == nullptr) return false;
      if (s->committed) return true;
      // (A step whose dir is being made may be another restore's: wait to see.)
      if (!s->restoring && s->dir_ready) {
        return FailedPrecondition("step " + label +
                                  " is being written in memory right now; commit or abort it before "
                                  "restoring it from the durable tier");
      }
      cv_.Wait();
    }
  };
  {
    TierLock lock(this);
    TC_ASSIGN_OR_RETURN(bool done, settle());
    if (done) return Status::Ok();
  }
  Result<Manifest> read = store.ReadManifest(ns, step);
  if (!read.ok()) {
    if (read.status().code() == Code::kNotFound) {
      return NotFound("step " + label + " is in no tier; `tierckpt ls " + std::string(ns) +
                      "` lists what exists (looked in memory and in " + store.DescribeNamespace(ns) + ")");
    }
    return read.status().WithContext("reading the manifest of " + label + " from " +
                                     store.DescribeNamespace(ns));
  }
  Manifest m = std::move(read).value();
  if (m.ns != ns || m.step != step) {
    return Corruption("the durable manifest of " + label + " in " + store.DescribeNamespace(ns) +
                      " names step " + StepLabel(m.ns, m.step) +
                      "; the durable copy is misplaced, delete it there");
  }
  if (!only_node.empty()) {
    std::erase_if(m.objects, [&](const ObjectEntry& e) { return e.node != only_node; });
    if (m.objects.empty()) {
      return NotFound("the durable copy of " + label + " in " + store.DescribeNamespace(ns) +
                      " holds no object of node " + std::string(only_node) + "'s part (nodes " +
                      JoinIds(m.members) + ")");
    }
    m.node = std::string(only_node);
  }
  uint64_t instance = 0;
  {
    TierLock lock(this);
    TC_ASSIGN_OR_RETURN(bool done, settle());
    if (done) return Status::Ok();
    if (m.TotalBytes() > options_.budget_bytes) {
      return ResourceExhausted("step " + label + " is " + std::to_string(m.TotalBytes()) +
                               " bytes, larger than the memory budget (" +
                               std::to_string(options_.budget_bytes) +
                               " bytes); raise --memory-budget or read it from " +
                               store.DescribeNamespace(ns) + " directly (`tierckpt restore --to DIR`)");
    }
    TC_ASSIGN_OR_RETURN(StepState * s, BeginLocked(ns, step, 0, kAnyWriter));
    s->restoring = true;
    instance = s->instance;
  }
  Status st = RestoreObjects(store, {std::string(ns), step}, instance, m);
  TierLock lock(this);
  StepState* s = index_.FindInstance(ns, step, instance);
  if (s == nullptr) return Aborted("restore of " + label + " was interrupted");
  // The records and the publish rename run outside mu_ (PublishLocked): the
  // step is restoring, nothing else touches it.
  // Every object was verified on the way in (FillObjectFile), after t0.
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> verified;
  for (const ObjectEntry& e : m.objects) verified.emplace(e.name, t0);
  if (st.ok())
    st = PublishLocked(std::string(ns), step, &s, m, /*persist_marker=*/false, std::move(verified));
  if (!st.ok()) {
    // This instance only: a publish releases mu_, and a step gone meanwhile is another's.
    if (index_.FindInstance(ns, step, instance) != nullptr)
      DropLocked(std::string(ns), step, "restore failed");
    options_.metrics->restore.Failed();
    return st;
  }
  s->persist = PersistState::kDurable;
  lock.Unlock();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  options_.metrics->restore.Succeeded(m.TotalBytes(), ms / 1e3);
  Log(LogLevel::kInfo, "restore")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("bytes", m.TotalBytes())
      .Kv("objects", static_cast<uint64_t>(m.objects.size()))
      .Kv("ms", ms)
      .Kv("mb_per_s", ms > 0 ? static_cast<double>(m.TotalBytes()) / 1e6 / (ms / 1e3) : 0.0)
      .Kv("from", store.DescribeNamespace(ns));
  return Status::Ok();
}

Status MemoryTier::RestoreObjects(ObjectStore& store, const StepRef& ref, uint64_t instance,
                                  const Manifest& manifest) {
  // Stores parallelize within an object on their own (S3 ranges).
  return ForEachObject(manifest, kRestoreThreads,
                       [&](const ObjectEntry& e) { return RestoreObject(store, ref, instance, e); });
}

Status MemoryTier::RestoreObject(ObjectStore& store, const StepRef& ref, uint64_t instance,
                                 const ObjectEntry& e) {
  const std::string label = StepLabel(ref.first, ref.second);
  const std::string what = label + "/" + e.name;
  TierLock lock(this);
  StepState* s = index_.FindInstance(ref.first, ref.second, instance);
  if (s == nullptr) return Aborted("restore of " + label + " was interrupted");
  if (shutting_down_) return Unavailable("tierckptd is shutting down; restore of " + label + " stopped");
  TC_RETURN_IF_ERROR(EnsureSpaceLocked(e.size, what, SpaceFor::kRestore));
  s = index_.FindInstance(ref.first, ref.second, instance);  // mu_ may have been released
  if (s == nullptr) return Aborted("restore of " + label + " was interrupted");
  const Creation c = ReserveObjectLocked(s, e.name, e.size, /*sealed=*/true, e.checksum);
  const std::string path = Layout::ObjectPath(c.dir, e.name);
  lock.Unlock();  // the file is made as a created object's is (memory_tier_create.cc)
  uint64_t seg_size_now = 0;
  Result<UniqueFd> created = MakeObjectFile(c, e.name, &seg_size_now);
  if (!created.ok()) {
    lock.Lock();
    UndoObjectLocked(ref.first, ref.second, e.name, c, seg_size_now, /*file_made=*/false);
    return created.status().WithContext("restoring object " + what);
  }
  return FillObjectFile(store, ref.first, ref.second, e, created->get(), path);
}

}  // namespace tierckpt::agent
