// MemoryTier create path: beginning a step (its partial dir made outside
// mu_) and creating its objects (recorded under mu_, their files made
// beneath the step dir's fd outside mu_, with no second trip into mu_ on
// success).
#include <algorithm>

#include "common/log.h"
#include "common/names.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {
namespace {

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

}  // namespace

Status MemoryTier::CheckWriterLocked(const StepState& s, std::string_view label, std::string_view writer) {
  if (writer == kAnyWriter || s.owner == kAnyWriter || writer == s.owner) return Status::Ok();
  const auto age =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - s.begun);
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
  const std::string label = StepLabel(ns, step);
  for (;;) {
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
      if (!s->dir_ready) {  // its first caller is making its dir
        cv_.Wait();
        continue;
      }
      if (conn != 0) s->writers.insert(conn);
      return s;
    }
    if (shutting_down_) return Unavailable("tierckptd is shutting down; retry once it is restarted");
    if (conn != 0 && HashesPendingLocked(ns)) {
      // A new save begins once the hashes of the namespace's earlier commits
      // are in (commit_before_hash): the commit no longer waits for them,
      // and a writer saving back to back must not outrun the verifier (the
      // files of a step still being hashed are pinned, so retention could
      // not recycle them into the next save).
      cv_.Wait();
      continue;
    }
    const std::string dir = layout_.PartialDir(ns, step);
    if (busy_paths_.count(dir) != 0) {  // a dropped instance's dir is still moving aside
      cv_.Wait();
      continue;
    }
    auto state = std::make_unique<StepState>();
    state->instance = next_id_++;
    state->files = std::make_shared<StepFiles>();
    state->files->ns = std::string(ns);
    state->files->dir = dir;
    state->begun = std::chrono::steady_clock::now();
    state->owner = std::string(writer);
    state->dir_ready = false;
    if (conn != 0) state->writers.insert(conn);
    const uint64_t instance = state->instance;
    std::shared_ptr<StepFiles> files = state->files;
    index_.Insert(ns, step, std::move(state));
    // The dir is made outside mu_, its path reserved: a drop of this
    // instance meanwhile leaves the dir to us, and a next instance waits.
    busy_paths_.insert(dir);
    mu_.Unlock();
    Result<UniqueFd> made = files_.MakeStepDir(dir);
    mu_.Lock();
    cv_.SignalAll();
    StepState* s = index_.FindInstance(ns, step, instance);
    if (s != nullptr && made.ok()) {
      files->dir_fd = std::move(made).value();
      s->dir_ready = true;
      busy_paths_.erase(dir);
      return s;
    }
    if (s != nullptr) {  // nothing was made: the step goes
      bool ns_emptied = false;
      index_.Remove(ns, step, &ns_emptied);
      if (ns_emptied) io_.namespace_rmdirs.push_back(layout_.NamespaceDir(ns));
      busy_paths_.erase(dir);
      return made.status().WithContext("beginning step " + label + " in the memory tier");
    }
    // Dropped (aborted, its writers gone) while its dir was made: the dir
    // goes, its path reserved until then.
    io_.remove_trees.push_back(dir);
    io_.release_paths.push_back(dir);
    return Aborted("step " + label + " was dropped while its directory was being made; begin it again");
  }
}

bool MemoryTier::HashesPendingLocked(std::string_view ns) const {
  auto it = index_.namespaces().find(ns);
  if (it == index_.namespaces().end()) return false;
  for (const auto& [step, s] : it->second.steps) {
    if (s->committed && s->manifest.checksums_pending) return true;
  }
  return false;
}

Status MemoryTier::BeginStep(std::string_view ns, uint64_t step, uint64_t conn, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TierLock lock(this);
  return BeginLocked(ns, step, conn, writer).status();
}

MemoryTier::Creation MemoryTier::ReserveObjectLocked(StepState* s, const std::string& name, uint64_t size,
                                                     bool sealed, const std::string& checksum) {
  Creation c;
  c.files = s->files;
  c.dir = s->files->dir;
  c.instance = s->instance;
  c.id = next_id_++;
  c.size = size;
  if (size > 0 && PoolFitLocked(size)) {  // out of the pool's index; this object's last segment first
    c.segment = pool_.Reserve(size, SegmentAffinity(s->files->ns, name));
  }
  s->files->creating.fetch_add(1);                                       // down in MakeObjectFile
  object_bytes_ += size;
  // In the index meanwhile, its bytes counted: a commit waits for it (it is
  // unsealed), and a drop or a second create of the name settles its bytes
  // as for any object.
  ObjectState o;
  o.id = c.id;
  o.size = size;
  if (sealed) {
    o.sealed = true;
    o.check = CheckState::kOk;
    o.actual = checksum;
  }
  s->objects[name] = std::move(o);
  return c;
}

