// sync.cc — see sync.h.
#include "sync/sync.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>

#include "common/names.h"
#include "os/files.h"
#include "os/parallel.h"
#include "sync/journal.h"
#include "sync/remote_index.h"

namespace tierckpt::sync {
namespace {

constexpr int kStableTries = 3;

}  // namespace

Result<SyncReport> SyncOnce(BlobStore& remote, const SyncOptions& o, const SyncProgress& progress) {
  if (!o.instance.empty()) {
    TC_RETURN_IF_ERROR(ValidateNamespace(o.instance).WithContext("--instance-prefix"));
  }
  TC_RETURN_IF_ERROR(MakeDirs(o.local, 0755).WithContext("creating the local directory"));
  TC_ASSIGN_OR_RETURN(Journal journal, Journal::Open(o.local, o.instance));
  const std::string scope = o.instance.empty() ? "" : o.instance + "/";
  SyncReport report;
  std::vector<std::string> bad_remote;
  TC_ASSIGN_OR_RETURN(std::vector<BlobInfo> listed, ListRemote(remote, &bad_remote));
  for (auto& b : bad_remote) report.bad_names.push_back(remote.Describe() + b);
  std::map<std::string, uint64_t> theirs;  // relative to the scope
  for (const BlobInfo& b : listed) {
    if (b.path.compare(0, scope.size(), scope) != 0) continue;  // another instance's
    theirs[b.path.substr(scope.size())] = b.size;
  }
  std::vector<std::string> bad_local;
  TC_ASSIGN_OR_RETURN(std::vector<BlobInfo> local_files, ListTree(o.local, &bad_local));
  for (auto& b : bad_local) report.bad_names.push_back(JoinPath(o.local, b));
  std::map<std::string, uint64_t> ours;
  for (const BlobInfo& b : local_files) ours[b.path] = b.size;
  // The modification times pushed before (remote_index.h); none on an older remote.
  std::string index_warning;
  TC_ASSIGN_OR_RETURN(RemoteIndex old_index, LoadIndex(remote, o.instance, &index_warning));
  if (!index_warning.empty()) report.warnings.push_back(index_warning);
  RemoteIndex index;  // what the remote holds now: entries still true of it, and what this pass pushes
  for (const auto& [path, v] : old_index) {
    auto there = theirs.find(path);
    if (there != theirs.end() && there->second == v.size) index[path] = v;
  }

  struct Move {
    std::string path;
    uint64_t size;
  };
  std::vector<Move> pulls, pushes;
  if (o.pull) {
    for (const auto& [path, size] : theirs) {
      auto mine = ours.find(path);
      if (mine == ours.end()) {
        pulls.push_back({path, size});
      } else if (mine->second != size) {
        report.conflicts.push_back(path);
      }
    }
  }
  if (o.push) {
    for (const auto& [path, size] : ours) {
      auto there = theirs.find(path);
      if (there == theirs.end()) {
        pushes.push_back({path, size});
        continue;
      }
      Result<FileVersion> now = VersionOf(JoinPath(o.local, path));
      const FileVersion* put = journal.Find(path);
      if (now.ok() && put != nullptr) {
        // The journal knows which version is remote: a rewrite is uploaded
        // again even when its size did not change.
        if (*put == *now) {
          ++report.unchanged;
          // A file put (or pulled) before whose time the index lacks (an index write that
          // failed, an older remote): the time it has here is recorded.
          if (now->size == there->second && index.count(path) == 0) index[path] = *now;
        } else {
          pushes.push_back({path, size});
        }
      } else if (there->second == size) {
        ++report.unchanged;  // no record: the same size is taken as the same file
        if (now.ok()) TC_RETURN_IF_ERROR(journal.Record(path, *now));
      } else {
        pushes.push_back({path, size});
      }
    }
  }
  std::vector<std::string> pulled;  // written locally, for their directories' times
  std::mutex mu;  // guards report, the journal, index, pulled and progress calls
  // After the first failure no new move starts (ParallelFor).
  auto run = [&](const std::vector<Move>& moves, bool pull) {
    return ParallelFor(moves.size(), o.concurrency, [&](size_t i) -> Status {
      const Move& m = moves[i];
      const std::string local = JoinPath(o.local, m.path);
      Result<FileVersion> before = pull ? Result<FileVersion>(FileVersion{}) : VersionOf(local);
      Status st = Status::Ok();
      if (pull) {
        auto recorded = index.find(m.path);  // read only while pulls run
        std::optional<int64_t> mtime;
        if (recorded != index.end()) mtime = recorded->second.mtime_ns;
        st = GetFile(remote, scope + m.path, m.size, local, mtime)
                 .WithContext("pulling " + m.path + " into " + o.local);
      } else {
        // A file that changes while it is uploaded may have gone up half
        // written: upload it again until it holds still (a few tries).
        for (int attempt = 1;; ++attempt) {
          st = PutFile(remote, scope + m.path, local)
                   .WithContext("pushing " + local + " to " + remote.Describe());
          Result<FileVersion> after = VersionOf(local);
          if (!st.ok() || !before.ok() || !after.ok() || *after == *before) break;
          before = after;
          if (attempt == kStableTries) {
            st = Unavailable(
                local + " kept changing while it was uploaded (" + std::to_string(kStableTries) +
                " tries); its remote copy may be partial: run sync again once the writer is done");
            break;
          }
        }
      }
      TC_RETURN_IF_ERROR(st);
      std::lock_guard lock(mu);
      Result<FileVersion> version = pull ? VersionOf(local) : before;
      if (version.ok()) TC_RETURN_IF_ERROR(journal.Record(m.path, *version));
      if (pull) {
        pulled.push_back(m.path);
        ++report.pulled;
        report.pulled_bytes += m.size;
      } else {
        if (before.ok()) index[m.path] = *before;  // the version that went up, with its time
        ++report.pushed;
        report.pushed_bytes += m.size;
      }
      if (progress) progress(pull ? "pull" : "push", m.path, m.size);
      return Status::Ok();
    });
  };
  Status pulled_all = run(pulls, true);
  // Directories after their files: writing a file set its directory's time to now.
  Status dir_times = RestoreDirTimes(o.local, pulled).WithContext("after pulling into " + o.local);
  TC_RETURN_IF_ERROR(pulled_all);
  TC_RETURN_IF_ERROR(dir_times);
  Status pushed_all = run(pushes, false);
  // The index follows the files it describes; written for what did go up even when a push failed.
  if (o.push && index != old_index) {
    Status stored = StoreIndex(remote, o.instance, index);
    if (pushed_all.ok()) pushed_all = stored;
  }
  TC_RETURN_IF_ERROR(pushed_all);
  TC_RETURN_IF_ERROR(journal.Sync());
  return report;
}

}  // namespace tierckpt::sync
