// MemoryTier write path after creation: seal (+ asynchronous hashing),
// commit (the atomic publish), abort, writer disconnects. Begin and create:
// memory_tier_create.cc.
#include <algorithm>
#include <set>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "ops/recent_errors.h"
#include "os/files.h"
#include "tier/memory_tier.h"
#include "tier/part_record.h"

namespace tierckpt::agent {
namespace {

std::string JoinNames(const std::vector<std::string>& names, size_t total) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 10; ++i) {
    if (i > 0) out += ", ";
    out += QuoteForMessage(names[i]);
  }
  if (total > 10) out += " and " + std::to_string(total - 10) + " more";
  return out;
}

}  // namespace

Status MemoryTier::SealObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t size,
                              std::string_view checksum, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  std::string what = StepLabel(ns, step) + "/" + std::string(name);
  if (!checksum.empty()) {
    TC_RETURN_IF_ERROR(Checksum::Parse(checksum).status().WithContext("sealing object " + what));
  }
  const std::string key(name);
  // Outside mu_: a step being written lives in its partial dir (the
  // size check is against files changed behind the agent, not a race).
  const std::string path = Layout::ObjectPath(layout_.PartialDir(ns, step), key);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  TierLock lock(this);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || s->restoring) {
    return NotFound("step " + StepLabel(ns, step) +
                    " is not being written in memory (never begun, aborted, or dropped when its "
                    "writers disconnected); BeginStep and CreateObject first");
  }
  if (s->committed) return AlreadyExists("step " + StepLabel(ns, step) + " is already committed");
  TC_RETURN_IF_ERROR(CheckWriterLocked(*s, StepLabel(ns, step), writer));
  if (s->committing) {
    return FailedPrecondition("step " + StepLabel(ns, step) +
                              " is being committed; seal objects before committing");
  }
  auto it = s->objects.find(key);
  if (it == s->objects.end()) return NotFound("object " + what + " was not created; CreateObject first");
  ObjectState& o = it->second;
  if (o.sealed) return FailedPrecondition("object " + what + " is already sealed");
  if (size != o.size) {
    return InvalidArgument("object " + what + " is sealed with size " + std::to_string(size) +
                           " but was created with size " + std::to_string(o.size) +
                           "; create it again with the right size");
  }
  if (!info.exists || info.size != size) {
    return Corruption("object " + what + " should hold " + std::to_string(size) + " bytes but its file " +
                      path + (info.exists ? " holds " + std::to_string(info.size) : std::string(" is gone")) +
                      " (it was resized or removed behind the agent); create it again");
  }
  o.sealed = true;
  o.expected = std::string(checksum);
  if (checksum.empty() || options_.verify_on_seal) {
    SubmitCheckLocked(std::string(ns), step, s, key, &o);
  } else {
    o.check = CheckState::kOk;
    o.actual = o.expected;
  }
  return Status::Ok();
}

void MemoryTier::SubmitCheckLocked(const std::string& ns, uint64_t step, StepState* s,
                                   const std::string& name, ObjectState* o) {
  o->check = CheckState::kPending;
  o->blocks_commit = !options_.commit_before_hash || !o->expected.empty();
  ++s->pending_checks;
  if (o->blocks_commit) ++s->blocking_checks;
  ++s->files->pins;
  std::shared_ptr<StepFiles> files = s->files;
  StepRef ref{ns, step};
  uint64_t instance = s->instance;
  uint64_t id = o->id;
  uint64_t size = o->size;
  bool queued = verifier_->Submit([this, ref, instance, name, id, size, files] {
    // Where the file is now: a commit before the hash renames the step's
    // dir while hashes are queued or opening (commit_before_hash), so a file
    // gone from where it was is looked for again where its step went.
    std::string path = CurrentObjectPath(ref, instance, *files, name);
    auto began = std::chrono::steady_clock::now();
    Result<std::string> hashed = HashObjectFile(read_mappings_, path, size);
    for (int moved = 0; !hashed.ok() && hashed.status().code() == Code::kNotFound && moved < 3; ++moved) {
      std::string now = CurrentObjectPath(ref, instance, *files, name);
      if (now == path) break;
      path = std::move(now);
      began = std::chrono::steady_clock::now();
      hashed = HashObjectFile(read_mappings_, path, size);
    }
    OnChecked(ref, instance, name, id, files, hashed, began);
  });
  if (!queued) {
    --s->pending_checks;
    if (o->blocks_commit) --s->blocking_checks;
    --s->files->pins;
    o->check = CheckState::kError;
    o->error = Unavailable("tierckptd is shutting down; the object was not verified");
  }
}

