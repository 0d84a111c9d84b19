// MemoryTier write path: begin, create, seal (+ asynchronous hashing),
// commit (the atomic publish), abort, writer disconnects.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "tier/memory_tier.h"

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "ops/recent_errors.h"
#include "os/files.h"

namespace tierckpt::agent {
namespace {

Status ValidateStepRef(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  return ValidateStep(step);
}

std::string JoinNames(const std::vector<std::string>& names, size_t total) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 10; ++i) {
    if (i > 0) out += ", ";
    out += QuoteForMessage(names[i]);
  }
  if (total > 10) out += " and " + std::to_string(total - 10) + " more";
  return out;
}

// A file name and a directory name may not collide: "a" and "a/b".
Status CheckNameConflict(const std::map<std::string, ObjectState>& objects, const std::string& name,
                         const std::string& label) {
  auto it = objects.lower_bound(name + "/");
  if (it != objects.end() && it->first.rfind(name + "/", 0) == 0) {
    return InvalidArgument("object name " + QuoteForMessage(name) + " in step " + label +
                           " is also a directory of object " + QuoteForMessage(it->first) +
                           "; use distinct names");
  }
  for (size_t pos = name.find('/'); pos != std::string::npos; pos = name.find('/', pos + 1)) {
    std::string prefix = name.substr(0, pos);
    if (objects.count(prefix) != 0) {
      return InvalidArgument("object name " + QuoteForMessage(name) + " in step " + label +
                             " puts a directory where object " + QuoteForMessage(prefix) +
                             " is; use distinct names");
    }
  }
  return Status::Ok();
}

// Gives every page of the object's file its memory now. A tmpfs file sized
// with ftruncate is a hole: when the mount fills later (a tmpfs shared with
// DataLoader workers, NCCL or other jobs), a writer's store into its mapping
// gets SIGBUS. Reserved, the full mount is an error here instead. Pages a
// recycled segment already holds cost only a look-up. Filesystems without
// fallocate (not tmpfs) are left as they are.
Status ReserveFile(int fd, uint64_t size, const std::string& root, const std::string& what) {
  if (size == 0) return Status::Ok();
  int rc;
  do {
    rc = ::fallocate(fd, 0, 0, static_cast<off_t>(size));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 || errno == EOPNOTSUPP) return Status::Ok();
  if (errno == ENOSPC) {
    return ResourceExhausted("the filesystem of the memory tier (" + root + ") has no room left for object " + what +
                             " (" + std::to_string(size) + " bytes), although the agent's budget does: other "
                             "programs filled the mount after the agent started (DataLoader or NCCL segments in "
                             "/dev/shm?); free space there, give the agent a mount of its own (--root), or lower "
                             "--memory-budget to what the mount can hold");
  }
  return ErrnoStatus("reserving " + std::to_string(size) + " bytes for object " + what + " in " + root);
}

// A new object file at path (a name only this call uses), exactly size
// bytes, mode 0600 whatever the umask; nothing is left at path on failure.
Result<UniqueFd> CreateFreshFile(const std::string& path, uint64_t size) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDWR | O_CREAT | O_EXCL, 0600));
  Status made;
  if (::fchmod(fd.get(), 0600) != 0) {
    made = ErrnoStatus("chmod " + path);
  } else if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    made = ErrnoStatus("size " + path + " to " + std::to_string(size) + " bytes");
  }
  if (!made.ok()) {
    RemoveFile(path, IfMissing::kOk).IgnoreError();  // the failure to make it is the answer
    return made;
  }
  return fd;
}

// Removes the manifest and marker of a step that failed to commit, so that
// its .partial dir never looks committed; the commit's error is the answer.
void RemoveStepRecords(const std::string& partial) {
  RemoveFile(Layout::ManifestPath(partial), IfMissing::kOk).IgnoreError();
  RemoveFile(Layout::MarkerPath(partial), IfMissing::kOk).IgnoreError();
}

}  // namespace

