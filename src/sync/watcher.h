// watcher.h — a recursive inotify watch of a directory tree, for sync's
// watching mode (sync_loop.h). It reports what sync acts on, with paths
// relative to the root:
//   kFileReady    a file was closed after writing (IN_CLOSE_WRITE) or renamed
//                 into place (IN_MOVED_TO): complete, as far as the writer
//                 is concerned. A file still open for writing is never ready.
//   kFileGone     a file was deleted or renamed away.
//   kDirAppeared  a directory was created or renamed in: it is watched from
//                 now on; files it already holds got no event (scan it).
//   kDirGone      a directory was deleted or renamed away (its watches are
//                 dropped).
//   kOverflow     the kernel's event queue overflowed: rescan everything.
// New subdirectories are watched as they appear. The watch owns its inotify
// descriptor (RAII). Not thread-safe: one thread reads it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "os/inotify.h"
#include "tierckpt/status.h"

namespace tierckpt::sync {

struct WatchEvent {
  enum class Kind { kFileReady, kFileGone, kDirAppeared, kDirGone, kOverflow };
  Kind kind;
  std::string path;  // relative to the root; "" for kOverflow
};

class DirectoryWatcher {
 public:
  // Watches root and every directory below it. Errors name the directory
  // (ENOSPC: raise fs.inotify.max_user_watches).
  static Result<std::unique_ptr<DirectoryWatcher>> Create(const std::string& root);

  // For poll(2): readable when events wait.
  int fd() const { return inotify_.fd(); }
  // The events waiting now (none when there are none; never blocks).
  Result<std::vector<WatchEvent>> Read();

 private:
  DirectoryWatcher(std::string root, Inotify inotify)
      : root_(std::move(root)), inotify_(std::move(inotify)) {}
  // Watches dir (relative) and everything below it.
  Status AddTree(const std::string& rel);
  void DropTree(const std::string& rel);
  std::string Join(const std::string& dir, const std::string& name) const;

  const std::string root_;
  Inotify inotify_;
  std::map<int, std::string> dirs_;  // watch descriptor → relative dir ("" = root)
};

}  // namespace tierckpt::sync
