// descriptors.cc — see descriptors.h.
#include "os/descriptors.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace tierckpt {

Result<UniqueFd> OpenEventFd(std::string_view what) {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd.valid()) return ErrnoStatus("creating " + std::string(what));
  return fd;
}

void SignalEventFd(int fd) {
  const uint64_t one = 1;
  (void)!::write(fd, &one, sizeof(one));  // EAGAIN: the counter is saturated, a poller wakes anyway
}

Accepted AcceptConnection(int listen_fd) {
  Accepted a;
  a.fd = UniqueFd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (!a.fd.valid()) a.err = errno;
  return a;
}

}  // namespace tierckpt
