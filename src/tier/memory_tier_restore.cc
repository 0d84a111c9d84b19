// MemoryTier::Restore: durable tier → memory tier, verified, then published
// like a commit (already durable, so no persist marker).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "tier/memory_tier.h"

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "os/files.h"
#include "os/mapping.h"

namespace tierckpt::agent {

Status MemoryTier::Restore(ObjectStore& store, std::string_view ns, uint64_t step) {
  RecycledDirsRemover remover(this);  // after mu_ is released
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
      if (!s->restoring) {
        return FailedPrecondition("step " + label +
                                  " is being written in memory right now; commit or abort it before "
                                  "restoring it from the durable tier");
      }
      cv_.Wait();
    }
  };
  {
    MutexLock lock(&mu_);
    TC_ASSIGN_OR_RETURN(bool done, settle());
    if (done) return Status::Ok();
  }
  Result<Manifest> read = store.ReadManifest(ns, step);
  if (!read.ok()) {
    if (read.status().code() == Code::kNotFound) {
      return NotFound("step " + label + " is in no tier; `tierckpt ls " + std::string(ns) +
                      "` lists what exists (looked in memory and in " + store.Describe() + ")");
    }
    return read.status().WithContext("reading the manifest of " + label + " from " + store.Describe());
  }
  Manifest m = std::move(read).value();
  if (m.ns != ns || m.step != step) {
    return Corruption("the durable manifest of " + label + " in " + store.Describe() + " names step " +
                      StepLabel(m.ns, m.step) + "; the durable copy is misplaced, delete it there");
  }
  uint64_t instance = 0;
  {
    MutexLock lock(&mu_);
    TC_ASSIGN_OR_RETURN(bool done, settle());
    if (done) return Status::Ok();
    if (m.TotalBytes() > options_.budget_bytes) {
      return ResourceExhausted("step " + label + " is " + std::to_string(m.TotalBytes()) +
                               " bytes, larger than the memory budget (" + std::to_string(options_.budget_bytes) +
                               " bytes); raise --memory-budget or read it from " + store.Describe() +
                               " directly (`tierckpt restore --to DIR`)");
    }
    TC_ASSIGN_OR_RETURN(StepState * s, BeginLocked(ns, step, 0, kAnyWriter));
    s->restoring = true;
    instance = s->instance;
  }
  Status st = RestoreObjects(store, {std::string(ns), step}, instance, m);
  if (st.ok()) {  // outside mu_: the step is restoring, nothing else touches it
    st = WriteStepRecords(layout_.PartialDir(ns, step), m, /*persist_marker=*/false)
             .WithContext("publishing step " + label);
  }
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || s->instance != instance) return Aborted("restore of " + label + " was interrupted");
  if (st.ok()) st = PublishLocked(std::string(ns), step, s, m, /*persist_marker=*/false);
  if (!st.ok()) {
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
      .Kv("from", store.Describe());
  return Status::Ok();
}

Status MemoryTier::RestoreObjects(ObjectStore& store, const StepRef& ref, uint64_t instance,
                                  const Manifest& manifest) {
  // Objects in parallel: one object's phases (create, fetch, verify) leave
  // the medium or the CPU idle that another object's can use, and stores
  // parallelize within an object on their own (S3 ranges).
  const size_t n = manifest.objects.size();
  const size_t threads = std::min<size_t>(n, kRestoreThreads);
  if (threads <= 1) {
    for (const auto& e : manifest.objects) TC_RETURN_IF_ERROR(RestoreObject(store, ref, instance, e));
    return Status::Ok();
  }
  std::atomic<size_t> next{0};
  Mutex first_mu;
  Status first = Status::Ok();
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < n && !failed.load(); i = next++) {
      Status st = RestoreObject(store, ref, instance, manifest.objects[i]);
      if (!st.ok()) {
        MutexLock lock(&first_mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return first;
}

Status MemoryTier::RestoreObject(ObjectStore& store, const StepRef& ref, uint64_t instance,
                                 const ObjectEntry& e) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  const std::string label = StepLabel(ref.first, ref.second);
  const std::string what = label + "/" + e.name;
  UniqueFd fd;
  std::string path;
  {
    MutexLock lock(&mu_);
    StepState* s = FindLocked(ref.first, ref.second);
    if (s == nullptr || s->instance != instance) return Aborted("restore of " + label + " was interrupted");
    if (shutting_down_) return Unavailable("tierckptd is shutting down; restore of " + label + " stopped");
    TC_RETURN_IF_ERROR(EnsureSpaceLocked(e.size, what, SpaceFor::kRestore));
    path = Layout::ObjectPath(s->files->dir, e.name);
    Result<UniqueFd> created = CreateFileLocked(s->files->dir, e.name, e.size);
    if (!created.ok()) return created.status().WithContext("restoring object " + what);
    fd = std::move(created).value();
    ObjectState o;
    o.id = next_id_++;
    o.size = e.size;
    o.sealed = true;
    o.check = CheckState::kOk;
    o.actual = e.checksum;
    s->objects[e.name] = std::move(o);
  }
  // Written through the descriptor (pwrite/sendfile by the store): a fresh
  // tmpfs page is then filled once, not zeroed for a mapping and then filled.
  Result<std::string> hashed = store.ReadObjectToFileHashed(ref.first, ref.second, e.name, fd.get(), e.size);
  if (!hashed.ok()) return hashed.status().WithContext("restoring " + what + " from " + store.Describe());
  std::string actual = std::move(hashed).value();
  if (actual.empty()) {  // the store did not hash what it wrote: read it back
    // Populated: one pass over the page tables instead of a fault per page.
    TC_ASSIGN_OR_RETURN(Mapping map, Mapping::Map(fd.get(), e.size, Mapping::Access::kReadOnly,
                                                  /*populate=*/true, path));
    actual = ComputeChecksum(map.data(), map.size()).ToString();
  }
  if (actual != e.checksum) {
    return Corruption("the copy of object " + what + " in " + store.Describe() + " hashes to " + actual +
                      " but its manifest says " + e.checksum +
                      "; that copy is damaged: restore from another tier, or delete it (a durable step: "
                      "`tierckpt prune`, DeleteStep with durable_too)");
  }
  return Status::Ok();
}

}  // namespace tierckpt::agent
