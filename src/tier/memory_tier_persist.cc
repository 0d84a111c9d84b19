// MemoryTier persistence bookkeeping: the persist marker and the per-step
// PersistState machine (kNone → kQueued → kRunning → kDurable | kFailed).
#include <unistd.h>

#include <cerrno>

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

Status MemoryTier::RequestPersist(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateStep(step));
  std::string label = StepLabel(ns, step);
  if (!options_.has_durable) {
    return FailedPrecondition("cannot persist " + label +
                              ": this agent has no durable tier; start tierckptd with --durable URL");
  }
  {
    MutexLock lock(&mu_);
    StepState* s = FindLocked(ns, step);
    if (s == nullptr || !s->committed) {
      return NotFound("step " + label + " is not committed in the memory tier");
    }
    if (s->persist == PersistState::kQueued || s->persist == PersistState::kRunning) return Status::Ok();
    // A step recorded durable is persisted again too: its durable copy may
    // have been deleted since, and the persister finds out (an identical
    // durable step is success at the cost of one manifest read) and writes
    // what is missing.
    Status st = WriteFileAtomic(Layout::MarkerPath(s->files->dir), "", false);
    if (!st.ok()) return st.WithContext("marking " + label + " for persistence");
    s->persist = PersistState::kQueued;
    s->persist_error = Status::Ok();
  }
  CallPersistHook({{std::string(ns), step}});
  return Status::Ok();
}

Result<PersistLease> MemoryTier::StartPersist(std::string_view ns, uint64_t step) {
  MutexLock lock(&mu_);
  StepState* s = AwaitChecksumsLocked(ns, step);
  if (s == nullptr || !s->committed) {
    return NotFound("step " + StepLabel(ns, step) + " is no longer in the memory tier");
  }
  if (s->persist != PersistState::kQueued) {
    return Aborted("step " + StepLabel(ns, step) + " is not queued for persistence");
  }
  s->persist = PersistState::kRunning;
  PersistLease lease;
  lease.pin = PinLocked(s);
  lease.manifest = s->manifest;
  lease.dir = s->files->dir;
  lease.recheck = s->durable_recheck;
  cv_.SignalAll();
  return lease;
}

Result<PersistLease> MemoryTier::PinCommitted(std::string_view ns, uint64_t step) {
  MutexLock lock(&mu_);
  StepState* s = AwaitChecksumsLocked(ns, step);
  if (s == nullptr || !s->committed) {
    return NotFound("step " + StepLabel(ns, step) + " is not committed in the memory tier at " +
                    options_.root);
  }
  PersistLease lease;
  lease.pin = PinLocked(s);
  lease.manifest = s->manifest;
  lease.dir = s->files->dir;
  return lease;
}

void MemoryTier::FinishPersist(std::string_view ns, uint64_t step, const Status& result) {
  TierLock lock(this);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || !s->committed) return;
  if (result.ok()) {
    s->persist = PersistState::kDurable;
    s->persist_error = Status::Ok();
    // Retention may drop a durable step once its durable copy was seen.
    if (s->durable_recheck) s->durable_confirmed = true;
    s->durable_recheck = false;
    std::string marker = Layout::MarkerPath(s->files->dir);
    if (Status rm = RemoveFile(marker, IfMissing::kOk); !rm.ok()) {
      Log(LogLevel::kWarn, "persist").Kv("ns", ns).Kv("step", step).Err(rm);
    }
  } else if (result.code() == Code::kAborted) {
    s->persist = PersistState::kQueued;  // resumed at the next start (marker kept)
  } else {
    s->persist = PersistState::kFailed;  // marker kept: retried at the next start
    s->persist_error = result;
    s->durable_recheck = false;  // the durable copy is not known good any more
  }
  cv_.SignalAll();
  if (result.ok()) ApplyRetentionLocked(std::string(ns), KeepLocked(ns), nullptr);
}

void MemoryTier::MarkDurable(std::string_view ns, uint64_t step) {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || !s->committed || s->persist == PersistState::kRunning) return;
  s->persist = PersistState::kDurable;
  s->persist_error = Status::Ok();
  // A marker left behind only re-queues a persist at the next start, which finds the step durable.
  RemoveFile(Layout::MarkerPath(s->files->dir), IfMissing::kOk).IgnoreError();
  cv_.SignalAll();
}

void MemoryTier::MarkNotDurable(std::string_view ns, uint64_t step) {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || !s->committed || s->persist != PersistState::kDurable) return;
  s->persist = PersistState::kNone;
  s->durable_confirmed = false;
}

void MemoryTier::ConfirmDurable(std::string_view ns, uint64_t step) {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || !s->committed) return;
  const bool recorded =
      s->persist == PersistState::kDurable || (s->persist == PersistState::kQueued && s->durable_recheck);
  if (!recorded) return;
  s->persist = PersistState::kDurable;  // a recheck still queued finds nothing to do
  s->durable_recheck = false;
  s->durable_confirmed = true;
  cv_.SignalAll();
}

Result<PersistStatus> MemoryTier::WaitPersist(std::string_view ns, uint64_t step,
                                              std::optional<std::chrono::milliseconds> timeout) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateStep(step));
  auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::milliseconds(0));
  MutexLock lock(&mu_);
  for (;;) {
    StepState* s = FindLocked(ns, step);
    if (s == nullptr || !s->committed) {
      return NotFound("step " + StepLabel(ns, step) + " is not committed in the memory tier");
    }
    bool pending = s->persist == PersistState::kQueued || s->persist == PersistState::kRunning;
    if (!pending) return PersistStatus{s->persist, s->persist_error};
    if (shutting_down_)
      return Unavailable("tierckptd is shutting down; " + StepLabel(ns, step) +
                         " will be persisted after the restart");
    if (!timeout) {
      cv_.Wait();
    } else if (!cv_.WaitUntil(deadline)) {
      StepState* cur = FindLocked(ns, step);
      if (cur == nullptr || !cur->committed) continue;
      bool still = cur->persist == PersistState::kQueued || cur->persist == PersistState::kRunning;
      if (still) return PersistStatus{cur->persist, Status::Ok()};
    }
  }
}

}  // namespace tierckpt::agent
