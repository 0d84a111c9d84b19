// parity_holder.cc — see parity_holder.h.
#include "replication/parity_holder.h"

#include <fcntl.h>

#include <algorithm>

#include "common/log.h"
#include "common/names.h"
#include "os/beneath.h"
#include "os/files.h"
#include "tier/budget.h"
#include "tier/layout.h"

namespace tierckpt::agent {

namespace {

std::string IdentityOf(std::vector<std::string> lines) {
  std::sort(lines.begin(), lines.end());
  std::string out;
  for (const std::string& l : lines) out += l;
  return out;
}

std::string IdentityLine(const std::string& name, uint64_t size, const std::string& checksum) {
  return name + '\0' + std::to_string(size) + '\0' + checksum + '\n';
}

}  // namespace

std::string ParityPartIdentity(const Manifest& part) {
  std::vector<std::string> lines;
  for (const ObjectEntry& o : part.objects) lines.push_back(IdentityLine(o.name, o.size, o.checksum));
  return IdentityOf(std::move(lines));
}

std::string ParityPartIdentity(const ec::DataPiece& piece) {
  std::vector<std::string> lines;
  for (const ec::PieceObject& o : piece.objects) lines.push_back(IdentityLine(o.name, o.size, o.checksum));
  return IdentityOf(std::move(lines));
}
namespace {

constexpr std::string_view kRecordName = "record.json";

std::string GroupLabel(std::string_view ns, uint64_t step, uint32_t group) {
  return "parity group " + std::to_string(group) + " of " + std::string(ns) + " step " + std::to_string(step);
}

// Whether dir_fd's entry `name` is a directory (reached without following a
// link) that holds nothing; a failure to open or list it counts as not.
bool IsEmptyDirAt(int dir_fd, const std::string& name, const std::string& path) {
  Result<std::optional<UniqueFd>> fd = OpenExistingLayoutDir(dir_fd, name, path, "a parity directory");
  if (!fd.ok() || !fd->has_value()) return false;
  Result<std::vector<DirEntry>> entries = ListDirAt((*fd)->get(), path);
  return entries.ok() && entries->empty();
}

std::string GroupDirName(uint32_t group) { return "group_" + std::to_string(group); }
constexpr std::string_view kPiecePrefix = "parity_";
std::string PieceName(uint32_t j) { return std::string(kPiecePrefix) + std::to_string(j); }

// Writes `bytes` as `name` in dir_fd through "<name>.tmp" (a fold of a
// group runs one at a time, so the name is the group's own).
Status WriteInDir(int dir_fd, const std::string& dir, const std::string& name, std::string_view bytes) {
  return WriteFileViaAt(dir_fd, name + ".tmp", name, 0600, /*sync_data=*/false, /*exclusive=*/false, dir,
                        [&](int fd) { return PwriteAll(fd, bytes.data(), bytes.size(), 0, JoinPath(dir, name)); });
}

uint32_t HeldCount(const ParityFoldTarget& t) {
  return t.held.empty() ? t.m : static_cast<uint32_t>(t.held.size());
}

bool SameGroup(const ParityFoldTarget& a, const ParityFoldTarget& b) {
  return a.k == b.k && a.m == b.m && a.members == b.members && a.held == b.held;
}

}  // namespace

ParityHolder::ParityHolder(ParityHolderOptions options)
    : options_(std::move(options)),
      files_(options_.pool_dir.empty() ? JoinPath(DirName(options_.root), std::string(kParityPoolDirName))
                                       : options_.pool_dir) {}

std::string ParityHolder::GroupDir(std::string_view ns, uint64_t step, uint32_t group) const {
  return JoinPath(options_.root, GroupRel(ns, step, group));
}

std::string ParityHolder::GroupRel(std::string_view ns, uint64_t step, uint32_t group) {
  return std::string(ns) + "/" + StepDirName(step) + "/" + GroupDirName(group);
}

std::string ParityHolder::PiecePath(std::string_view ns, uint64_t step, uint32_t group, uint32_t j) const {
  return JoinPath(GroupDir(ns, step, group), PieceName(j));
}

Result<std::optional<UniqueFd>> ParityHolder::OpenRoot(bool create) const {
  // The agent root is the user's choice (its path is followed as given);
  // below it nothing is (layout.h).
  const std::string agent_root = DirName(options_.root);
  const std::string name = BaseName(options_.root);
  TC_ASSIGN_OR_RETURN(UniqueFd parent, OpenDirNoFollow(agent_root));
  if (!create) return OpenExistingLayoutDir(parent.get(), name, options_.root, "the parity directory");
  TC_ASSIGN_OR_RETURN(UniqueFd root, OpenLayoutDir(parent.get(), name, options_.root));
  return std::optional<UniqueFd>(std::move(root));
}

ParityFoldState ParityHolder::StateOf(const Group& g) {
  ParityFoldState s;
  for (const std::string& m : g.by_index) s.folded += m.empty() ? 0 : 1;
  s.members = static_cast<uint32_t>(g.by_index.size());
  s.sealed = g.sealed;
  return s;
}

Status ParityHolder::ReserveLocked(Group& g, uint64_t bytes, std::string_view what) {
  if (bytes > g.reserved) {
    const uint64_t need = used_ - g.reserved + bytes;  // held pieces, this group at its new size
    // The pool's recycled files count too, and make room first.
    if (const uint64_t pool = files_.pool_bytes(); need + pool > options_.budget_bytes) {
      files_.Release(need + pool - options_.budget_bytes);
    }
    if (need + files_.pool_bytes() > options_.budget_bytes) {
      return ResourceExhausted(std::string(what) + " needs " + FormatBytes(bytes) +
                               " of parity in memory, and the memory budget " + FormatBytes(options_.budget_bytes) +
                               " has " + FormatBytes(options_.budget_bytes - used_) +
                               " left for parity; delete old steps, lower retention or raise --memory-budget");
    }
  }
  used_ = used_ - g.reserved + bytes;
  g.reserved = bytes;
  return Status::Ok();
}

Result<ParityFoldState> ParityHolder::Fold(const ParityFoldTarget& t, const Manifest& part,
                                           ec::ObjectSource& source, ec::FoldTimings* timings) {
  TC_RETURN_IF_ERROR(ValidateNamespace(t.ns));
  TC_RETURN_IF_ERROR(ValidateStep(t.step));
  const std::string what = GroupLabel(t.ns, t.step, t.group) + " (data piece " + std::to_string(t.index) +
                           " from node " + part.node + ")";
  if (t.members == 0 || t.members > t.k || t.index >= t.members) {
    return InvalidArgument(what + ": data index " + std::to_string(t.index) + " outside a group of " +
                           std::to_string(t.members) + " members under rs:" + std::to_string(t.k) + "+" +
                           std::to_string(t.m));
  }
  const Key key{t.ns, t.step, t.group};
  std::shared_ptr<Group> g;
  {
    MutexLock lock(&mu_);
    std::shared_ptr<Group>& slot = groups_[key];
    if (slot == nullptr) {
      ec::ParityAccumulatorConfig c;
      c.ns = t.ns;
      c.step = t.step;
      c.group = t.group;
      c.k = t.k;
      c.m = t.m;
      c.members = t.members;
      c.held = t.held;
      c.chunk_bytes = options_.chunk_bytes;
      c.memory = [this](uint32_t) -> Result<std::unique_ptr<ec::PieceMemory>> { return files_.Make(); };
      Result<ec::ParityAccumulator> acc = ec::ParityAccumulator::Create(std::move(c));
      if (!acc.ok()) {
        groups_.erase(key);
        return acc.status().WithContext(what);
      }
      auto made = std::make_shared<Group>(t);
      MutexLock fold(&made->fold_mu);
      made->acc = std::make_shared<ec::ParityAccumulator>(std::move(*acc));
      made->by_index.assign(t.members, "");
      made->part_of.assign(t.members, "");
      slot = std::move(made);
    } else if (!SameGroup(slot->target, t)) {
      return InvalidArgument(what + ": the group was begun as rs:" + std::to_string(slot->target.k) + "+" +
                             std::to_string(slot->target.m) + " with " + std::to_string(slot->target.members) +
                             " members and " + std::to_string(HeldCount(slot->target)) +
                             " pieces held here, not as this request says; check that every agent has the "
                             "same --redundancy and peer list");
    }
    g = slot;
    const std::string& had = g->by_index[t.index];
    if (had == part.node) {
      if (g->part_of[t.index] == ParityPartIdentity(part)) return StateOf(*g);  // a retry: folded already
      return FailedPrecondition(what + ": data piece " + std::to_string(t.index) + " holds another version of "
                                "node " + had + "'s part (other objects or checksums: the step was committed "
                                "again while this holder kept the old parity); delete the step on the group's "
                                "members (tierckpt rm, which drops its parity) and save it again");
    }
    if (!had.empty()) {
      return AlreadyExists(what + ": data piece " + std::to_string(t.index) + " was folded from node " + had);
    }
    if (g->sealed) return FailedPrecondition(what + ": the group is sealed");
    TC_RETURN_IF_ERROR(ReserveLocked(*g, std::max<uint64_t>(g->reserved, part.TotalBytes() * HeldCount(t)), what));
    ++g->folding;  // from here every path ends in the last block, which counts it out
  }

  // The fold itself, beside the group's other folds (the accumulator
  // serialises only each chunk's update): no lock of this holder is held
  // while the part streams in.
  std::shared_ptr<ec::ParityAccumulator> acc;
  {
    MutexLock fold(&g->fold_mu);
    acc = g->acc;
  }
  const Status folded = acc != nullptr ? acc->Fold(t.index, part, source, timings)
                                       : FailedPrecondition(what + ": the group is sealed or was dropped");
  const bool broken = acc != nullptr && acc->broken();
  if (folded.ok()) {
    MutexLock lock(&mu_);
    if (!g->dropped) {
      g->by_index[t.index] = part.node;
      g->part_of[t.index] = ParityPartIdentity(part);
    }
  }

  // Sealing, by whichever fold finds the group complete first (under
  // fold_mu, so once: it resets the accumulator, and a fold completing at
  // the same time then finds it gone and the group sealed).
  Status wrote = Status::Ok();
  bool sealed_now = false;
  const auto seal_start = std::chrono::steady_clock::now();
  if (folded.ok()) {
    MutexLock fold(&g->fold_mu);
    if (g->acc != nullptr && g->acc->Complete()) {
      bool dropped = false;
      {
        MutexLock lock(&mu_);
        dropped = g->dropped;
      }
      Result<ec::ParityRecord> record = g->acc->Seal();
      wrote = dropped ? Aborted(what + ": the step was deleted while its parity was folded")
              : record.ok() ? WriteSealed(*g, *record)
                            : record.status();
      g->acc.reset();  // the pieces are in their files now (or lost with the group)
      sealed_now = wrote.ok();
      MutexLock lock(&mu_);
      if (sealed_now) g->sealed = true;  // before fold_mu is let go: a fold after it sees the group sealed
    }
  }

  MutexLock lock(&mu_);
  --g->folding;
  sealed_cv_.SignalAll();
  if (!folded.ok() && broken) {
    ForgetLocked(*g, key);
  } else if (g->folding == 0 && !g->dropped && !g->sealed && acc != nullptr) {
    // With no fold in flight the pieces are as long as the longest part
    // folded: what a refused longer part reserved is given back (it
    // shrinks: never refused).
    ReserveLocked(*g, acc->length() * HeldCount(t), what).IgnoreError();
  }
  if (!folded.ok()) return folded.WithContext(what);
  if (!wrote.ok()) {
    ForgetLocked(*g, key);
    return wrote.WithContext(what + ": writing the sealed parity");
  }
  if (sealed_now) {
    Log(LogLevel::kInfo, "parity_sealed")
        .Kv("ns", t.ns)
        .Kv("step", t.step)
        .Kv("group", t.group)
        .Kv("bytes", g->reserved)
        // From this fold's end: the group's mutex, the pieces' checksums,
        // their files and the record.
        .Kv("ms", std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - seal_start).count());
  }
  return StateOf(*g);
}

