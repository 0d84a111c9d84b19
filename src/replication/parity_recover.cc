// parity_recover.cc — ParityHolder::Recover (parity_holder.h, decision 132):
// the walk of <root>/parity at agent start, which holds again what checks out
// and removes the rest.
#include <fcntl.h>

#include <set>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "replication/parity_holder.h"
#include "tier/layout.h"

namespace tierckpt::agent {
namespace {

constexpr std::string_view kRecordFile = "record.json";
constexpr size_t kHashChunk = size_t{1} << 20;

// "group_<g>" with g in decimal, no leading zero, within uint32.
bool ParseGroupDirName(std::string_view name, uint32_t* group) {
  constexpr std::string_view kPrefix = "group_";
  if (name.substr(0, kPrefix.size()) != kPrefix) return false;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.empty() || digits.size() > 10 || (digits.size() > 1 && digits[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return false;
  *group = static_cast<uint32_t>(v);
  return true;
}

Status KeepFirst(Status first, Status next) { return first.ok() ? next : first; }

// Removes the entry e of dir_fd (at path), which is not what the layout
// expects there (`expected`) for the reason why; reports and logs it. A link
// is removed as a link (RemovePlantedEntry). Returns the removal's failure.
Status Discard(int dir_fd, const DirEntry& e, const std::string& path, std::string_view expected,
               const std::string& why, ParityRecoveryReport* report) {
  if (e.type == EntryType::kSymlink) {
    report->removed.push_back(RemovePlantedEntry(dir_fd, e.name, path, expected));
    return Status::Ok();
  }
  Status removed = RemoveTreeAt(dir_fd, e.name, path);
  const std::string action = removed.ok() ? "removed it" : "could not remove it: " + removed.ToString();
  report->removed.push_back(FailedPrecondition(path + ": " + why + "; " + action));
  Log(LogLevel::kWarn, "parity_recovery").Kv("path", path).Kv("found", why).Kv("action", action);
  return removed;
}

// Whether the directory holds nothing (a failure to list counts as not).
bool IsEmptyDir(int dir_fd, const std::string& path) {
  Result<std::vector<DirEntry>> entries = ListDirAt(dir_fd, path);
  return entries.ok() && entries->empty();
}

// The XXH3 of the regular file name inside dir_fd, read a chunk at a time.
Result<std::string> HashFileAt(int dir_fd, const std::string& name, uint64_t length, const std::string& path) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(dir_fd, name, O_RDONLY | O_NONBLOCK, path));
  Hasher hasher;
  std::string buffer(static_cast<size_t>(std::min<uint64_t>(length, kHashChunk)), '\0');
  for (uint64_t at = 0; at < length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(length - at, buffer.size()));
    TC_RETURN_IF_ERROR(PreadExact(fd.get(), buffer.data(), n, at, path));
    hasher.Update(buffer.data(), n);
    at += n;
  }
  return hasher.Finish().ToString();
}

}  // namespace

Result<ParityRecoveryReport> ParityHolder::Recover() {
  ParityRecoveryReport report;
  // The pool first, so that its files count against the budget from the
  // first fold (decision 163). A pool that does not load refuses each fold
  // with its reason; the sealed groups are still held.
  if (Status pool = files_.Load(); !pool.ok()) {
    Log(LogLevel::kWarn, "parity_pool_unusable").Kv("dir", files_.dir()).Kv("error", pool.ToString());
  }
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> root, OpenRoot(/*create=*/false));
  if (!root.has_value()) return report;
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(root->get(), options_.root));
  Status first = Status::Ok();
  for (const DirEntry& e : entries) {
    const std::string path = JoinPath(options_.root, e.name);
    if (e.type != EntryType::kDirectory || !ValidateNamespace(e.name).ok()) {
      first = KeepFirst(first, Discard(root->get(), e, path, "a namespace's parity directory",
                                       "not a namespace's parity directory", &report));
      continue;
    }
    first = KeepFirst(first, RecoverNamespace(root->get(), e.name, &report));
  }
  Log(report.removed.empty() ? LogLevel::kInfo : LogLevel::kWarn, "parity_recovered")
      .Kv("groups", report.groups)
      .Kv("bytes", report.bytes)
      .Kv("removed", static_cast<uint64_t>(report.removed.size()));
  if (!first.ok()) return first.WithContext("re-indexing the parity under " + options_.root);
  return report;
}

Status ParityHolder::RecoverNamespace(int root_fd, const std::string& ns, ParityRecoveryReport* report) {
  const std::string dir = JoinPath(options_.root, ns);
  TC_ASSIGN_OR_RETURN(UniqueFd ns_fd, OpenDirAt(root_fd, ns, dir));
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(ns_fd.get(), dir));
  Status first = Status::Ok();
  for (const DirEntry& e : entries) {
    const std::string path = JoinPath(dir, e.name);
    uint64_t step = 0;
    if (e.type != EntryType::kDirectory || !ParseStepDirName(e.name, &step) || !ValidateStep(step).ok()) {
      first = KeepFirst(first, Discard(ns_fd.get(), e, path, "a step's parity directory",
                                       "not a step's parity directory", report));
      continue;
    }
    first = KeepFirst(first, RecoverStep(ns_fd.get(), ns, step, report));
  }
  if (first.ok() && IsEmptyDir(ns_fd.get(), dir)) first = RemoveTreeAt(root_fd, ns, dir);
  return first;
}