std::string MemoryTier::CurrentObjectPath(const StepRef& ref, uint64_t instance, const StepFiles& files,
                                          const std::string& name) {
  MutexLock lock(&mu_);
  for (;;) {
    StepState* s = index_.FindInstance(ref.first, ref.second, instance);
    if (s == nullptr || !s->publishing || shutting_down_) break;
    cv_.Wait();
  }
  return Layout::ObjectPath(files.dir, name);
}

void MemoryTier::OnChecked(const StepRef& ref, uint64_t instance, const std::string& name, uint64_t object_id,
                           const std::shared_ptr<StepFiles>& files, const Result<std::string>& actual,
                           std::chrono::steady_clock::time_point hash_began) {
  TierLock lock(this);
  StepState* s = FindLocked(ref.first, ref.second);
  if (s != nullptr && s->instance == instance) {
    auto it = s->objects.find(name);
    if (it != s->objects.end() && it->second.id == object_id && it->second.check == CheckState::kPending) {
      ObjectState& o = it->second;
      --s->pending_checks;
      if (o.blocks_commit) --s->blocking_checks;
      if (!actual.ok()) {
        o.check = CheckState::kError;
        o.error = actual.status();
      } else {
        o.actual = *actual;
        o.check = (o.expected.empty() || o.expected == o.actual) ? CheckState::kOk : CheckState::kMismatch;
        if (o.check == CheckState::kOk) o.verified_at = hash_began;
      }
      if (s->committed) SettleChecksLocked(ref.first, ref.second, s, &name);
      cv_.SignalAll();
    }
  }
  UnpinLocked(files);
}