void ParityHolder::ForgetLocked(Group& g, const Key& key) {
  if (g.dropped) return;  // dropped already (its entry may be another group's now)
  g.dropped = true;
  used_ -= g.reserved;
  g.reserved = 0;
  groups_.erase(key);
}

Status ParityHolder::WriteSealed(Group& g, const ec::ParityRecord& record) {
  const ParityFoldTarget& t = g.target;
  // <root>/<ns>/step_N/group_g, each made or opened without following a
  // link (a link in place of one is removed as a link, layout.h).
  const std::string ns_dir = JoinPath(options_.root, t.ns);
  const std::string step_dir = JoinPath(ns_dir, StepDirName(t.step));
  const std::string dir = GroupDir(t.ns, t.step, t.group);
  UniqueFd group_fd;
  {
    MutexLock dirs(&dirs_mu_);
    Result<std::optional<UniqueFd>> root = OpenRoot(/*create=*/true);
    if (!root.ok()) return root.status();
    if (!root->has_value()) return Internal("the parity root " + options_.root + " was not made");
    TC_ASSIGN_OR_RETURN(UniqueFd ns_fd, OpenLayoutDir((*root)->get(), t.ns, ns_dir));
    TC_ASSIGN_OR_RETURN(UniqueFd step_fd, OpenLayoutDir(ns_fd.get(), StepDirName(t.step), step_dir));
    // A group folded again after a failed write starts from nothing.
    TC_RETURN_IF_ERROR(RemoveTreeAt(step_fd.get(), GroupDirName(t.group), dir));
    TC_ASSIGN_OR_RETURN(group_fd, MakeDirAt(step_fd.get(), GroupDirName(t.group), 0700, dir));
  }
  for (const ec::ParityPiece& p : record.parity) {
    // The piece's pool file, renamed here (decision 163).
    TC_RETURN_IF_ERROR(
        g.acc->Publish(p.index, group_fd.get(), PieceName(p.index), JoinPath(dir, PieceName(p.index))));
  }
  // The record last: it exists only beside every piece it describes.
  return WriteInDir(group_fd.get(), dir, std::string(kRecordName), record.ToJson());
}