Result<std::string> MemoryTier::HashObjectFile(const std::string& path, uint64_t size) {
  TC_ASSIGN_OR_RETURN(ReadView view, read_mappings_.Open(path));
  if (view.size() != size) {
    return Corruption(path + " holds " + std::to_string(view.size()) + " bytes, expected " +
                      std::to_string(size) + " (it was resized after sealing)");
  }
  return ComputeChecksum(view.data(), view.size()).ToString();
}

Status MemoryTier::CheckWriterLocked(const StepState& s, std::string_view label, std::string_view writer) {
  if (writer == kAnyWriter || s.owner == kAnyWriter || writer == s.owner) return Status::Ok();
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - s.begun);
  auto name = [](std::string_view id) {
    return id.empty() ? std::string("an anonymous writer") : "writer " + QuoteForMessage(id);
  };
  return AlreadyExists("step " + std::string(label) + " is being written by " + name(s.owner) + " (begun " +
                       std::to_string(age.count()) + " s ago, " + std::to_string(s.writers.size()) +
                       " connection(s)), not by this " + name(writer) +
                       "; nothing of yours was written to it. Two jobs, or two incarnations of one job, are "
                       "saving the same namespace and step: give each job its own namespace, or stop the "
                       "other writer (its unfinished step is dropped when its connections close) and save "
                       "again");
}

Result<StepState*> MemoryTier::BeginLocked(std::string_view ns, uint64_t step, uint64_t conn,
                                           std::string_view writer) {
  std::string label = StepLabel(ns, step);
  if (StepState* s = FindLocked(ns, step)) {
    if (s->committed) {
      return AlreadyExists("step " + label +
                           " is already committed in memory; write a new step number, or delete "
                           "the old one first (DeleteStep, `tierckpt prune`)");
    }
    if (s->restoring) {
      return FailedPrecondition("step " + label +
                                " is being restored from the durable tier; read it once restored, "
                                "or write a new step number");
    }
    TC_RETURN_IF_ERROR(CheckWriterLocked(*s, label, writer));
    if (s->committing) {
      return FailedPrecondition("step " + label +
                                " is being committed by another connection; write a new step number");
    }
    if (conn != 0) s->writers.insert(conn);
    return s;
  }
  if (shutting_down_) return Unavailable("tierckptd is shutting down; retry once it is restarted");
  std::string dir = layout_.PartialDir(ns, step);
  TC_RETURN_IF_ERROR(RemoveTree(dir));
  TC_RETURN_IF_ERROR(MakeDirs(dir, 0700));
  auto state = std::make_unique<StepState>();
  state->instance = next_id_++;
  state->files = std::make_shared<StepFiles>();
  state->files->dir = dir;
  state->begun = std::chrono::steady_clock::now();
  state->owner = std::string(writer);
  if (conn != 0) state->writers.insert(conn);
  StepState* raw = state.get();
  namespaces_.try_emplace(std::string(ns)).first->second.steps[step] = std::move(state);
  return raw;
}

Status MemoryTier::BeginStep(std::string_view ns, uint64_t step, uint64_t conn, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  MutexLock lock(&mu_);
  return BeginLocked(ns, step, conn, writer).status();
}

