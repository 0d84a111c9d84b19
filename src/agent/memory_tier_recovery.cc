// MemoryTier::Recover: re-index the tmpfs root after a restart or a kill -9.
//
// The rule (docs/agent.md): partial and trash dirs are recycled; a committed
// step survives if its manifest parses, names this step, and every object
// file exists with its manifest size; checksums are verified lazily (by
// clients on read, by Verify, by restores), not here.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "agent/memory_tier.h"
#include "common/log.h"
#include "common/names.h"
#include "os/files.h"

namespace tierckpt::agent {
namespace {

// Regular files under dir, as paths relative to dir.
void CollectFiles(const std::string& dir, const std::string& prefix, std::vector<std::string>* out) {
  Result<std::vector<std::string>> names = ListDir(dir);
  if (!names.ok()) return;
  for (const auto& n : *names) {
    std::string path = JoinPath(dir, n);
    std::string rel = prefix.empty() ? n : prefix + "/" + n;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      CollectFiles(path, rel, out);
    } else {
      out->push_back(rel);
    }
  }
}

}  // namespace

Result<RecoveryReport> MemoryTier::Recover() {
  std::lock_guard<std::mutex> lock(mu_);
  RecoveryReport report;
  TC_RETURN_IF_ERROR(pool_.Load().WithContext("loading the segment pool"));
  TC_ASSIGN_OR_RETURN(FileInfo trash, StatPath(layout_.TrashDir()));
  if (trash.exists) RecycleTreeLocked(layout_.TrashDir());
  TC_RETURN_IF_ERROR(MakeDirs(layout_.NamespacesDir(), 0700));
  TC_ASSIGN_OR_RETURN(auto names, ListDir(layout_.NamespacesDir()));
  for (const auto& n : names) {
    if (!ValidateNamespace(n).ok()) {
      Log(LogLevel::kWarn, "recovery")
          .Kv("entry", JoinPath(layout_.NamespacesDir(), n))
          .Kv("why", "not a valid namespace name; left alone");
      continue;
    }
    RecoverNamespaceLocked(n, &report);
  }
  // Oldest commit first for eviction: order recovered steps by creation time.
  std::vector<std::tuple<uint64_t, std::string, uint64_t>> order;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) order.emplace_back(s->manifest.created_unix_ms, ns, step);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [ms, ns, step] : order) FindLocked(ns, step)->commit_seq = next_commit_seq_++;
  // A lowered budget: shrink the pool, then evict by policy.
  while (UsedLocked() > options_.budget_bytes) {
    Result<uint64_t> freed = pool_.ReleaseOne(std::nullopt);
    if (freed.ok() && *freed > 0) continue;
    if (!EvictOneLocked()) break;
  }
  if (UsedLocked() > options_.budget_bytes) {
    Log(LogLevel::kWarn, "recovery")
        .Kv("used", UsedLocked())
        .Kv("budget", options_.budget_bytes)
        .Kv("why", "the newest steps alone exceed --memory-budget; new writes will fail until steps are deleted");
  }
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (s->persist == PersistState::kQueued) report.persist_pending.emplace_back(ns, step);
    }
  }
  return report;
}

