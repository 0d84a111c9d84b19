// sync_loop.cc — see sync_loop.h.
#include "sync/sync_loop.h"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <thread>

#include "common/log.h"
#include "os/files.h"

namespace tierckpt::sync {
namespace {

bool Under(const std::string& path, const std::string& dir) {
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

// How often a changing index is rewritten while watching (a whole-object PUT).
constexpr std::chrono::seconds kIndexEvery{5};

std::chrono::milliseconds Backoff(int failures) {
  return std::chrono::milliseconds(std::min<int64_t>(60000, 1000LL << std::min(failures - 1, 6)));
}

}  // namespace

Result<SyncReport> SyncLoop::Start() {
  scope_ = o_.sync.instance.empty() ? "" : o_.sync.instance + "/";
  // Watch first: a file finished during the first pass is then not missed.
  TC_RETURN_IF_ERROR(MakeDirs(o_.sync.local, 0755).WithContext("creating the local directory"));
  TC_ASSIGN_OR_RETURN(watcher_, DirectoryWatcher::Create(o_.sync.local));
  TC_ASSIGN_OR_RETURN(SyncReport first, SyncOnce(*remote_, o_.sync));
  stats_.uploaded = first.pushed;
  stats_.uploaded_bytes = first.pushed_bytes;
  TC_ASSIGN_OR_RETURN(Journal journal, Journal::Open(o_.sync.local, o_.sync.instance));
  journal_ = std::make_unique<Journal>(std::move(journal));
  TC_ASSIGN_OR_RETURN(std::vector<BlobInfo> listed, ListRemote(*remote_));
  for (const BlobInfo& b : listed) {
    if (b.path.compare(0, scope_.size(), scope_) == 0) remote_files_[b.path.substr(scope_.size())] = b.size;
  }
  std::string warning;  // the first pass reported it already
  TC_ASSIGN_OR_RETURN(index_, LoadIndex(*remote_, o_.sync.instance, &warning));
  return first;
}

void SyncLoop::Enqueue(const std::string& path, Clock::time_point due) {
  if (IsSyncOwn(path)) return;  // our temporaries and state
  if (!ValidateRelativePath(path).ok()) {
    stats_.last_error = "skipped " + path + ": its name breaks the path rule (docs/sync.md)";
    return;
  }
  deletes_.erase(path);
  uploads_[path] = Pending{due, 0};
}

void SyncLoop::EnqueueTree(const std::string& dir) {
  std::vector<std::string> bad;
  Result<std::vector<BlobInfo>> files = ListTree(JoinPath(o_.sync.local, dir), &bad);
  if (!files.ok()) {
    stats_.last_error = files.status().ToString();
    return;
  }
  for (const BlobInfo& f : *files) Enqueue(dir + "/" + f.path, Clock::now() + o_.settle);
}

void SyncLoop::Forget(const std::string& path) {
  uploads_.erase(path);
  if (remote_files_.count(path) != 0) deletes_[path] = Pending{Clock::now(), 0};
}

void SyncLoop::ForgetTree(const std::string& dir) {
  for (auto it = uploads_.begin(); it != uploads_.end();) it = Under(it->first, dir) ? uploads_.erase(it) : ++it;
  for (const auto& [path, size] : remote_files_) {
    if (Under(path, dir)) deletes_[path] = Pending{Clock::now(), 0};
  }
}

void SyncLoop::Rescan() {
  Result<std::vector<BlobInfo>> files = ListTree(o_.sync.local, nullptr);
  if (!files.ok()) {
    stats_.last_error = files.status().ToString();
    return;
  }
  for (const BlobInfo& f : *files) {
    auto known = remote_files_.find(f.path);
    const FileVersion* put = journal_->Find(f.path);
    Result<FileVersion> now = VersionOf(JoinPath(o_.sync.local, f.path));
    const bool rewritten = put != nullptr && now.ok() && !(*put == *now);
    if ((known == remote_files_.end() || known->second != f.size || rewritten) && uploads_.count(f.path) == 0) {
      Enqueue(f.path, Clock::now() + o_.settle);
    }
  }
}

void SyncLoop::Handle(const WatchEvent& e) {
  switch (e.kind) {
    case WatchEvent::Kind::kFileReady: Enqueue(e.path, Clock::now() + o_.settle); break;
    case WatchEvent::Kind::kFileGone: Forget(e.path); break;
    case WatchEvent::Kind::kDirAppeared: EnqueueTree(e.path); break;
    case WatchEvent::Kind::kDirGone: ForgetTree(e.path); break;
    case WatchEvent::Kind::kOverflow: Rescan(); break;
  }
}

void SyncLoop::MarkIndexChanged() {
  if (!index_dirty_) index_due_ = Clock::now() + kIndexEvery;  // changes gather for one PUT
  index_dirty_ = true;
}

void SyncLoop::StoreIndexIfDue(bool force) {
  if (!index_dirty_ || (!force && Clock::now() < index_due_)) return;
  Status s = StoreIndex(*remote_, o_.sync.instance, index_);
  if (s.ok()) {
    index_dirty_ = false;
    return;
  }
  index_due_ = Clock::now() + kIndexEvery;
  stats_.last_error = s.ToString();
  Log(LogLevel::kWarn, "sync_index_failed").Err(s);
}

SyncLoop::Clock::time_point SyncLoop::NextDue() const {
  Clock::time_point next = index_dirty_ ? index_due_ : Clock::time_point::max();
  for (const auto& [p, w] : uploads_) next = std::min(next, w.due);
  for (const auto& [p, w] : deletes_) next = std::min(next, w.due);
  return next;
}

void SyncLoop::Work(bool force) {
  const Clock::time_point now = Clock::now();
  std::vector<std::string> due;
  for (const auto& [p, w] : deletes_) {
    if (force || w.due <= now) due.push_back(p);
  }
  for (const std::string& p : due) {
    Status s = remote_->Delete({Scoped(p)});
    if (s.ok()) {
      deletes_.erase(p);
      remote_files_.erase(p);
      if (index_.erase(p) != 0) MarkIndexChanged();
      journal_->Forget(p);
      journal_dirty_ = true;
      ++stats_.deleted;
      Log(LogLevel::kInfo, "sync_deleted").Kv("path", p);
    } else {
      Pending& w = deletes_[p];
      w.due = Clock::now() + Backoff(++w.failures);
      stats_.last_error = s.ToString();
    }
  }
  due.clear();
  for (const auto& [p, w] : uploads_) {
    if (force || w.due <= now) due.push_back(p);
  }
  for (const std::string& p : due) {
    const std::string local = JoinPath(o_.sync.local, p);
    Result<FileInfo> info = StatPath(local);
    if (!info.ok() || !info->is_regular) {
      uploads_.erase(p);  // gone again (or unreadable); its deletion event follows
      continue;
    }
    Result<FileVersion> version = VersionOf(local);
    const FileVersion* put = journal_->Find(p);
    if (version.ok() && put != nullptr && *put == *version && remote_files_.count(p) != 0) {
      uploads_.erase(p);  // already there in this version (pulled at start, or pushed by the first pass)
      continue;
    }
    Status s = PutFile(*remote_, Scoped(p), local);
    if (s.ok() && version.ok()) {
      s = journal_->Record(p, *version);
      journal_dirty_ = true;
    }
    if (s.ok()) {
      uploads_.erase(p);
      remote_files_[p] = info->size;
      if (version.ok()) {
        index_[p] = *version;
        MarkIndexChanged();
      }
      ++stats_.uploaded;
      stats_.uploaded_bytes += info->size;
      Log(LogLevel::kInfo, "sync_uploaded").Kv("path", p).Kv("bytes", info->size);
    } else {
      Pending& w = uploads_[p];
      w.due = Clock::now() + Backoff(++w.failures);
      stats_.last_error = s.ToString();
      Log(LogLevel::kWarn, "sync_upload_failed").Kv("path", p).Kv("attempt", static_cast<int64_t>(w.failures)).Err(s);
    }
  }
  if (uploads_.empty() && deletes_.empty()) stats_.last_error.clear();
  StoreIndexIfDue(force);
  if (journal_dirty_) {
    if (Status synced = journal_->Sync(); !synced.ok()) stats_.last_error = synced.ToString();
    journal_dirty_ = false;
  }
}

Result<bool> SyncLoop::Step(int extra_fd, std::chrono::milliseconds wait) {
  const Clock::time_point next = NextDue();
  if (next != Clock::time_point::max()) {
    wait = std::min(wait, std::max(std::chrono::milliseconds(0),
                                   std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now())));
  }
  pollfd fds[2] = {{watcher_->fd(), POLLIN, 0}, {extra_fd, POLLIN, 0}};
  const int n = ::poll(fds, extra_fd >= 0 ? 2 : 1, static_cast<int>(wait.count()));
  if (n < 0 && errno != EINTR) return ErrnoStatus("waiting for changes in " + o_.sync.local);
  TC_ASSIGN_OR_RETURN(std::vector<WatchEvent> events, watcher_->Read());
  for (const WatchEvent& e : events) Handle(e);
  Work(false);
  return extra_fd >= 0 && n > 0 && (fds[1].revents & POLLIN) != 0;
}

Status SyncLoop::Flush(Clock::time_point deadline) {
  if (Result<std::vector<WatchEvent>> events = watcher_->Read(); events.ok()) {
    for (const WatchEvent& e : *events) Handle(e);
  }
  Rescan();
  while (!uploads_.empty() || !deletes_.empty() || index_dirty_) {
    Work(/*force=*/true);
    if (uploads_.empty() && deletes_.empty() && !index_dirty_) break;
    if (Clock::now() >= deadline) {
      return Unavailable(std::to_string(uploads_.size()) + " file(s) not uploaded and " +
                         std::to_string(deletes_.size()) + " deletion(s) not mirrored to " + remote_->Describe() +
                         (index_dirty_ ? " (and the index of modification times not written)" : "") +
                         " within the grace period (last error: " + stats_.last_error +
                         "); run `tierckpt sync --once` again to finish");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return Status::Ok();
}

SyncStatus SyncLoop::status() const {
  SyncStatus s = stats_;
  s.pending = uploads_.size();
  s.pending_bytes = 0;
  for (const auto& [p, w] : uploads_) {
    Result<FileInfo> info = StatPath(JoinPath(o_.sync.local, p));
    if (info.ok()) s.pending_bytes += info->size;  // 0 when gone; an error counts nothing
  }
  return s;
}

}  // namespace tierckpt::sync