Result<CreatedObject> MemoryTier::CreateObject(std::string_view ns, uint64_t step, std::string_view name,
                                               uint64_t size, uint64_t conn, std::string_view writer) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  std::string label = StepLabel(ns, step);
  std::string what = label + "/" + std::string(name);
  if (size > options_.budget_bytes) {
    return ResourceExhausted("object " + what + " is " + std::to_string(size) +
                             " bytes, larger than the whole memory budget (" +
                             std::to_string(options_.budget_bytes) +
                             " bytes); raise --memory-budget or split the object");
  }
  const std::string key(name);
  // Makes room for the object in s: an unsealed (or failed) one of the same
  // name goes, a sealed one stays (kAlreadyExists).
  auto clear_name = [&](StepState* s) REQUIRES(mu_) -> Status {
    auto it = s->objects.find(key);
    if (it != s->objects.end()) {
      const ObjectState& old = it->second;
      if (old.sealed && old.check != CheckState::kMismatch && old.check != CheckState::kError) {
        return AlreadyExists("object " + what +
                             " is already sealed; objects are write-once: use another name, or abort "
                             "the step and write it again");
      }
      RecycleFileLocked(Layout::ObjectPath(s->files->dir, key), old.size);
      s->objects.erase(it);
    }
    return CheckNameConflict(s->objects, key, label);
  };
  MutexLock lock(&mu_);
  TC_ASSIGN_OR_RETURN(StepState * s, BeginLocked(ns, step, conn, writer));
  TC_RETURN_IF_ERROR(clear_name(s));
  TC_RETURN_IF_ERROR(EnsureSpaceLocked(size, what));
  UniqueFd fd;
  uint64_t id = 0;
  if (size > 0 && PoolFitLocked(size)) {
    // A pool segment: SegmentPool moves it into place under mu_.
    Result<UniqueFd> taken = CreateFileLocked(s->files->dir, key, size);
    if (!taken.ok()) return taken.status().WithContext("creating object " + what);
    fd = std::move(taken).value();
    ObjectState o;
    o.id = id = next_id_++;
    o.size = size;
    s->objects[key] = std::move(o);
  } else {
    // A fresh file is made outside mu_ (open, chmod, truncate) as
    // pool/creating_<n>, a name no one else uses (the step's own paths may
    // belong to its next instance by then; SegmentPool keeps only seg_*
    // files, and Load removes the rest after a crash). The object is in the
    // index meanwhile, unsealed, its bytes counted (so a commit waits for it,
    // and a drop or a second create of the name settles its bytes as for any
    // object); the file moves into the step under mu_ if the object is still
    // this one.
    ObjectState o;
    o.id = id = next_id_++;
    o.size = size;
    s->objects[key] = std::move(o);
    object_bytes_ += size;
    const uint64_t instance = s->instance;
    const std::string fresh = JoinPath(layout_.PoolDir(), "creating_" + std::to_string(next_id_++));
    lock.Unlock();
    Result<UniqueFd> made = CreateFreshFile(fresh, size);
    lock.Lock();
    s = FindLocked(ns, step);
    const bool ours = s != nullptr && s->instance == instance && s->objects.count(key) != 0 &&
                      s->objects[key].id == id && !s->objects[key].sealed;
    Status placed = made.status().WithContext("creating object " + what);
    if (placed.ok() && !ours) {
      placed = Aborted("object " + what +
                       " was dropped or created again while its file was being made; create it again");
    }
    if (placed.ok()) {
      const std::string dest = Layout::ObjectPath(s->files->dir, key);
      if (key.find('/') != std::string::npos) placed = MakeDirs(DirName(dest), 0700);
      if (placed.ok()) placed = RenamePath(fresh, dest);
      if (!placed.ok()) placed = placed.WithContext("creating object " + what);
    }
    if (!placed.ok()) {
      if (made.ok())
        RemoveFile(fresh, IfMissing::kOk)
            .IgnoreError();  // nothing of ours stays; the error above is the answer
      if (ours) {  // otherwise whoever dropped or replaced it settled its bytes
        s->objects.erase(key);
        object_bytes_ -= std::min(object_bytes_, size);
      }
      return placed;
    }
    fd = std::move(made).value();
  }
  std::string path = Layout::ObjectPath(s->files->dir, key);
  const uint64_t instance = s->instance;
  lock.Unlock();
  // Outside mu_: reserving a large fresh object takes as long as its page
  // allocation, and other ranks create their objects meanwhile.
  Status reserved = ReserveFile(fd.get(), size, options_.root, what);
  if (!reserved.ok()) {
    lock.Lock();
    StepState* cur = FindLocked(ns, step);
    if (cur != nullptr && cur->instance == instance) {
      auto obj = cur->objects.find(key);
      if (obj != cur->objects.end() && obj->second.id == id && !obj->second.sealed) {
        RecycleFileLocked(Layout::ObjectPath(cur->files->dir, key), obj->second.size);
        cur->objects.erase(obj);
      }
    }
    return reserved;
  }
  return CreatedObject{std::move(fd), path};
}

