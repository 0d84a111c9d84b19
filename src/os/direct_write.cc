#include "os/direct_write.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <string>

#include "os/files.h"

namespace tierckpt {
namespace {

// Each O_DIRECT pwrite at most this much (pwrite moves at most ~2 GiB a call).
constexpr size_t kDirectChunk = size_t{64} << 20;

}  // namespace

Result<bool> WriteBypassingCache(int fd, const void* data, size_t size, std::string_view what) {
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t body = size / kDirectAlignment * kDirectAlignment;
  size_t done = 0;
  bool direct = false;
  if (body > 0 && reinterpret_cast<uintptr_t>(p) % kDirectAlignment == 0) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return ErrnoStatus("fcntl(F_GETFL) of " + std::string(what));
    if (::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0) {  // refused: the filesystem has no direct I/O
      while (done < body) {
        const size_t want = std::min(body - done, kDirectChunk);
        const ssize_t n = ::pwrite(fd, p + done, want, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EINVAL) {
          const int err = errno;
          ::fcntl(fd, F_SETFL, flags);
          errno = err;
          return ErrnoStatus("write " + std::string(what) + " (O_DIRECT)");
        }
        if (n > 0) done += static_cast<size_t>(n);
        if (n != static_cast<ssize_t>(want)) break;  // EINVAL, or short: the rest goes buffered
      }
      if (::fcntl(fd, F_SETFL, flags) != 0) return ErrnoStatus("fcntl(F_SETFL) of " + std::string(what));
      direct = done == body;
    }
  }
  TC_RETURN_IF_ERROR(PwriteAll(fd, p + done, size - done, done, what));
  return direct;
}

}  // namespace tierckpt
