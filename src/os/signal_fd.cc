// signal_fd.cc — see signal_fd.h.
#include "os/signal_fd.h"

#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

namespace tierckpt {

Result<SignalFd> SignalFd::Open(std::initializer_list<int> signals, std::string_view what) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  // pthread_sigmask returns the error number rather than setting errno.
  if (const int err = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); err != 0) {
    return ErrnoStatus("blocking " + std::string(what), err);
  }
  UniqueFd fd(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd.valid()) return ErrnoStatus("creating a signalfd for " + std::string(what));
  return SignalFd(std::move(fd));
}

std::optional<int> SignalFd::ReadSignal() {
  if (!fd_.valid()) return std::nullopt;
  signalfd_siginfo info{};
  for (;;) {
    const ssize_t n = ::read(fd_.get(), &info, sizeof(info));
    if (n == static_cast<ssize_t>(sizeof(info))) return static_cast<int>(info.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    return std::nullopt;
  }
}

}  // namespace tierckpt
