// fd.h — the owner of a file descriptor, and the one place errno becomes a
// Status.
//
// UniqueFd is move-only; it closes its fd on destruction. No other code calls
// close(2) on an fd it owns through a UniqueFd. Thread-compatible.
#pragma once

#include <string_view>
#include <utility>

#include "tierckpt/status.h"

namespace tierckpt {

// Turns errno (or the given error number) into a Status:
//   "<what>: <strerror> (errno N)". ENOENT → kNotFound, EEXIST → kAlreadyExists,
//   EACCES/EPERM → kPermissionDenied, ENOSPC/EDQUOT/ENOMEM → kResourceExhausted,
//   ETIMEDOUT → kTimeout, ECONNREFUSED/ECONNRESET/EPIPE → kUnavailable,
//   others → kIoError.
Status ErrnoStatus(std::string_view what, int err);
Status ErrnoStatus(std::string_view what);  // uses the current errno

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      Reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

}  // namespace tierckpt