ParityFoldState ParityHolder::WaitSealed(std::string_view ns, uint64_t step, uint32_t group,
                                         std::chrono::steady_clock::time_point deadline) {
  MutexLock lock(&mu_);
  const Key key{std::string(ns), step, group};
  for (;;) {
    auto it = groups_.find(key);
    if (it == groups_.end()) return {};
    if (it->second->sealed || std::chrono::steady_clock::now() >= deadline) return StateOf(*it->second);
    sealed_cv_.WaitUntil(deadline);
  }
}

Result<ec::ParityRecord> ParityHolder::Record(std::string_view ns, uint64_t step, uint32_t group) const {
  {
    MutexLock lock(&mu_);
    auto it = groups_.find(Key{std::string(ns), step, group});
    if (it == groups_.end() || !it->second->sealed) {
      return NotFound(GroupLabel(ns, step, group) + " is not sealed on this node");
    }
  }
  const std::string path = JoinPath(GroupDir(ns, step, group), kRecordName);
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> root, OpenRoot(/*create=*/false));
  if (!root.has_value()) return NotFound(path + " is missing");
  const std::string rel = GroupRel(ns, step, group) + "/" + std::string(kRecordName);
  TC_ASSIGN_OR_RETURN(std::string json, ReadFileBeneath(root->get(), rel, ec::kMaxParityRecordBytes, path));
  return ec::ParityRecord::Parse(json, path);
}

