// descriptors.h — the descriptors that are not files: an eventfd(2) one
// thread signals and another polls for, and the connections accepted on a
// listening socket. Each returns its descriptor in a UniqueFd (fd.h).
//
// Thread safety: none of these keeps state; SignalEventFd may be called from
// any thread (and from a signal handler) while another polls the fd.
#pragma once

#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK): readable (POLLIN) once signalled.
// A failure is ErrnoStatus("creating <what>").
Result<UniqueFd> OpenEventFd(std::string_view what);

// Adds 1 to the eventfd's counter so a poller wakes. Never blocks; a failure
// (only a saturated counter, which is signalled already) is ignored.
// Async-signal-safe.
void SignalEventFd(int fd);

// accept4(listen_fd, SOCK_CLOEXEC). On failure `fd` is invalid and `err`
// holds errno, for callers whose policy depends on it (EMFILE and ENFILE:
// out of descriptors; EAGAIN, EINTR, ECONNABORTED: nothing to accept now).
struct Accepted {
  UniqueFd fd;
  int err = 0;
};
Accepted AcceptConnection(int listen_fd);

}  // namespace tierckpt
