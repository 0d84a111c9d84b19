// sync_loop.h — the watching mode of `tierckpt sync` (docs/sync.md): after a
// first pass (sync.h: pull what is missing, push what is new), it watches the
// directory (watcher.h) and
//   - uploads a file once it is complete (closed after writing, or renamed
//     into place) and has stayed unchanged for `settle` (so a checkpoint
//     directory written under a temporary name and renamed is uploaded once,
//     under its final name);
//   - mirrors deletions: a file deleted (or renamed away) locally is deleted
//     remotely if the remote has it under this instance's prefix. Deletions
//     are mirrored only as they are seen: nothing is deleted at start, after
//     a restart or because the directory is empty;
//   - retries failed uploads and deletions with capped exponential backoff
//     (1 s doubling to 60 s), keeping the last error for status output;
//   - keeps the remote's index of modification times (remote_index.h) in
//     step: each upload adds its file's time, each deletion drops it; the
//     index is rewritten at most every kIndexEvery, and by Flush.
// On a directory remote a deletion also removes the directories it leaves
// empty (never the remote's root; fs_blob_store.h remove_empty_dirs).
// A restart resumes pending uploads by the first pass's comparison of local
// files with the journal (journal.h) and the remote.
//
// Flush uploads everything pending at once (no settle) plus anything a rescan
// finds, and writes the index, until a deadline: Ok when everything local is
// remote with its time.
//
// One thread drives a SyncLoop (Start, then Step repeatedly, then Flush).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "sync/blob_store.h"
#include "sync/journal.h"
#include "sync/remote_index.h"
#include "sync/sync.h"
#include "sync/watcher.h"

namespace tierckpt::sync {

struct WatchOptions {
  SyncOptions sync;
  std::chrono::milliseconds settle{1000};
};

struct SyncStatus {
  size_t pending = 0;         // files waiting to be uploaded
  uint64_t pending_bytes = 0;
  size_t uploaded = 0, deleted = 0;  // since start (first pass included)
  uint64_t uploaded_bytes = 0;
  std::string last_error;     // "" when the last attempt of everything succeeded
};

class SyncLoop {
 public:
  SyncLoop(BlobStore* remote, WatchOptions options) : remote_(remote), o_(std::move(options)) {}

  // The first pass, then the watch. Errors: the first pass's, the watch's.
  Result<SyncReport> Start();
  // Handles events and due work, waiting up to `wait` for either; returns
  // true when extra_fd (e.g. a signalfd; -1 for none) became readable.
  Result<bool> Step(int extra_fd, std::chrono::milliseconds wait);
  // Uploads what is pending and what a rescan finds, until deadline.
  Status Flush(std::chrono::steady_clock::time_point deadline);
  SyncStatus status() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    Clock::time_point due;
    int failures = 0;
  };
  std::string Scoped(const std::string& path) const { return scope_ + path; }
  void Enqueue(const std::string& path, Clock::time_point due);
  void EnqueueTree(const std::string& dir);
  void Forget(const std::string& path);       // a local file is gone
  void ForgetTree(const std::string& dir);
  void Handle(const WatchEvent& e);
  void Rescan();
  // Does due work (all of it with force); returns nothing, errors recorded.
  void Work(bool force);
  Clock::time_point NextDue() const;
  // Writes the index if it changed and is due (or force); errors recorded.
  void StoreIndexIfDue(bool force);
  void MarkIndexChanged();  // the index is written within kIndexEvery

  BlobStore* const remote_;
  const WatchOptions o_;
  std::string scope_;
  std::unique_ptr<DirectoryWatcher> watcher_;
  std::map<std::string, Pending> uploads_;
  std::map<std::string, Pending> deletes_;
  std::map<std::string, uint64_t> remote_files_;  // what the remote holds (scoped away), as far as we know
  std::unique_ptr<Journal> journal_;              // what we put there, by local version
  bool journal_dirty_ = false;                    // records not yet fdatasync'ed
  RemoteIndex index_;                             // the remote's modification times (remote_index.h)
  bool index_dirty_ = false;                      // changed since it was last written
  Clock::time_point index_due_{};                 // when a changed index is written
  SyncStatus stats_;
};

}  // namespace tierckpt::sync