Status MemoryTier::SealObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t size,
                              std::string_view checksum, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  std::string what = StepLabel(ns, step) + "/" + std::string(name);
  if (!checksum.empty()) {
    TC_RETURN_IF_ERROR(Checksum::Parse(checksum).status().WithContext("sealing object " + what));
  }
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || s->restoring) {
    return NotFound("step " + StepLabel(ns, step) +
                    " is not being written in memory (never begun, aborted, or dropped when its "
                    "writers disconnected); BeginStep and CreateObject first");
  }
  if (s->committed) return AlreadyExists("step " + StepLabel(ns, step) + " is already committed");
  TC_RETURN_IF_ERROR(CheckWriterLocked(*s, StepLabel(ns, step), writer));
  if (s->committing) {
    return FailedPrecondition("step " + StepLabel(ns, step) + " is being committed; seal objects before committing");
  }
  std::string key(name);
  auto it = s->objects.find(key);
  if (it == s->objects.end()) return NotFound("object " + what + " was not created; CreateObject first");
  ObjectState& o = it->second;
  if (o.sealed) return FailedPrecondition("object " + what + " is already sealed");
  if (size != o.size) {
    return InvalidArgument("object " + what + " is sealed with size " + std::to_string(size) +
                           " but was created with size " + std::to_string(o.size) +
                           "; create it again with the right size");
  }
  std::string path = Layout::ObjectPath(s->files->dir, key);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
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
  ++s->pending_checks;
  ++s->files->pins;
  std::shared_ptr<StepFiles> files = s->files;
  StepRef ref{ns, step};
  uint64_t instance = s->instance;
  uint64_t id = o->id;
  uint64_t size = o->size;
  std::string path = Layout::ObjectPath(s->files->dir, name);
  bool queued = verifier_->Submit([this, ref, instance, name, id, size, path, files] {
    OnChecked(ref, instance, name, id, files.get(), HashObjectFile(path, size));
  });
  if (!queued) {
    --s->pending_checks;
    --s->files->pins;
    o->check = CheckState::kError;
    o->error = Unavailable("tierckptd is shutting down; the object was not verified");
  }
}

void MemoryTier::OnChecked(const StepRef& ref, uint64_t instance, const std::string& name,
                           uint64_t object_id, StepFiles* files, const Result<std::string>& actual) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ref.first, ref.second);
  if (s != nullptr && s->instance == instance) {
    auto it = s->objects.find(name);
    if (it != s->objects.end() && it->second.id == object_id && it->second.check == CheckState::kPending) {
      ObjectState& o = it->second;
      --s->pending_checks;
      if (!actual.ok()) {
        o.check = CheckState::kError;
        o.error = actual.status();
      } else {
        o.actual = *actual;
        o.check = (o.expected.empty() || o.expected == o.actual) ? CheckState::kOk : CheckState::kMismatch;
      }
      cv_.SignalAll();
    }
  }
  UnpinLocked(files);
}

