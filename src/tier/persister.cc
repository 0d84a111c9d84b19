#include "tier/persister.h"

#include <map>
#include <thread>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "tier/parts.h"

namespace tierckpt::agent {

bool SameObjects(const Manifest& a, const Manifest& b) {
  if (a.ns != b.ns || a.step != b.step || a.objects.size() != b.objects.size()) return false;
  for (size_t i = 0; i < a.objects.size(); ++i) {
    const auto& x = a.objects[i];
    const auto& y = b.objects[i];
    if (x.name != y.name || x.size != y.size || x.checksum != y.checksum) return false;
  }
  return true;
}

namespace {

Status DifferentDurable(const ObjectStore& store, const Manifest& m) {
  return FailedPrecondition("the durable tier " + store.DescribeNamespace(m.ns) + " already holds step " +
                            StepLabel(m.ns, m.step) +
                            " with different objects or checksums; delete it there (DeleteStep with "
                            "durable_too) or write the checkpoint under a new step number");
}

}  // namespace

bool IsRetriable(const Status& s) {
  switch (s.code()) {
    case Code::kIoError:
    case Code::kUnavailable:
    case Code::kTimeout:
    case Code::kResourceExhausted:
    case Code::kInternal:
      return true;
    default:
      return false;
  }
}

Persister::Persister(PersisterOptions options, MemoryTier* tier, ObjectStore* store, RecentErrors* errors)
    : options_(options),
      tier_(tier),
      store_(store),
      errors_(errors),
      queue_("persist", options.threads,
             [priority = options.priority] { LowerThisThreadForBackgroundWork(priority, "persist"); }),
      retry_queue_("persist-retry", 1),
      parts_timer_("persist-parts", 1) {}

Persister::~Persister() { Stop(std::chrono::milliseconds(0)); }

void Persister::Enqueue(const std::string& ns, uint64_t step) {
  if (stopping_) return;
  queue_.Submit([this, ns, step] { Run(ns, step); });
}

void Persister::Stop(std::chrono::milliseconds grace) {
  stopping_ = true;
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (queue_.running() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (queue_.running() > 0) {
    Log(LogLevel::kWarn, "persist")
        .Kv("why", "shutdown grace expired; cancelling running persists, they resume at the next start")
        .Kv("running", static_cast<uint64_t>(queue_.running()));
  }
  {
    MutexLock lock(&sleep_mu_);
    cancel_ = true;
  }
  sleep_cv_.SignalAll();
  queue_.Stop();
  retry_queue_.Stop();
  parts_timer_.Stop();
  // The parked steps no job will look at again.
  std::map<StepKey, std::shared_ptr<PartsWait>> parked;
  {
    MutexLock lock(&parked_mu_);
    parked.swap(parked_);
  }
  for (auto& [key, w] : parked) Abandon(std::move(w));
}

size_t Persister::awaiting_parts() const {
  MutexLock lock(&parked_mu_);
  return parked_.size();
}

bool Persister::CancelAwaitingParts(const std::string& ns, uint64_t step) {
  std::shared_ptr<PartsWait> w = Unpark({ns, step});
  if (w == nullptr) return false;
  Log(LogLevel::kWarn, "persist_wait_cancelled")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("why", "deleted while it waited for the other members' parts");
  Finish(ns, step, std::move(w->lease), Aborted("the wait for the other parts of " + StepLabel(ns, step) + " was cancelled"),
         w->attempt, w->t0);
  return true;
}

bool Persister::Backoff(std::chrono::milliseconds d) {
  MutexLock lock(&sleep_mu_);
  const auto deadline = std::chrono::steady_clock::now() + d;
  while (!cancel_.load()) {
    if (!sleep_cv_.WaitUntil(deadline)) break;
  }
  return !cancel_.load();
}

void Persister::Run(const std::string& ns, uint64_t step) {
  if (stopping_) return;  // stays queued; the marker brings it back at the next start
  Result<PersistLease> lease = tier_->StartPersist(ns, step);
  if (!lease.ok()) return;  // gone, or not queued any more: nothing to do
  const auto t0 = std::chrono::steady_clock::now();
  {
    MutexLock lock(&gc_mu_);  // waits for a running sweep
    running_.emplace(ns, step);
  }
  Status st;
  std::shared_ptr<PartsWait> wait;
  int attempt = 0;
  auto delay = options_.first_backoff;
  for (;;) {
    ++attempt;
    wait.reset();
    st = PersistOnce(*lease, &wait);
    if (st.ok() || cancel_ || !IsRetriable(st) || attempt > options_.max_retries) break;
    CountRetry(ns, step, attempt, delay, st);
    if (!Backoff(delay)) break;
    delay *= 4;
  }
  if (st.ok() && wait != nullptr) {
    // This node's part is uploaded; the others' are awaited off this thread.
    wait->lease = std::move(*lease);
    wait->attempt = attempt;
    wait->t0 = t0;
    Look(std::move(wait));
    return;
  }
  Finish(ns, step, std::move(*lease), std::move(st), attempt, t0);
}

void Persister::CountRetry(const std::string& ns, uint64_t step, int attempt, std::chrono::milliseconds backoff,
                           const Status& st) {
  options_.metrics->persist_retries.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kWarn, "persist retry")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("attempt", attempt)
      .Kv("backoff_ms", static_cast<int64_t>(backoff.count()))
      .Err(st);
}

void Persister::Finish(const std::string& ns, uint64_t step, PersistLease lease, Status st, int attempt,
                       std::chrono::steady_clock::time_point t0) {
  if (cancel_ && !st.ok()) st = Aborted("persist of " + StepLabel(ns, step) + " cancelled by shutdown");
  const uint64_t bytes = lease.manifest.TotalBytes();
  const bool spans = lease.manifest.SpansNodes();
  lease.pin.Reset();
  {
    MutexLock lock(&gc_mu_);
    running_.erase({ns, step});
  }
  if (st.ok() && lease.recheck && lease.found_durable) {
    // Retention's check of a step already durable, before its memory copy
    // goes: nothing was written, so no persist line and no persist metric.
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Log(LogLevel::kInfo, "durable_confirmed")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("ms", ms)
        .Kv("at", store_->DescribeNamespace(ns));
    tier_->FinishPersist(ns, step, st);  // retention may drop the memory copy now
    return;
  }
  if (st.ok()) {
    // A sweep could remove the parts other nodes are still uploading of an
    // older step spanning nodes: only steps of one node sweep.
    if (!spans) SweepOnce(ns, step);
    ApplyDurableRetention(ns);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // Counted before the step reads as durable: whoever sees kDurable sees the count too.
    options_.metrics->persist.Succeeded(bytes, ms / 1e3);
    tier_->FinishPersist(ns, step, st);
    Log(LogLevel::kInfo, "persist")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("bytes", bytes)
        .Kv("ms", ms)
        .Kv("mb_per_s", ms > 0 ? static_cast<double>(bytes) / 1e6 / (ms / 1e3) : 0.0)
        .Kv("attempts", attempt)
        .Kv("uploaded", !lease.found_durable)
        .Kv("recheck", lease.recheck)
        .Kv("to", store_->DescribeNamespace(ns));
    return;
  }
  if (st.code() != Code::kAborted) {
    st = st.WithContext("persisting " + StepLabel(ns, step) + " to " + store_->DescribeNamespace(ns) +
                        " (after " + std::to_string(attempt) + " attempt" + (attempt == 1 ? "" : "s") + ")");
    const bool again = IsRetriable(st) && !stopping_;
    Log(LogLevel::kError, "persist")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("attempts", attempt)
        .Kv("retry_in_ms", again ? static_cast<int64_t>(options_.retry_later.count()) : -1)
        .Err(st);
    options_.metrics->persist.Failed();
    errors_->Add("persist", st);
    tier_->FinishPersist(ns, step, st);
    if (again) RetryLater(ns, step);
    return;
  }
  tier_->FinishPersist(ns, step, st);
}

Persister::PartsWait::PartsWait(const Manifest& part)
    : start(std::chrono::steady_clock::now()), last_ask(start), t0(start), turn(MergeTurn(part, part.node)) {
  // Decision 88: the merger reads the others' records; every other member
  // reads only the manifest until its turn to take over comes.
  merging = turn == 0;
  // Each record found is checked against this node's part and only its
  // objects are kept (decision 112): O(N + N·p) held, not N member lists.
  // A part naming its members by member_ref (decision 116) has no list to
  // merge by: the merger takes it from the coordinator's record, read first.
  if (!part.member_ref) merger.emplace(part);
}

void Persister::Look(std::shared_ptr<PartsWait> w) {
  const Manifest& part = w->lease.manifest;
  Result<bool> done = MergePass(*w);
  if (done.ok() && !*done) {
    w->errors = 0;
    Park(std::move(w));
    return;
  }
  if (!done.ok() && IsRetriable(done.status()) && !cancel_ && w->errors < options_.max_retries) {
    // A look that failed to read the shared directory is tried again at the next look.
    ++w->errors;
    CountRetry(part.ns, part.step, w->errors, w->delay, done.status());
    Park(std::move(w));
    return;
  }
  const std::string ns = part.ns;
  const uint64_t step = part.step;
  Finish(ns, step, std::move(w->lease), done.ok() ? Status::Ok() : done.status(), w->attempt, w->t0);
}

void Persister::Park(std::shared_ptr<PartsWait> w) {
  const StepKey key{w->lease.manifest.ns, w->lease.manifest.step};
  const auto due = std::chrono::steady_clock::now() + w->delay;
  w->delay = std::min(w->delay * 2, std::chrono::milliseconds(1000));
  {
    MutexLock lock(&parked_mu_);
    parked_[key] = std::move(w);
  }
  // One timer thread takes the parked steps in the order they parked; their
  // backoffs differ by at most a second, so a look is late by at most that.
  const bool timed = parts_timer_.Submit([this, key, due] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - std::chrono::steady_clock::now());
    if (left.count() > 0 && !Backoff(left)) return;  // shutting down: Stop abandons what is parked
    if (stopping_ || !queue_.Submit([this, key] { Resume(key); })) {
      if (std::shared_ptr<PartsWait> gone = Unpark(key)) Abandon(std::move(gone));
    }
  });
  if (!timed) {
    if (std::shared_ptr<PartsWait> gone = Unpark(key)) Abandon(std::move(gone));
  }
}