Result<ParityHolder::HeldPiece> ParityHolder::ReadPiece(std::string_view ns, uint64_t step, uint32_t group,
                                                        uint32_t j) const {
  TC_ASSIGN_OR_RETURN(ec::ParityRecord record, Record(ns, step, group));
  const ec::ParityPiece* piece = record.FindParity(j);
  if (piece == nullptr) {
    return NotFound(GroupLabel(ns, step, group) + ": this node holds no parity piece " + std::to_string(j) +
                    " of it");
  }
  const std::string path = PiecePath(ns, step, group, j);
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> root, OpenRoot(/*create=*/false));
  if (!root.has_value()) return NotFound(path + " is missing");
  const std::string rel = GroupRel(ns, step, group) + "/" + PieceName(j);
  TC_ASSIGN_OR_RETURN(std::string bytes,
                      ReadFileBeneath(root->get(), rel, static_cast<size_t>(piece->length), path));
  if (bytes.size() != piece->length) {
    return Corruption(path + " is " + std::to_string(bytes.size()) + " bytes where its record says " +
                      std::to_string(piece->length));
  }
  return HeldPiece{std::move(bytes), piece->checksum};
}

Result<bool> ParityHolder::Drop(std::string_view ns, uint64_t step) { return DropWhere(ns, step, std::nullopt); }

