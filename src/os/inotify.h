// inotify.h — the owner of an inotify(7) instance: watches added by path,
// events read without blocking. The event masks (IN_CLOSE_WRITE, IN_ISDIR,
// IN_Q_OVERFLOW, ...) are inotify(7)'s, from <sys/inotify.h> included here.
//
// Move-only; destroying it closes the instance, which drops every watch.
// Thread-compatible: one thread adds watches and reads events.
#pragma once

#include <sys/inotify.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

class Inotify {
 public:
  struct Event {
    int wd = -1;        // the watch it came from (-1 for IN_Q_OVERFLOW)
    uint32_t mask = 0;  // IN_* bits
    std::string name;   // the entry inside the watched directory; "" for the directory itself
  };

  Inotify() = default;  // holds no instance

  // inotify_init1(IN_NONBLOCK | IN_CLOEXEC). A failure is
  // ErrnoStatus("inotify_init1 (raise fs.inotify.max_user_instances?)").
  static Result<Inotify> Open();

  bool valid() const { return fd_.valid(); }
  // For poll(2): readable while events wait.
  int fd() const { return fd_.get(); }

  // inotify_add_watch(path, mask): the watch descriptor. kNotFound when path
  // is gone or is not a directory while mask holds IN_ONLYDIR (ENOENT,
  // ENOTDIR). Failures are ErrnoStatus("watching <path>"), with
  // " (raise fs.inotify.max_user_watches)" after the path for ENOSPC.
  Result<int> AddWatch(const std::string& path, uint32_t mask);
  // inotify_rm_watch; a watch already gone (the kernel dropped it) is ignored.
  void RemoveWatch(int wd);

  // The events one read(2) returns, in order: none (an empty vector) when
  // none is queued; never blocks. Call again until it returns none to drain
  // the queue. A failure is ErrnoStatus("reading inotify events of <what>").
  Result<std::vector<Event>> ReadEvents(std::string_view what);

 private:
  explicit Inotify(UniqueFd fd) : fd_(std::move(fd)) {}

  UniqueFd fd_;
};

}  // namespace tierckpt