Result<Manifest> MemoryTier::CommitStep(std::string_view ns, uint64_t step, uint32_t world_size, bool persist,
                                        const std::vector<std::string>& expected, const StepSpan& step_span,
                                        std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  std::vector<std::string> span = step_span.members;
  std::sort(span.begin(), span.end());
  span.erase(std::unique(span.begin(), span.end()), span.end());
  if (span.size() == 1 && span[0] == options_.node_id) span.clear();
  if (!span.empty() && !std::binary_search(span.begin(), span.end(), options_.node_id)) {
    return InvalidArgument("commit of step " + StepLabel(ns, step) + " names members " +
                           JoinNames(span, span.size()) + " without this node (" + options_.node_id +
                           "); a node commits only its own part");
  }
  std::optional<MemberRef> member_ref;
  if (!span.empty() && !step_span.coordinator.empty() && step_span.coordinator != options_.node_id) {
    auto coordinator = std::lower_bound(span.begin(), span.end(), step_span.coordinator);
    if (coordinator == span.end() || *coordinator != step_span.coordinator) {
      return InvalidArgument("commit of step " + StepLabel(ns, step) + " names coordinator " +
                             step_span.coordinator + ", which is not among its members " +
                             JoinNames(span, span.size()));
    }
    const MemberListDigest d = DigestMembers(span);
    const auto self = std::lower_bound(span.begin(), span.end(), options_.node_id);
    member_ref = MemberRef{static_cast<uint32_t>(d.count), static_cast<uint32_t>(self - span.begin()), d.digest,
                           step_span.coordinator};
  }
  for (const auto& n : expected) TC_RETURN_IF_ERROR(ValidateObjectName(n).WithContext("expected_objects"));
  std::string label = StepLabel(ns, step);
  if (persist && !options_.has_durable) {
    return FailedPrecondition("commit of step " + label +
                              " asks to persist it, but this agent has no durable tier; start "
                              "tierckptd with --durable URL, or commit without persist");
  }
  TierLock lock(this);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr) {
    return NotFound("step " + label +
                    " is not being written in memory (never begun, aborted, or dropped when its "
                    "writers disconnected); write its objects, then commit");
  }
  if (s->committed) return AlreadyExists("step " + label + " is already committed in memory");
  if (!s->restoring) TC_RETURN_IF_ERROR(CheckWriterLocked(*s, label, writer));
  if (s->committing || s->restoring) {
    return FailedPrecondition("step " + label + " is already being committed or restored");
  }
  std::vector<std::string> names = expected;
  std::sort(names.begin(), names.end());
  if (std::adjacent_find(names.begin(), names.end()) != names.end()) {
    return InvalidArgument("expected_objects of step " + label + " lists a name twice");
  }
  if (names.empty()) {
    for (const auto& [n, o] : s->objects) names.push_back(n);
  }
  if (names.empty()) {
    return FailedPrecondition("step " + label + " has no objects; create and seal at least one, then commit");
  }
  std::vector<std::string> missing;
  for (const auto& n : names) {
    auto it = s->objects.find(n);
    if (it == s->objects.end() || !it->second.sealed) missing.push_back(n);
  }
  if (!missing.empty()) {
    return FailedPrecondition("step " + label + " cannot commit: " + std::to_string(missing.size()) +
                              " expected object(s) are missing or unsealed: " +
                              JoinNames(missing, missing.size()) + "; seal them (or fix expected_objects)");
  }
  if (names.size() != s->objects.size()) {
    std::vector<std::string> extra;
    std::set<std::string> want(names.begin(), names.end());
    for (const auto& [n, o] : s->objects) {
      if (want.count(n) == 0) extra.push_back(n);
    }
    return FailedPrecondition("step " + label + " holds " + std::to_string(extra.size()) +
                              " object(s) not in expected_objects: " + JoinNames(extra, extra.size()) +
                              "; list them too, or abort the step and write it again");
  }
  s->committing = true;
  const uint64_t instance = s->instance;
  for (;;) {
    StepState* cur = FindLocked(ns, step);
    if (shutting_down_ || cur == nullptr || cur->instance != instance || cur->blocking_checks == 0) break;
    cv_.Wait();
  }
  s = FindLocked(ns, step);
  if (s == nullptr || s->instance != instance) {
    return Aborted("step " + label + " was dropped while its commit waited for checksums; write it again");
  }
  s->committing = false;
  if (shutting_down_) return Unavailable("tierckptd is shutting down; step " + label + " was not committed");
  Manifest m;
  m.ns = std::string(ns);
  m.step = step;
  m.world_size = world_size;
  m.created_unix_ms = NowUnixMs();
  m.node = options_.node_id;
  if (member_ref) {
    m.member_ref = std::move(member_ref);  // decision 116: O(its own objects)
  } else {
    m.members = span;
    m.placement = step_span.placement;
  }
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> verified;
  for (const auto& [n, o] : s->objects) {
    if (o.check == CheckState::kMismatch) {
      return Corruption("object " + label + "/" + n + " was sealed with checksum " + o.expected +
                        " but its bytes hash to " + o.actual +
                        "; the data changed after sealing or was written wrongly: create it again "
                        "and commit again");
    }
    if (o.check == CheckState::kError) return o.error.WithContext("verifying object " + label + "/" + n);
    if (o.check == CheckState::kPending) m.checksums_pending = true;  // filled in by SettleChecksLocked
    m.objects.push_back(
        ObjectEntry{n, o.size, o.check == CheckState::kPending ? "" : o.actual, options_.node_id});
    if (o.verified_at.has_value()) verified.emplace(n, *o.verified_at);
  }
  // The one place a committed step's persistence is decided (decision 118).
  const bool do_persist =
      options_.has_durable && PersistsStep(step, persist, options_.persist_every, policies_.Get(ns));
  const auto begun = s->begun;
  TC_RETURN_IF_ERROR(PublishLocked(std::string(ns), step, &s, m, do_persist, std::move(verified)));
  std::string ns_name(ns);
  ApplyRetentionLocked(ns_name, KeepLocked(ns_name), nullptr, step);
  lock.Unlock();
  if (do_persist) CallPersistHook({{ns_name, step}});
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begun).count();
  double mbps = ms > 0 ? static_cast<double>(m.TotalBytes()) / 1e6 / (ms / 1e3) : 0.0;
  options_.metrics->commit.Succeeded(m.TotalBytes(), ms / 1e3);  // the save: first object to commit
  options_.metrics->CommittedStep(ns);
  Log(LogLevel::kInfo, "commit")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("bytes", m.TotalBytes())
      .Kv("objects", static_cast<uint64_t>(m.objects.size()))
      .Kv("ms", ms)
      .Kv("mb_per_s", mbps)
      .Kv("persist", do_persist);
  return m;
}