void Persister::Resume(const StepKey& key) {
  std::shared_ptr<PartsWait> w = Unpark(key);
  if (w == nullptr) return;  // abandoned by shutdown
  if (cancel_ || stopping_) {
    Abandon(std::move(w));
    return;
  }
  Look(std::move(w));
}

std::shared_ptr<Persister::PartsWait> Persister::Unpark(const StepKey& key) {
  MutexLock lock(&parked_mu_);
  auto it = parked_.find(key);
  if (it == parked_.end()) return nullptr;
  std::shared_ptr<PartsWait> w = std::move(it->second);
  parked_.erase(it);
  return w;
}

void Persister::Abandon(std::shared_ptr<PartsWait> w) {
  const std::string ns = w->lease.manifest.ns;
  const uint64_t step = w->lease.manifest.step;
  Finish(ns, step, std::move(w->lease), Aborted("persist of " + StepLabel(ns, step) + " cancelled by shutdown"),
         w->attempt, w->t0);
}

void Persister::RetryLater(const std::string& ns, uint64_t step) {
  const auto due = std::chrono::steady_clock::now() + options_.retry_later;
  retry_queue_.Submit([this, ns, step, due] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(due - std::chrono::steady_clock::now());
    if (left.count() > 0 && !Backoff(left)) return;  // shutting down: the marker brings it back at the next start
    if (stopping_) return;
    Result<PersistStatus> now = tier_->WaitPersist(ns, step, std::chrono::milliseconds(0));
    if (!now.ok() || now->state != PersistState::kFailed) return;  // gone, or persisted meanwhile
    // kFailed → kQueued and back to the persist queue; not found when the
    // step left memory (a prune by hand), which ends the retries.
    Status again = tier_->RequestPersist(ns, step);
    Log log(again.ok() ? LogLevel::kInfo : LogLevel::kWarn, "persist requeued");
    log.Kv("ns", ns).Kv("step", step).Kv("why", "its last persist failed with a retriable error");
    if (!again.ok()) log.Err(again);
  });
}

