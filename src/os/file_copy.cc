// file_copy.cc — see file_copy.h.
#include "os/file_copy.h"

#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "os/fd.h"

namespace tierckpt {

Status SendFileExact(int out_fd, int in_fd, uint64_t size, std::string_view what) {
  if (::lseek(out_fd, 0, SEEK_SET) != 0)
    return ErrnoStatus(std::string(what) + ": seeking the destination to 0");
  off_t in = 0;
  while (static_cast<uint64_t>(in) < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(size - static_cast<uint64_t>(in), 1u << 30));
    const ssize_t n = ::sendfile(out_fd, in_fd, &in, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && in == 0 && (errno == EINVAL || errno == ENOSYS)) {
      return Unimplemented(std::string(what) + ": sendfile is not supported between these files");
    }
    if (n < 0) return ErrnoStatus(std::string(what) + " at offset " + std::to_string(in) + " (sendfile)");
    if (n == 0) {
      return Corruption(std::string(what) + ": the source ended at " + std::to_string(in) +
                        " bytes, short of " + std::to_string(size) + "; it was truncated meanwhile");
    }
  }
  return Status::Ok();
}

Status CheckAccess(const std::string& path, int mode, std::string_view what) {
  if (::access(path.c_str(), mode) != 0) return ErrnoStatus(std::string(what) + " " + path);
  return Status::Ok();
}

}  // namespace tierckpt
