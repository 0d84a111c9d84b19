// TierRecovery: re-index the tmpfs root after a restart or a kill -9.
//
// The rule (docs/agent.md): partial and trash dirs are recycled; a committed
// step survives if its manifest parses, names this step, and every object
// file exists with its manifest size; checksums are verified lazily (by
// clients on read, by Verify, by restores), not here.
//
// The walk never follows a symbolic link (docs/agent.md, "Root directory
// safety"): every directory is opened from its parent's fd with
// O_NOFOLLOW | O_DIRECTORY and every entry typed with
// fstatat(AT_SYMLINK_NOFOLLOW), so a link planted as a namespace, a step, a
// .partial, the trash or the pool (or anywhere inside them) is logged and
// removed as a link, its target untouched, and recovery goes on. Paths built
// from the walk (for the pool's renames) only pass through directories just
// opened that way; only the agent's uid can write under its root.
#include "tier/tier_recovery.h"

#include <set>

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "os/tier_io.h"
#include "tier/tier_files.h"

namespace tierckpt::agent {
namespace {

// Removes every file under the open directory dir_fd whose path relative to
// it is not in keep: leftovers of a committed step (temporary files, and
// links, which are removed as links). Directories are entered without
// following links.
void RemoveLeftovers(int dir_fd, const std::string& dir, const std::string& prefix,
                     const std::set<std::string>& keep) {
  Result<std::vector<DirEntry>> entries = ListDirAt(dir_fd, dir);
  if (!entries.ok()) {
    Log(LogLevel::kWarn, "recovery").Kv("dir", dir).Err(entries.status());
    return;
  }
  for (const DirEntry& e : *entries) {
    const std::string rel = prefix.empty() ? e.name : prefix + "/" + e.name;
    const std::string path = JoinPath(dir, e.name);
    if (e.type == EntryType::kDirectory) {
      Result<UniqueFd> sub = OpenDirAt(dir_fd, e.name, path);
      if (sub.ok()) RemoveLeftovers(sub->get(), path, rel, keep);
      continue;
    }
    if (keep.count(rel) != 0 && e.type == EntryType::kRegular) continue;
    if (e.type == EntryType::kSymlink) {
      RemovePlantedEntry(dir_fd, e.name, path, "a file of a committed step").IgnoreError();
      continue;
    }
    Status s = RemoveTreeAt(dir_fd, e.name, path);
    if (s.ok()) {
      Log(LogLevel::kInfo, "recovery").Kv("removed", path).Kv("why", "leftover file in a committed step");
    } else {
      Log(LogLevel::kWarn, "recovery").Kv("path", path).Err(s);
    }
  }
}

}  // namespace

TierRecovery::TierRecovery(const Layout& layout, ReadMappings* mappings, uint64_t budget_bytes,
                           bool has_durable)
    : layout_(layout), mappings_(mappings), budget_bytes_(budget_bytes), has_durable_(has_durable) {}

Result<RecoveredTier> TierRecovery::Run(SegmentPool* pool) {
  pool_ = pool;
  found_ = RecoveredTier{StepIndex(has_durable_), 0, 1, RecoveryReport{}};
  RecoveryReport& report = found_.report;
  Result<UniqueFd> root = OpenDirNoFollow(layout_.root());
  if (!root.ok()) return root.status().WithContext("opening the memory tier's root to recover it");
  TC_RETURN_IF_ERROR(pool_->Load().WithContext("loading the segment pool"));
  const std::string trash_name(kTrashDirName);
  TC_ASSIGN_OR_RETURN(DirEntry trash, StatAt(root->get(), trash_name, layout_.TrashDir()));
  if (trash.type == EntryType::kDirectory) {
    RecycleTreeAt(root->get(), trash_name, layout_.TrashDir(), Pool::kNo);
  } else if (trash.type != EntryType::kMissing) {
    report.errors.push_back(
        RemovePlantedEntry(root->get(), trash_name, layout_.TrashDir(), "the trash directory"));
  }
  TC_ASSIGN_OR_RETURN(DirEntry ns_dir_entry,
                      StatAt(root->get(), std::string(kNamespacesDirName), layout_.NamespacesDir()));
  if (ns_dir_entry.type != EntryType::kMissing && ns_dir_entry.type != EntryType::kDirectory) {
    report.errors.push_back(RemovePlantedEntry(root->get(), std::string(kNamespacesDirName),
                                               layout_.NamespacesDir(), "the namespaces directory"));
  }
  TC_ASSIGN_OR_RETURN(UniqueFd ns_dir,
                      OpenLayoutDir(root->get(), std::string(kNamespacesDirName), layout_.NamespacesDir()));
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> names, ListDirAt(ns_dir.get(), layout_.NamespacesDir()));
  for (const DirEntry& n : names) {
    const std::string path = JoinPath(layout_.NamespacesDir(), n.name);
    if (n.type == EntryType::kSymlink) {
      report.errors.push_back(RemovePlantedEntry(ns_dir.get(), n.name, path, "a namespace directory"));
      continue;
    }
    if (!ValidateNamespace(n.name).ok() || n.type != EntryType::kDirectory) {
      Log(LogLevel::kWarn, "recovery")
          .Kv("entry", path)
          .Kv("why", n.type == EntryType::kDirectory ? "not a valid namespace name; left alone"
                                                     : "not a directory; left alone");
      continue;
    }
    RecoverNamespace(ns_dir.get(), n.name, &report);
  }
  return std::move(found_);
}