Result<bool> ParityHolder::DropGroup(std::string_view ns, uint64_t step, uint32_t group) {
  return DropWhere(ns, step, group);
}

Result<bool> ParityHolder::DropWhere(std::string_view ns, uint64_t step, std::optional<uint32_t> group) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateStep(step));
  std::vector<std::shared_ptr<Group>> gone;
  {
    MutexLock lock(&mu_);
    auto it = groups_.lower_bound(Key{std::string(ns), step, group.value_or(0)});
    while (it != groups_.end() && std::get<0>(it->first) == ns && std::get<1>(it->first) == step &&
           (!group.has_value() || std::get<2>(it->first) == *group)) {
      it->second->dropped = true;
      used_ -= it->second->reserved;
      it->second->reserved = 0;
      gone.push_back(it->second);
      it = groups_.erase(it);
    }
    sealed_cv_.SignalAll();
  }
  {
    // A fold in flight of those groups ends first; it writes nothing
    // (dropped) and its accumulator goes with it.
    MutexLock lock(&mu_);
    for (const std::shared_ptr<Group>& g : gone) {
      while (g->folding > 0) sealed_cv_.Wait();
    }
  }
  for (const std::shared_ptr<Group>& g : gone) {
    MutexLock fold(&g->fold_mu);
    g->acc.reset();
  }
  // The files, reached without following a link (one in place of a
  // directory is removed as a link).
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> root, OpenRoot(/*create=*/false));
  if (!root.has_value()) return !gone.empty();
  const std::string ns_dir = JoinPath(options_.root, ns);
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> ns_fd,
                      OpenExistingLayoutDir(root->get(), std::string(ns), ns_dir, "a namespace's parity directory"));
  if (!ns_fd.has_value()) return !gone.empty();
  const std::string step_dir = JoinPath(ns_dir, StepDirName(step));
  {
    // The held pieces go back to the pool (decision 163), the rest below.
    TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> step_fd,
                        OpenExistingLayoutDir(ns_fd->get(), StepDirName(step), step_dir, "a step's parity directory"));
    if (step_fd.has_value()) {
      for (const std::shared_ptr<Group>& g : gone) {
        const uint32_t gi = g->target.group;
        RecyclePieces(step_fd->get(), GroupDirName(gi), GroupDir(ns, step, gi));
      }
      if (group.has_value()) {
        TC_RETURN_IF_ERROR(RemoveTreeAt(step_fd->get(), GroupDirName(*group), GroupDir(ns, step, *group)));
      }
    } else if (group.has_value()) {
      return !gone.empty();
    }
  }
  // The step's directory once it holds no group, and the namespace's once it
  // holds no step: a drop leaves the tree a restart would (decision 131).
  MutexLock dirs(&dirs_mu_);
  if (!group.has_value() || IsEmptyDirAt(ns_fd->get(), StepDirName(step), step_dir)) {
    TC_RETURN_IF_ERROR(RemoveTreeAt(ns_fd->get(), StepDirName(step), step_dir));
  }
  if (IsEmptyDirAt(root->get(), std::string(ns), ns_dir)) {
    TC_RETURN_IF_ERROR(RemoveTreeAt(root->get(), std::string(ns), ns_dir));
  }
  return !gone.empty();
}

void ParityHolder::RecyclePieces(int step_fd, const std::string& group, const std::string& path) {
  Result<std::optional<UniqueFd>> group_fd = OpenExistingLayoutDir(step_fd, group, path, "a parity group's directory");
  if (!group_fd.ok() || !group_fd->has_value()) return;  // nothing to recycle; the caller removes what is there
  Result<std::vector<DirEntry>> entries = ListDirAt((*group_fd)->get(), path);
  if (!entries.ok()) return;
  for (const DirEntry& e : *entries) {
    if (e.type != EntryType::kRegular || e.name.rfind(kPiecePrefix, 0) != 0) continue;
    // A failure costs only the reuse: the file is removed with the group.
    (void)files_.Recycle((*group_fd)->get(), e.name, JoinPath(path, e.name));
  }
}

uint64_t ParityHolder::used_bytes() const {
  MutexLock lock(&mu_);
  return used_;
}

}  // namespace tierckpt::agent