Status Persister::PersistOnce(PersistLease& lease, std::shared_ptr<PartsWait>* wait) {
  const Manifest& m = lease.manifest;
  lease.found_durable = false;
  Result<Manifest> existing = store_->ReadManifest(m.ns, m.step);
  auto found = [&](bool same) {
    if (!same) return DifferentDurable(*store_, m);
    lease.found_durable = true;
    return Status::Ok();
  };
  if (m.SpansNodes()) {
    if (existing.ok()) return found(ContainsPart(*existing, m));
    if (existing.status().code() != Code::kNotFound) return existing.status();
    // The step directory is shared with the other members: never cleared.
    Status uploaded = UploadPartOf(tier_, lease);
    if (!uploaded.ok() && !cancel_) {
      // A follower may have merged the step without this node while it
      // uploaded (this node stopped or slow past its takeover, its part
      // uploaded by a replica holder): the store then refuses the rest of
      // the upload into the committed step, which is durable all the same.
      Result<Manifest> merged = store_->ReadManifest(m.ns, m.step);
      if (merged.ok()) return ContainsPart(*merged, m) ? Status::Ok() : DifferentDurable(*store_, m);
    }
    TC_RETURN_IF_ERROR(uploaded);
    *wait = std::make_shared<PartsWait>(m);  // Run looks at once, then parks it
    return Status::Ok();
  }
  if (existing.ok()) return found(SameObjects(*existing, m));
  if (existing.status().code() != Code::kNotFound) return existing.status();
  // An uncommitted durable step is what an interrupted persist (agent killed,
  // medium failed) left behind: clear it so no stray file ends up in the step.
  TC_RETURN_IF_ERROR(store_->DeleteStep(m.ns, m.step));
  TC_RETURN_IF_ERROR(UploadObjects(tier_, lease));
  Status committed = store_->CommitStep(m);
  if (committed.code() == Code::kAlreadyExists) {
    TC_ASSIGN_OR_RETURN(Manifest there, store_->ReadManifest(m.ns, m.step));
    return SameObjects(there, m) ? Status::Ok() : DifferentDurable(*store_, m);
  }
  return committed;
}

