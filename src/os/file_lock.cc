// file_lock.cc — see file_lock.h.
#include "os/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>
#include <utility>

#include "os/files.h"

namespace tierckpt {

Result<FileLock> FileLock::Open(int dir_fd, const std::string& name, const std::string& path) {
  const int raw =
      ::openat(dir_fd, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
  if (raw < 0) {
    // ELOOP: a symbolic link; EISDIR: a directory; ENXIO: a FIFO without a
    // reader or a socket (O_NONBLOCK).
    const int err = errno;
    if (err == ELOOP || err == EISDIR || err == ENXIO) {
      Result<DirEntry> e = StatAt(dir_fd, name, path);
      const std::string_view type =
          e.ok() ? EntryTypeName(e->type)
                 : EntryTypeName(err == EISDIR ? EntryType::kDirectory : EntryType::kOther);
      return FailedPrecondition(path + " is a " + std::string(type) + ", not a regular file");
    }
    return ErrnoStatus("opening " + path, err);
  }
  UniqueFd fd(raw);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return FailedPrecondition(
        path + " is a " +
        std::string(EntryTypeName(S_ISDIR(st.st_mode) ? EntryType::kDirectory : EntryType::kOther)) +
        ", not a regular file");
  }
  return FileLock(std::move(fd), path);
}

Result<bool> FileLock::TryLockExclusive() {
  if (!fd_.valid()) return FailedPrecondition("locking " + path_ + ": no lock file is open");
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;
    return ErrnoStatus("locking " + path_);
  }
  held_ = true;
  return true;
}

}  // namespace tierckpt
