#include "os/fd.h"

#include <cerrno>
#include <cstring>
#include <string>
#include <unistd.h>

namespace tierckpt {

Status ErrnoStatus(std::string_view what, int err) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  msg += " (errno " + std::to_string(err) + ")";
  switch (err) {
    case ENOENT:
      return NotFound(std::move(msg));
    case EEXIST:
      return AlreadyExists(std::move(msg));
    case EACCES:
    case EPERM:
      return PermissionDenied(std::move(msg));
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
      return ResourceExhausted(std::move(msg));
    case ETIMEDOUT:
      return Timeout(std::move(msg));
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
      return Unavailable(std::move(msg));
    default:
      return IoError(std::move(msg));
  }
}

Status ErrnoStatus(std::string_view what) { return ErrnoStatus(what, errno); }

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace tierckpt