Status MemoryTier::PublishLocked(
    const std::string& ns, uint64_t step, StepState** sp, Manifest manifest, bool persist_marker,
    std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> verified) {
  StepState* s = *sp;
  const std::string label = StepLabel(ns, step);
  const uint64_t instance = s->instance;
  const std::string partial = s->files->dir;
  const std::string final_dir = layout_.StepDir(ns, step);
  // committing (or restoring) keeps writers, aborts and disconnects off the
  // step while its records are written and its dir renamed, outside mu_.
  s->committing = true;
  AwaitPathLocked(final_dir);  // a dropped step_<n> still moving aside
  s = index_.FindInstance(ns, step, instance);
  if (s == nullptr)
    return Aborted("step " + label + " was dropped while it waited to be published; write it again");
  s->publishing = true;
  mu_.Unlock();
  Status st = TierFiles::WriteStepRecords(partial, manifest, persist_marker);
  if (st.ok()) st = files_.Publish(partial, final_dir);
  mu_.Lock();
  s = index_.FindInstance(ns, step, instance);
  if (s == nullptr) {
    if (st.ok()) io_.remove_trees.push_back(final_dir);
    return Aborted("step " + label + " was dropped while it was being published; write it again");
  }
  s->committing = false;
  s->publishing = false;
  cv_.SignalAll();  // hashes waiting for the step's dir (CurrentObjectPath)
  if (!st.ok()) return st.WithContext("publishing step " + label);
  s->files->dir = final_dir;
  s->committed = true;
  s->restoring = false;
  s->manifest = std::move(manifest);
  s->verified = std::move(verified);
  s->writers.clear();
  s->commit_seq = next_commit_seq_++;
  s->persist = persist_marker ? PersistState::kQueued : PersistState::kNone;
  s->persist_error = Status::Ok();
  SettleChecksLocked(ns, step, s);  // hashes that landed while the records were written
  cv_.SignalAll();
  s = index_.FindInstance(ns, step, instance);
  if (s == nullptr) {
    return Aborted("step " + label +
                   " was dropped right after its commit: its bytes could not be hashed; write it again");
  }
  *sp = s;
  return Status::Ok();
}

StepState* MemoryTier::AwaitChecksumsLocked(std::string_view ns, uint64_t step) const {
  for (;;) {
    StepState* s = FindLocked(ns, step);
    if (s == nullptr || !s->committed || !s->manifest.checksums_pending) return s;
    if (shutting_down_) return nullptr;
    cv_.Wait();
  }
}

std::map<std::string, ObjectState>::iterator MemoryTier::SettleObjectLocked(
    const std::string& ns, uint64_t step, StepState* s, std::map<std::string, ObjectState>::iterator it,
    Status* failed) {
  ObjectState& o = it->second;
  if (o.check == CheckState::kPending) return std::next(it);
  // Manifest objects are sorted by name.
  auto e = std::lower_bound(s->manifest.objects.begin(), s->manifest.objects.end(), it->first,
                            [](const ObjectEntry& x, const std::string& n) { return x.name < n; });
  if (e != s->manifest.objects.end() && e->name == it->first && e->checksum.empty()) {
    if (o.check == CheckState::kOk && !o.actual.empty()) {
      e->checksum = o.actual;
      if (o.verified_at.has_value()) MarkVerifiedLocked(s, it->first, *o.verified_at);
    } else if (failed->ok()) {
      *failed =
          (o.check == CheckState::kError ? o.error : Internal("its hash gave no checksum"))
              .WithContext("hashing object " + StepLabel(ns, step) + "/" + it->first + " after its commit");
    }
  }
  return s->objects.erase(it);
}