Result<UniqueFd> MemoryTier::MakeObjectFile(const Creation& c, const std::string& name,
                                            uint64_t* seg_size_now) const {
  // dir_fd was set before the step's dir_ready, seen under mu_, and never changes.
  const int dir_fd = c.files->dir_fd.get();
  Result<UniqueFd> made = c.segment ? files_.PlaceSegment(c.segment->path, c.segment->size, dir_fd, c.dir,
                                                          name, c.size, seg_size_now)
                                    : files_.CreateObjectFile(dir_fd, c.dir, name, c.size);
  if (c.files->creating.fetch_sub(1) == 1) c.files->creating.notify_all();  // a drop's recycling may wait
  return made;
}

void MemoryTier::UndoObjectLocked(std::string_view ns, uint64_t step, const std::string& name,
                                  const Creation& c, uint64_t seg_size_now, bool file_made) {
  if (c.segment && !file_made) pool_.Return(*c.segment, seg_size_now);  // still at its seg_<n> path
  StepState* s = index_.FindInstance(ns, step, c.instance);
  if (s == nullptr) return;  // dropped: the drop settled its bytes and files
  auto obj = s->objects.find(name);
  if (obj == s->objects.end() || obj->second.id != c.id) return;  // created again: likewise
  s->objects.erase(obj);
  if (file_made) {
    RecycleObjectLocked(*s->files, name, c.size, /*writer_done=*/true);  // never handed out
  } else {
    object_bytes_ -= std::min(object_bytes_, c.size);
  }
}

Result<CreatedObject> MemoryTier::CreateObject(std::string_view ns, uint64_t step, std::string_view name,
                                               uint64_t size, uint64_t conn, std::string_view writer) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  const std::string label = StepLabel(ns, step);
  const std::string what = label + "/" + std::string(name);
  if (size > options_.budget_bytes) {
    return ResourceExhausted(
        "object " + what + " is " + std::to_string(size) + " bytes, larger than the whole memory budget (" +
        std::to_string(options_.budget_bytes) + " bytes); raise --memory-budget or split the object");
  }
  const std::string key(name);
  TierLock lock(this);
  TC_ASSIGN_OR_RETURN(StepState * s, BeginLocked(ns, step, conn, writer));
  // An unsealed (or failed) object of the same name goes, a sealed one stays.
  if (auto it = s->objects.find(key); it != s->objects.end()) {
    const ObjectState& old = it->second;
    if (old.sealed && old.check != CheckState::kMismatch && old.check != CheckState::kError) {
      return AlreadyExists("object " + what +
                           " is already sealed; objects are write-once: use another name, or abort "
                           "the step and write it again");
    }
    // Unsealed, and its creator's connection still open: it may be writing
    // the file right now. Replacing it would leave that writer filling a
    // file no longer in the step, then told its seal worked or not by
    // chance (two processes saving as one writer, e.g. two launches without
    // launcher variables). A connection's own retry replaces it.
    if (!old.sealed && old.conn != 0 && old.conn != conn && s->writers.count(old.conn) != 0) {
      const std::string owner =
          s->owner.empty() ? std::string("the anonymous writer") : "writer " + QuoteForMessage(s->owner);
      return AlreadyExists("object " + what + " is being written by another connection of the same writer (" +
                           owner +
                           "); two processes are saving the same object of one step. Give each job its own "
                           "namespace, or set the launcher's RANK and WORLD_SIZE so ranks differ");
    }
    RecycleObjectLocked(*s->files, key, old.size, old.sealed);
    s->objects.erase(it);
  }
  TC_RETURN_IF_ERROR(CheckNameConflict(s->objects, key, label));
  const uint64_t instance = s->instance;
  TC_RETURN_IF_ERROR(EnsureSpaceLocked(size, what));
  s = index_.FindInstance(ns, step, instance);
  if (s == nullptr || s->committing || s->objects.count(key) != 0) {
    return Aborted("step " + label + " was dropped, committed or given another object " +
                   QuoteForMessage(key) + " while room was made for this one; create it again");
  }
  const Creation c = ReserveObjectLocked(s, key, size, /*sealed=*/false, "");
  s->objects[key].conn = conn;
  // Unlocking runs what was queued above first (segments released, an
  // evicted step's files, the old file of this name), then the file is made
  // in the step's dir: one create (or one rename of a segment), no second
  // trip into mu_ unless it fails.
  lock.Unlock();
  uint64_t seg_size_now = 0;
  Result<UniqueFd> made = MakeObjectFile(c, key, &seg_size_now);
  Status st = made.status().WithContext("creating object " + what);
  // Reserving a large object's pages takes as long as their allocation;
  // other ranks create their objects meanwhile.
  if (made.ok()) st = files_.ReserveFile(made->get(), size, what).status();
  if (!st.ok()) {
    lock.Lock();
    UndoObjectLocked(ns, step, key, c, seg_size_now, made.ok());
    return st;
  }
  return CreatedObject{std::move(made).value(), Layout::ObjectPath(c.dir, key)};
}

}  // namespace tierckpt::agent