void MemoryTier::RecoverNamespaceLocked(const std::string& ns, RecoveryReport* report) {
  const std::string dir = layout_.NamespaceDir(ns);
  Result<std::vector<std::string>> entries = ListDir(dir);
  if (!entries.ok()) {
    report->errors.push_back(entries.status().WithContext("recovering namespace " + ns));
    return;
  }
  size_t partial = 0;
  for (const auto& e : *entries) {
    const std::string path = JoinPath(dir, e);
    uint64_t step = 0;
    Result<FileInfo> info = StatPath(path);
    bool is_dir = info.ok() && info->is_dir;
    if (is_dir && e.size() > kPartialSuffix.size() && e.ends_with(kPartialSuffix) &&
        ParseStepDirName(e.substr(0, e.size() - kPartialSuffix.size()), &step)) {
      RecycleTreeLocked(path);
      ++partial;
      Log(LogLevel::kInfo, "recovery").Kv("ns", ns).Kv("step", step).Kv("dropped", "partial step");
    } else if (is_dir && ParseStepDirName(e, &step)) {
      RecoverStepDirLocked(ns, step, path, report);
    } else {
      Status s = RemoveTree(path);
      Log(LogLevel::kWarn, "recovery").Kv("removed", path).Kv("why", "leftover, not a step directory");
      if (!s.ok()) report->errors.push_back(s);
    }
  }
  report->partial_dropped += partial;
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) {
    ::rmdir(dir.c_str());
    if (partial > 0) Log(LogLevel::kInfo, "recovered").Kv("ns", ns).Kv("steps", 0).Kv("partial_dropped", partial);
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

void MemoryTier::RecoverStepDirLocked(const std::string& ns, uint64_t step, const std::string& dir,
                                      RecoveryReport* report) {
  const std::string label = StepLabel(ns, step);
  auto drop = [&](const Status& why) {
    Status err = why.WithContext("recovery dropped step " + label + " from the memory tier");
    Log(LogLevel::kError, "recovery").Kv("ns", ns).Kv("step", step).Kv("dir", dir).Err(err);
    report->errors.push_back(err);
    ++report->damaged_dropped;
    RecycleTreeLocked(dir);
  };
  const std::string manifest_path = Layout::ManifestPath(dir);
  Result<std::string> text = ReadFileToString(manifest_path, kMaxManifestBytes);
  if (!text.ok()) return drop(text.status());
  Result<Manifest> m = Manifest::Parse(*text, manifest_path);
  if (!m.ok()) return drop(m.status());
  if (m->ns != ns || m->step != step) {
    return drop(Corruption("its manifest " + manifest_path + " names step " + StepLabel(m->ns, m->step)));
  }
  std::set<std::string> known;
  for (const auto& e : m->objects) {
    std::string path = Layout::ObjectPath(dir, e.name);
    Result<FileInfo> info = StatPath(path);
    if (!info.ok()) return drop(info.status());
    if (!info->exists || !info->is_regular) return drop(Corruption("object file " + path + " is missing"));
    if (info->size != e.size) {
      return drop(Corruption("object file " + path + " holds " + std::to_string(info->size) +
                             " bytes but the manifest says " + std::to_string(e.size) + " (truncated)"));
    }
    known.insert(e.name);
  }
  known.insert(std::string(kManifestName));
  known.insert(std::string(kPersistMarkerName));
  std::vector<std::string> files;
  CollectFiles(dir, "", &files);
  for (const auto& rel : files) {
    if (known.count(rel) != 0) continue;
    std::string path = JoinPath(dir, rel);
    ::unlink(path.c_str());
    Log(LogLevel::kInfo, "recovery").Kv("removed", path).Kv("why", "leftover file in a committed step");
  }
  Result<FileInfo> marker = StatPath(Layout::MarkerPath(dir));
  bool wants_persist = marker.ok() && marker->exists;
  auto state = std::make_unique<StepState>();
  state->instance = next_id_++;
  state->committed = true;
  state->files = std::make_shared<StepFiles>();
  state->files->dir = dir;
  state->manifest = std::move(m).value();
  if (wants_persist && options_.has_durable) {
    state->persist = PersistState::kQueued;
  } else if (wants_persist) {
    Log(LogLevel::kWarn, "recovery")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("why", "persistence was requested but no --durable tier is configured; it stays memory-only");
  }
  object_bytes_ += state->manifest.TotalBytes();
  report->bytes += state->manifest.TotalBytes();
  ++report->committed_steps;
  namespaces_.try_emplace(ns).first->second.steps[step] = std::move(state);
}

}  // namespace tierckpt::agent
