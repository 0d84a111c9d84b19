// file_lock.h — an advisory lock (flock(2)) on a lock file, held for the life
// of its owner object: one process at a time may hold it, and the kernel
// drops it when the holder exits, however it exits.
//
// The lock file is opened without following a symbolic link and without
// blocking on a FIFO, so an entry planted where the lock file belongs is
// never truncated through or hung on: it is reported (kFailedPrecondition)
// and the caller decides whether to remove it.
//
// FileLock is move-only; destroying it closes its fd, which releases the
// lock. Thread-compatible: one thread uses a FileLock at a time.
#pragma once

#include <string>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

class FileLock {
 public:
  FileLock() = default;  // holds no file

  // Opens (creating with mode 0600) the entry `name` (one component) inside
  // dir_fd with O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC; path
  // names it in messages. The lock is not taken yet (TryLockExclusive).
  // kFailedPrecondition "<path> is a <type>, not a regular file" when the
  // entry is a symbolic link, a directory, a FIFO, a socket or a device
  // (nothing is changed). Other failures: ErrnoStatus("opening <path>") or
  // ErrnoStatus("stat <path>").
  static Result<FileLock> Open(int dir_fd, const std::string& name, const std::string& path);

  // flock(fd, LOCK_EX | LOCK_NB): true when this object now holds the lock
  // (until it is destroyed), false when another open file description
  // (another process, or another FileLock here) holds it. Any other
  // failure: ErrnoStatus("locking <path>").
  Result<bool> TryLockExclusive();

  bool valid() const { return fd_.valid(); }
  bool held() const { return held_; }
  // The open lock file, to read or write what it records (a pid).
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  FileLock(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}

  UniqueFd fd_;
  std::string path_;
  bool held_ = false;
};

}  // namespace tierckpt