Result<Manifest> MemoryTier::CommitStep(std::string_view ns, uint64_t step, uint32_t world_size,
                                        bool persist, const std::vector<std::string>& expected,
                                        const StepSpan& step_span, std::string_view writer) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  std::vector<std::string> span = step_span.members;
  std::sort(span.begin(), span.end());
  span.erase(std::unique(span.begin(), span.end()), span.end());
  if (span.size() == 1 && span[0] == options_.node_id) span.clear();
  if (!span.empty() && !std::binary_search(span.begin(), span.end(), options_.node_id)) {
    return InvalidArgument("commit of step " + StepLabel(ns, step) + " names members " + JoinNames(span, span.size()) +
                           " without this node (" + options_.node_id + "); a node commits only its own part");
  }
  for (const auto& n : expected) TC_RETURN_IF_ERROR(ValidateObjectName(n).WithContext("expected_objects"));
  std::string label = StepLabel(ns, step);
  if (persist && !options_.has_durable) {
    return FailedPrecondition("commit of step " + label +
                              " asks to persist it, but this agent has no durable tier; start "
                              "tierckptd with --durable URL, or commit without persist");
  }
  MutexLock lock(&mu_);
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
    if (shutting_down_ || cur == nullptr || cur->instance != instance || cur->pending_checks == 0) break;
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
  m.members = span;
  m.placement = step_span.placement;
  for (const auto& [n, o] : s->objects) {
    if (o.check == CheckState::kMismatch) {
      return Corruption("object " + label + "/" + n + " was sealed with checksum " + o.expected +
                        " but its bytes hash to " + o.actual +
                        "; the data changed after sealing or was written wrongly: create it again "
                        "and commit again");
    }
    if (o.check == CheckState::kError) return o.error.WithContext("verifying object " + label + "/" + n);
    m.objects.push_back(ObjectEntry{n, o.size, o.actual, options_.node_id});
  }
  const bool do_persist =
      options_.has_durable && (persist || (options_.persist_every > 0 && step % options_.persist_every == 0));
  const auto begun = s->begun;
  // The manifest is written outside mu_; committing keeps writers, aborts
  // and disconnects off the step meanwhile.
  s->committing = true;
  const std::string partial = s->files->dir;
  lock.Unlock();
  Status written = WriteStepRecords(partial, m, do_persist);
  lock.Lock();
  s = FindLocked(ns, step);
  if (s == nullptr || s->instance != instance) {
    return Aborted("step " + label + " was dropped while its manifest was written; write it again");
  }
  s->committing = false;
  if (!written.ok()) return written.WithContext("publishing step " + label);
  TC_RETURN_IF_ERROR(PublishLocked(std::string(ns), step, s, m, do_persist));
  std::string ns_name(ns);
  ApplyRetentionLocked(ns_name, options_.keep_last, nullptr, step);
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

Status MemoryTier::WriteStepRecords(const std::string& partial, const Manifest& manifest,
                                    bool persist_marker) {
  Status st = WriteFileAtomic(Layout::ManifestPath(partial), manifest.ToJson(), /*durable=*/false);
  if (st.ok() && persist_marker) st = WriteFileAtomic(Layout::MarkerPath(partial), "", false);
  if (!st.ok()) RemoveStepRecords(partial);
  return st;
}

Status MemoryTier::PublishLocked(const std::string& ns, uint64_t step, StepState* s, Manifest manifest,
                                 bool persist_marker) {
  const std::string partial = s->files->dir;
  const std::string final_dir = layout_.StepDir(ns, step);
  Status st = RenamePath(partial, final_dir);
  if (!st.ok()) {
    RemoveStepRecords(partial);
    return st.WithContext("publishing step " + StepLabel(ns, step));
  }
  s->files->dir = final_dir;
  s->committed = true;
  s->committing = false;
  s->restoring = false;
  s->manifest = std::move(manifest);
  s->objects.clear();
  s->writers.clear();
  s->commit_seq = next_commit_seq_++;
  s->persist = persist_marker ? PersistState::kQueued : PersistState::kNone;
  s->persist_error = Status::Ok();
  cv_.SignalAll();
  return Status::Ok();
}

Status MemoryTier::AbortStep(std::string_view ns, uint64_t step, std::string_view writer) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr) return Status::Ok();
  std::string label = StepLabel(ns, step);
  if (s->committed) {
    return FailedPrecondition("step " + label + " is committed; delete it instead (DeleteStep, `tierckpt prune`)");
  }
  if (s->committing || s->restoring) {
    return FailedPrecondition("step " + label + " is being committed or restored right now; retry later");
  }
  TC_RETURN_IF_ERROR(CheckWriterLocked(*s, label, writer));
  DropLocked(std::string(ns), step, "aborted by a client");
  return Status::Ok();
}

void MemoryTier::ReleaseWriter(uint64_t conn) {
  RecycledDirsRemover remover(this);  // after mu_ is released
  MutexLock lock(&mu_);
  std::vector<StepRef> drop;
  for (auto& [ns, nss] : namespaces_) {
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