Status Persister::UploadObjects(MemoryTier* tier, const PersistLease& lease) {
  const Manifest& m = lease.manifest;
  // The step goes to the store in as few PutObjects calls as possible, so the
  // store plans its requests together (S3: one pool of connections for all
  // objects, s3/upload_plan.h): one call unless the step has very many
  // objects, whose views (a heap copy each under ReadMappings' min_file_bytes,
  // a mapping each above it) are then released batch by batch.
  // With a rate cap (--persist-rate) each object is paid for before it is
  // read, hashed and put, and a batch goes out once it holds a burst.
  RateLimiter* const rate = options_.rate != nullptr && !options_.rate->unlimited() ? options_.rate : nullptr;
  std::vector<ReadView> views;  // keep the bytes readable through the upload
  std::vector<ObjectBytes> batch;
  uint64_t copied = 0;  // bytes of the batch's small objects (heap copies)
  uint64_t batch_bytes = 0;
  auto flush = [&]() -> Status {
    Status put = store_->PutObjects(m.ns, m.step, batch, [this] { return cancel_.load(); });
    if (put.code() == Code::kAborted && cancel_) return Aborted("persist cancelled by shutdown");
    views.clear();
    batch.clear();
    copied = 0;
    batch_bytes = 0;
    return put;
  };
  for (const auto& e : m.objects) {
    if (cancel_) return Aborted("persist cancelled by shutdown");
    if (rate != nullptr) {
      bool cancelled = false;
      rate->Acquire(
          e.size, [this] { return cancel_.load(); }, &cancelled);
      if (cancelled) return Aborted("persist cancelled by shutdown");
    }
    const std::string path = Layout::ObjectPath(lease.dir, e.name);
    TC_ASSIGN_OR_RETURN(ReadView view, tier->read_mappings().Open(path));
    if (view.size() != e.size) {
      return Corruption("the memory copy of " + StepLabel(m.ns, m.step) + "/" + e.name + " holds " +
                        std::to_string(view.size()) + " bytes but its manifest says " +
                        std::to_string(e.size) +
                        "; it was resized after commit and is not persisted; write the step again");
    }
    std::string actual = ComputeChecksum(view.data(), view.size()).ToString();
    if (actual != e.checksum) {
      return Corruption("the memory copy of " + StepLabel(m.ns, m.step) + "/" + e.name + " hashes to " + actual +
                        " but its manifest says " + e.checksum +
                        "; it was modified after commit and is not persisted; write the step again");
    }
    if (view.size() < tier->read_mappings().options().min_file_bytes) copied += view.size();
    batch.push_back(ObjectBytes{e.name, view.data(), static_cast<size_t>(view.size())});
    views.push_back(std::move(view));
    batch_bytes += e.size;
    if (batch.size() >= options_.batch_objects || copied >= options_.batch_copied_bytes ||
        (rate != nullptr && batch_bytes >= rate->burst_bytes())) {
      TC_RETURN_IF_ERROR(flush());
    }
  }
  return batch.empty() ? Status::Ok() : flush();
}