Status ParityHolder::RecoverStep(int ns_fd, const std::string& ns, uint64_t step, ParityRecoveryReport* report) {
  const std::string dir = JoinPath(JoinPath(options_.root, ns), StepDirName(step));
  TC_ASSIGN_OR_RETURN(UniqueFd step_fd, OpenDirAt(ns_fd, StepDirName(step), dir));
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(step_fd.get(), dir));
  Status first = Status::Ok();
  for (const DirEntry& e : entries) {
    const std::string path = JoinPath(dir, e.name);
    uint32_t group = 0;
    if (e.type != EntryType::kDirectory || !ParseGroupDirName(e.name, &group)) {
      first = KeepFirst(first, Discard(step_fd.get(), e, path, "a parity group's directory",
                                       "not a parity group's directory", report));
      continue;
    }
    Result<UniqueFd> group_fd = OpenDirAt(step_fd.get(), e.name, path);
    Result<ec::ParityRecord> record =
        group_fd.ok() ? CheckGroup(group_fd->get(), ns, step, group) : Result<ec::ParityRecord>(group_fd.status());
    if (!record.ok()) {
      first = KeepFirst(first, Discard(step_fd.get(), e, path, "a parity group's directory",
                                       "a parity group not kept (" + record.status().ToString() + ")", report));
      continue;
    }
    // What the record does not describe (a leftover .tmp, a stray file) goes.
    std::set<std::string> known{std::string(kRecordFile)};
    for (const ec::ParityPiece& p : record->parity) known.insert("parity_" + std::to_string(p.index));
    Result<std::vector<DirEntry>> files = ListDirAt(group_fd->get(), path);
    if (!files.ok()) return files.status();
    for (const DirEntry& f : *files) {
      if (known.count(f.name) == 0) {
        first = KeepFirst(first, Discard(group_fd->get(), f, JoinPath(path, f.name), "a parity piece",
                                         "not a file of the group's record", report));
      }
    }
    AdoptSealed(*record);
    report->groups += 1;
    report->bytes += record->PieceLength() * record->parity.size();
  }
  if (first.ok() && IsEmptyDir(step_fd.get(), dir)) first = RemoveTreeAt(ns_fd, StepDirName(step), dir);
  return first;
}

Result<ec::ParityRecord> ParityHolder::CheckGroup(int group_fd, const std::string& ns, uint64_t step,
                                                  uint32_t group) const {
  const std::string dir = GroupDir(ns, step, group);
  const std::string path = JoinPath(dir, kRecordFile);
  TC_ASSIGN_OR_RETURN(DirEntry r, StatAt(group_fd, std::string(kRecordFile), path));
  if (r.type == EntryType::kMissing) {
    return FailedPrecondition("no record.json (a fold interrupted before its pieces were all written, or the file "
                              "removed behind the agent); the group's members must send their parts again");
  }
  TC_ASSIGN_OR_RETURN(std::string json, ReadFileBeneath(group_fd, kRecordFile, ec::kMaxParityRecordBytes, path));
  TC_ASSIGN_OR_RETURN(ec::ParityRecord record, ec::ParityRecord::Parse(json, path));
  if (record.ns != ns || record.step != step || record.group != group) {
    return Corruption(path + " describes group " + std::to_string(record.group) + " of " +
                      QuoteForMessage(record.ns) + " step " + std::to_string(record.step) + ", not its directory's");
  }
  for (const ec::ParityPiece& p : record.parity) {
    const std::string name = "parity_" + std::to_string(p.index);
    const std::string piece = JoinPath(dir, name);
    TC_ASSIGN_OR_RETURN(DirEntry e, StatAt(group_fd, name, piece));
    if (e.type != EntryType::kRegular) {
      return Corruption(piece + " is " + (e.type == EntryType::kMissing ? "missing" : "a " +
                        std::string(EntryTypeName(e.type))) + " where the record describes a piece");
    }
    if (e.size != p.length) {
      return Corruption(piece + " is " + std::to_string(e.size) + " bytes, the record says " +
                        std::to_string(p.length));
    }
    TC_ASSIGN_OR_RETURN(std::string checksum, HashFileAt(group_fd, name, p.length, piece));
    if (checksum != p.checksum) {
      return Corruption(piece + " has checksum " + checksum + ", the record says " + p.checksum);
    }
  }
  return record;
}

void ParityHolder::AdoptSealed(const ec::ParityRecord& record) {
  ParityFoldTarget t;
  t.ns = record.ns;
  t.step = record.step;
  t.group = record.group;
  t.k = record.k;
  t.m = record.m;
  t.members = static_cast<uint32_t>(record.data.size());
  for (const ec::ParityPiece& p : record.parity) t.held.push_back(p.index);
  auto g = std::make_shared<Group>(std::move(t));
  for (const ec::DataPiece& d : record.data) {
    g->by_index.push_back(d.member);
    g->part_of.push_back(ParityPartIdentity(d));
  }
  g->sealed = true;
  const uint64_t bytes = record.PieceLength() * record.parity.size();
  MutexLock lock(&mu_);
  g->reserved = bytes;
  used_ += bytes;
  groups_[Key{record.ns, record.step, record.group}] = std::move(g);
  if (used_ > options_.budget_bytes) {
    Log(LogLevel::kWarn, "parity_over_budget")
        .Kv("used", used_)
        .Kv("budget", options_.budget_bytes)
        .Kv("ns", record.ns)
        .Kv("step", record.step)
        .Kv("group", record.group);
  }
}

}  // namespace tierckpt::agent