void TierRecovery::RecoverNamespace(int namespaces_fd, const std::string& ns, RecoveryReport* report) {
  const std::string dir = layout_.NamespaceDir(ns);
  Result<UniqueFd> ns_fd = OpenDirAt(namespaces_fd, ns, dir);
  Result<std::vector<DirEntry>> entries =
      ns_fd.ok() ? ListDirAt(ns_fd->get(), dir) : Result<std::vector<DirEntry>>(ns_fd.status());
  if (!entries.ok()) {
    report->errors.push_back(entries.status().WithContext("recovering namespace " + ns));
    return;
  }
  size_t partial = 0;
  for (const DirEntry& e : *entries) {
    const std::string path = JoinPath(dir, e.name);
    uint64_t step = 0;
    bool is_dir = e.type == EntryType::kDirectory;
    if (e.type == EntryType::kSymlink) {
      report->errors.push_back(RemovePlantedEntry(ns_fd->get(), e.name, path, "a step directory"));
    } else if (is_dir && e.name.size() > kPartialSuffix.size() && e.name.ends_with(kPartialSuffix) &&
               ParseStepDirName(e.name.substr(0, e.name.size() - kPartialSuffix.size()), &step)) {
      RecycleTreeAt(ns_fd->get(), e.name, path, Pool::kNo);
      ++partial;
      Log(LogLevel::kInfo, "recovery").Kv("ns", ns).Kv("step", step).Kv("dropped", "partial step");
    } else if (is_dir && ParseStepDirName(e.name, &step)) {
      RecoverStepDir(ns_fd->get(), ns, e.name, step, report);
    } else {
      Status s = RemoveTreeAt(ns_fd->get(), e.name, path);
      Log(LogLevel::kWarn, "recovery").Kv("removed", path).Kv("why", "leftover, not a step directory");
      if (!s.ok()) report->errors.push_back(s);
    }
  }
  report->partial_dropped += partial;
  auto it = found_.index.namespaces().find(ns);
  if (it == found_.index.namespaces().end()) {
    RemoveDirIfEmptyAt(namespaces_fd, ns, dir).IgnoreError();  // tidying only
    if (partial > 0)
      Log(LogLevel::kInfo, "recovered").Kv("ns", ns).Kv("steps", 0).Kv("partial_dropped", partial);
    return;
  }
  uint64_t bytes = 0;
  for (const auto& [step, s] : it->second.steps) bytes += s->Bytes();
  Log(LogLevel::kInfo, "recovered")
      .Kv("ns", ns)
      .Kv("steps", static_cast<uint64_t>(it->second.steps.size()))
      .Kv("newest", it->second.steps.rbegin()->first)
      .Kv("bytes", bytes)
      .Kv("partial_dropped", partial);
}