Status Persister::UploadPartOf(MemoryTier* tier, const PersistLease& lease) {
  TC_RETURN_IF_ERROR(UploadObjects(tier, lease));
  const Manifest& m = lease.manifest;
  const std::string record = EncodePartRecord(m);  // O(its part): the members by count and digest
  return store_->PutObject(m.ns, m.step, PartRecordName(m.node), record.data(), record.size());
}

Status Persister::UploadPart(MemoryTier* tier, const std::string& ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(PersistLease lease, tier->PinCommitted(ns, step));
  if (!lease.manifest.SpansNodes()) {
    return FailedPrecondition(StepLabel(ns, step) + " does not span nodes; its own agent persists it whole");
  }
  return UploadPartOf(tier, lease);
}

Result<PartRecord> Persister::ReadPartRecord(const Manifest& part, const std::string& member) {
  const std::string name = PartRecordName(member);
  TC_ASSIGN_OR_RETURN(uint64_t size, store_->ObjectSize(part.ns, part.step, name));
  const std::string where =
      store_->DescribeNamespace(part.ns) + " " + StepLabel(part.ns, part.step) + "/" + name;
  if (size > kMaxManifestBytes) return Corruption("part record " + where + " is " + std::to_string(size) + " bytes");
  std::string text(size, '\0');
  TC_RETURN_IF_ERROR(store_->ReadObject(part.ns, part.step, name, 0, text.data(), size));
  TC_ASSIGN_OR_RETURN(PartRecord record, ParsePartRecord(text, where));
  const Manifest& m = record.part;
  if (m.node != member || m.ns != part.ns || m.step != part.step) {
    return Corruption("part record " + where + " describes node " + m.node + "'s part of " + StepLabel(m.ns, m.step));
  }
  return record;
}