void MemoryTier::SettleChecksLocked(const std::string& ns, uint64_t step, StepState* s,
                                    const std::string* only) {
  Status failed;
  if (only != nullptr) {
    if (auto it = s->objects.find(*only); it != s->objects.end())
      SettleObjectLocked(ns, step, s, it, &failed);
  } else {
    for (auto it = s->objects.begin(); it != s->objects.end();)
      it = SettleObjectLocked(ns, step, s, it, &failed);
  }
  if (!failed.ok()) {
    Log(LogLevel::kError, "hash after commit").Kv("ns", ns).Kv("step", step).Err(failed);
    DropLocked(ns, step, "its bytes could not be hashed after commit");
    return;
  }
  if (!s->manifest.checksums_pending || s->pending_checks > 0) return;
  s->manifest.checksums_pending = false;
  // Under mu_, as RequestPersist writes its marker: one small file on the
  // tmpfs, and no reader of the record runs while the agent does (recovery).
  Status st = TierFiles::RewriteManifest(s->files->dir, s->manifest);
  if (!st.ok()) {
    // The record stays "pending": a restart hashes the objects again (TierRecovery).
    Log(LogLevel::kWarn, "hash after commit").Kv("ns", ns).Kv("step", step).Err(st);
  }
}

Status MemoryTier::AbortStep(std::string_view ns, uint64_t step, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TierLock lock(this);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr) return Status::Ok();
  std::string label = StepLabel(ns, step);
  if (s->committed) {
    return FailedPrecondition("step " + label +
                              " is committed; delete it instead (DeleteStep, `tierckpt prune`)");
  }
  if (s->committing || s->restoring) {
    return FailedPrecondition("step " + label + " is being committed or restored right now; retry later");
  }
  TC_RETURN_IF_ERROR(CheckWriterLocked(*s, label, writer));
  DropLocked(std::string(ns), step, "aborted by a client");
  return Status::Ok();
}

Status MemoryTier::DropObject(std::string_view ns, uint64_t step, std::string_view name,
                              std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  const std::string label = StepLabel(ns, step);
  const std::string key(name);
  TierLock lock(this);
  for (;;) {
    StepState* s = FindLocked(ns, step);
    if (s == nullptr || s->restoring) return Status::Ok();
    if (s->committed) {
      return FailedPrecondition("step " + label +
                                " is committed; its objects cannot change (delete the step)");
    }
    if (s->committing) {
      return FailedPrecondition("step " + label + " is being committed right now; retry later");
    }
    TC_RETURN_IF_ERROR(CheckWriterLocked(*s, label, writer));
    auto it = s->objects.find(key);
    if (it == s->objects.end()) return Status::Ok();
    if (it->second.check == CheckState::kPending) {  // its hash reads the file: let it finish
      cv_.Wait();
      continue;
    }
    const uint64_t size = it->second.size;
    const bool writer_done = it->second.sealed;
    s->objects.erase(it);
    RecycleObjectLocked(*s->files, key, size, writer_done);
    return Status::Ok();
  }
}

void MemoryTier::ReleaseWriter(uint64_t conn) {
  TierLock lock(this);
  std::vector<StepRef> drop;
  for (auto& [ns, nss] : index_.namespaces()) {
    for (auto& [step, s] : nss.steps) {
      if (s->committed || s->writers.erase(conn) == 0) continue;
      if (s->writers.empty() && !s->committing && !s->restoring) drop.emplace_back(ns, step);
    }
  }
  for (const auto& [ns, step] : drop) {
    Log(LogLevel::kWarn, "dropped partial step")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("why", "writer disconnected")
        .Kv("conn", conn);
    DropLocked(ns, step, "writer disconnected");
  }
}

}  // namespace tierckpt::agent