void TierRecovery::RecoverStepDir(int ns_fd, const std::string& ns, const std::string& entry, uint64_t step,
                                  RecoveryReport* report) {
  const std::string label = StepLabel(ns, step);
  const std::string dir = JoinPath(layout_.NamespaceDir(ns), entry);
  auto drop = [&](const Status& why) {
    Status err = why.WithContext("recovery dropped step " + label + " from the memory tier");
    Log(LogLevel::kError, "recovery").Kv("ns", ns).Kv("step", step).Kv("dir", dir).Err(err);
    report->errors.push_back(err);
    ++report->damaged_dropped;
    RecycleTreeAt(ns_fd, entry, dir, Pool::kYes);  // committed: its writers were done
  };
  Result<UniqueFd> step_fd = OpenDirAt(ns_fd, entry, dir);
  if (!step_fd.ok()) return drop(step_fd.status());
  const std::string manifest_path = Layout::ManifestPath(dir);
  Result<std::string> text = ReadFileBeneath(step_fd->get(), kManifestName, kMaxManifestBytes, manifest_path);
  if (!text.ok()) return drop(text.status());
  Result<Manifest> m = Manifest::Parse(*text, manifest_path);
  if (!m.ok()) return drop(m.status());
  if (m->ns != ns || m->step != step) {
    return drop(Corruption("its manifest " + manifest_path + " names step " + StepLabel(m->ns, m->step)));
  }
  std::set<std::string> known;
  for (const auto& e : m->objects) {
    std::string path = Layout::ObjectPath(dir, e.name);
    // Every directory on the way and the file itself are looked at without
    // following links: an object reached through a link is missing.
    Result<DirEntry> info = StatBeneath(step_fd->get(), e.name, path);
    if (!info.ok()) return drop(info.status());
    if (info->type == EntryType::kSymlink) {
      return drop(Corruption("object file " + path + " is a symbolic link (to " +
                             LinkTargetAt(step_fd->get(), e.name) + "), not the object; it is not followed"));
    }
    if (info->type != EntryType::kRegular) {
      return drop(Corruption("object file " + path + " is missing" +
                             (info->type == EntryType::kMissing
                                  ? ""
                                  : " (a " + std::string(EntryTypeName(info->type)) + " is in its place)")));
    }
    if (info->size != e.size) {
      return drop(Corruption("object file " + path + " holds " + std::to_string(info->size) +
                             " bytes but the manifest says " + std::to_string(e.size) + " (truncated)"));
    }
    known.insert(e.name);
  }
  if (m->checksums_pending) {
    // Committed before the agent's hash (--commit-before-hash) and the agent
    // stopped before the hash was in: hash the bytes as they are now, which
    // is what that hash would have found, and rewrite the record.
    Status hashed = HashPending(dir, &*m);
    if (!hashed.ok()) return drop(hashed);
  }
  known.insert(std::string(kManifestName));
  known.insert(std::string(kPersistMarkerName));
  RemoveLeftovers(step_fd->get(), dir, "", known);
  Result<DirEntry> marker = StatAt(step_fd->get(), std::string(kPersistMarkerName), Layout::MarkerPath(dir));
  bool wants_persist = marker.ok() && marker->type == EntryType::kRegular;
  auto state = std::make_unique<StepState>();
  state->instance = found_.next_id++;
  state->committed = true;
  state->files = std::make_shared<StepFiles>();
  state->files->ns = ns;
  state->files->dir = dir;
  state->manifest = std::move(m).value();
  if (wants_persist && has_durable_) {
    state->persist = PersistState::kQueued;
  } else if (wants_persist) {
    Log(LogLevel::kWarn, "recovery")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("why", "persistence was requested but no --durable tier is configured; it stays memory-only");
  }
  found_.object_bytes += state->manifest.TotalBytes();
  report->bytes += state->manifest.TotalBytes();
  ++report->committed_steps;
  found_.index.Insert(ns, step, std::move(state));
}

Status TierRecovery::HashPending(const std::string& dir, Manifest* m) {
  for (ObjectEntry& e : m->objects) {
    if (!e.checksum.empty()) continue;
    TC_ASSIGN_OR_RETURN(e.checksum, HashObjectFile(*mappings_, Layout::ObjectPath(dir, e.name), e.size));
  }
  m->checksums_pending = false;
  Log(LogLevel::kInfo, "recovery")
      .Kv("ns", m->ns)
      .Kv("step", m->step)
      .Kv("why", "committed before its hash; hashed now");
  return TierFiles::RewriteManifest(dir, *m);
}

void TierRecovery::RecycleTreeAt(int parent_fd, const std::string& name, const std::string& path,
                                 Pool pool) {
  Result<UniqueFd> dir = OpenDirAt(parent_fd, name, path);
  Result<std::vector<DirEntry>> entries =
      dir.ok() ? ListDirAt(dir->get(), path) : Result<std::vector<DirEntry>>(dir.status());
  if (entries.ok()) {
    for (const DirEntry& e : *entries) {
      const std::string child = JoinPath(path, e.name);
      if (e.type == EntryType::kDirectory) {
        RecycleTreeAt(dir->get(), e.name, child, pool);
      } else if (e.type == EntryType::kRegular) {
        // child passes only through directories just opened without
        // following links; RecycleFile does not follow its last one.
        RecycleFile(child, pool);
      } else if (e.type == EntryType::kSymlink) {
        RemovePlantedEntry(dir->get(), e.name, child, "a file of a step being dropped").IgnoreError();
      }
    }
  } else if (entries.status().code() == Code::kFailedPrecondition) {
    Log(LogLevel::kWarn, "recycle")
        .Kv("dir", path)
        .Err(entries.status());  // a link: removed below, as a link
  }
  Status s = RemoveTreeAt(parent_fd, name, path);
  if (!s.ok()) Log(LogLevel::kWarn, "recycle").Kv("dir", path).Err(s);
}

void TierRecovery::RecycleFile(const std::string& path, Pool pool) {
  Result<DirEntry> e = StatNoFollow(path);
  if (!e.ok() || e->type == EntryType::kMissing) return;
  if (pool == Pool::kYes && e->type == EntryType::kRegular && e->size > 0 &&
      found_.object_bytes + pool_->bytes() + e->size <= budget_bytes_) {
    Result<uint64_t> put = pool_->Put(path);  // same inode: its read mapping stays valid
    if (put.ok()) return;
    Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(put.status());
  }
  mappings_->ForgetPath(path);  // unlinked: a kept mapping would pin the file's pages
  if (Status s = RemoveFile(path, IfMissing::kOk); !s.ok())
    Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(s);
}

}  // namespace tierckpt::agent