Result<bool> Persister::MergePass(PartsWait& w) {
  const Manifest& part = w.lease.manifest;
  for (;;) {  // each `continue` looks again at once
    if (cancel_) return Aborted("persist cancelled by shutdown");
    Result<Manifest> existing = store_->ReadManifest(part.ns, part.step);
    if (existing.ok()) {
      if (!ContainsPart(*existing, part)) return DifferentDurable(*store_, part);
      return true;
    }
    if (existing.status().code() != Code::kNotFound) return existing.status();
    if (!w.merging) {
      const auto waited = std::chrono::steady_clock::now() - w.start;
      if (waited < parts_.takeover_after * static_cast<int64_t>(w.turn)) return false;
      w.merging = true;
      w.last_ask = w.start;  // the merger's part may be missing too: ask for it at once
      Log(LogLevel::kWarn, "merge_takeover")
          .Kv("ns", part.ns)
          .Kv("step", part.step)
          .Kv("merger", MergerOf(part))  // "" when this part has no list (decision 116)
          .Kv("merger_index", part.step % part.MemberCount())
          .Kv("turn", static_cast<uint64_t>(w.turn))
          .Kv("waited_ms", static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(waited).count()));
      continue;
    }
    // Part records found stay found: only the missing ones are read again.
    std::vector<std::string> missing;
    if (!w.merger) {
      const std::string& coordinator = part.member_ref->coordinator;
      Result<PartRecord> record = ReadPartRecord(part, coordinator);
      if (record.ok()) {
        TC_ASSIGN_OR_RETURN(PartMerger m, PartMerger::FromCoordinatorRecord(part, std::move(record).value()));
        w.merger.emplace(std::move(m));
      } else if (record.status().code() == Code::kNotFound) {
        missing.push_back(coordinator);
      } else {
        return record.status();
      }
    }
    static const std::vector<std::string> kNone;
    for (const std::string& member : w.merger ? w.merger->members() : kNone) {
      if (w.merger->Has(member)) continue;
      Result<PartRecord> record =
          member == part.node ? Result<PartRecord>(PartRecord{part, std::nullopt}) : ReadPartRecord(part, member);
      if (record.ok()) {
        TC_RETURN_IF_ERROR(w.merger->Add(std::move(record).value()));
      } else if (record.status().code() == Code::kNotFound) {
        missing.push_back(member);
      } else {
        return record.status();
      }
    }
    if (missing.empty()) {
      TC_ASSIGN_OR_RETURN(Manifest whole, w.merger->Finish(parts_.node_id.empty() ? part.node : parts_.node_id));
      Status committed = store_->CommitStep(whole);
      if (committed.code() == Code::kAlreadyExists) {
        TC_ASSIGN_OR_RETURN(Manifest there, store_->ReadManifest(part.ns, part.step));
        if (!ContainsPart(there, part)) return DifferentDurable(*store_, part);
        return true;
      }
      TC_RETURN_IF_ERROR(committed);
      Log(LogLevel::kInfo, "persist_merged")
          .Kv("ns", part.ns)
          .Kv("step", part.step)
          .Kv("parts", static_cast<uint64_t>(part.MemberCount()))
          .Kv("bytes", whole.TotalBytes());
      return true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now - w.last_ask >= parts_.takeover_after && parts_.ask_elsewhere) {
      w.last_ask = now;
      for (const std::string& member : missing) {
        Result<std::string> by = parts_.ask_elsewhere(member, part.ns, part.step);
        if (by.ok()) {
          Log(*by == member ? LogLevel::kInfo : LogLevel::kWarn, *by == member ? "part_requested" : "part_takeover")
              .Kv("ns", part.ns)
              .Kv("step", part.step)
              .Kv("origin", member)
              .Kv("by", *by);
        } else {
          Log(LogLevel::kWarn, "part_missing").Kv("ns", part.ns).Kv("step", part.step).Kv("origin", member).Err(by.status());
        }
      }
      continue;  // look again at once
    }
    if (now - w.start >= parts_.wait_limit) {
      return FailedPrecondition(
          "the durable copy of " + StepLabel(part.ns, part.step) + " still lacks the parts of nodes " + JoinIds(missing) +
          " after " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - w.start).count()) +
          " s, and neither they, the holders of their replicas, nor (under --redundancy) a rebuild from their "
          "parity groups uploaded them; this node's part is uploaded, "
          "the step is committed once they are (`tierckpt persist` on a node that holds them)");
    }
    return false;
  }
}

void Persister::ApplyDurableRetention(const std::string& ns) {
  const uint32_t keep = EffectiveKeepDurable(options_.durable_keep, tier_->policies().Get(ns));
  if (keep == 0) return;
  Result<std::vector<uint64_t>> steps = store_->ListCommittedSteps(ns);
  if (!steps.ok()) {
    errors_->Add("durable retention", steps.status());
    Log(LogLevel::kWarn, "durable retention").Kv("ns", ns).Err(steps.status());
    return;
  }
  for (size_t i = 0; i + keep < steps->size(); ++i) {
    uint64_t old = (*steps)[i];
    Status st = store_->DeleteStep(ns, old);
    if (!st.ok()) {
      errors_->Add("durable retention", st);
      Log(LogLevel::kWarn, "durable retention").Kv("ns", ns).Kv("step", old).Err(st);
      continue;
    }
    tier_->MarkNotDurable(ns, old);
    Log(LogLevel::kInfo, "durable prune").Kv("ns", ns).Kv("step", old).Kv("keep", keep);
  }
}

void Persister::SweepOnce(const std::string& ns, uint64_t durable_step) {
  MutexLock lock(&gc_mu_);
  if (!swept_.insert(ns).second) return;
  SweepOptions options;
  options.below = durable_step;
  for (const auto& [running_ns, running_step] : running_) {
    if (running_ns == ns) options.keep.push_back(running_step);
  }
  Result<int> swept = store_->SweepUncommitted(ns, options);
  if (!swept.ok()) {
    swept_.erase(ns);  // try again after the next persist
    errors_->Add("durable sweep", swept.status());
    Log(LogLevel::kWarn, "durable sweep").Kv("ns", ns).Err(swept.status());
    return;
  }
  if (*swept > 0) {
    Log(LogLevel::kInfo, "durable sweep")
        .Kv("ns", ns)
        .Kv("below", durable_step)
        .Kv("removed", static_cast<int64_t>(*swept))
        .Kv("store", store_->DescribeNamespace(ns));
  }
}

}  // namespace tierckpt::agent
