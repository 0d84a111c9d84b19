// signal_fd.h — signals read from a descriptor (signalfd(2)) instead of run
// in a handler, so a poll loop handles them like any other event.
//
// SignalFd::Open blocks the signals in the calling thread first: threads it
// starts later inherit the mask, and the signals then arrive only through
// the fd. Call it before any thread starts (a thread started earlier, with
// the signals unblocked, would take them the default way). Destroying the
// SignalFd closes its fd; the signals stay blocked. Children started with
// os/process.h start with every signal unblocked.
//
// Move-only. Thread-compatible: one thread reads it; any may poll fd().
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

class SignalFd {
 public:
  SignalFd() = default;  // holds no fd

  // Blocks `signals` (pthread_sigmask SIG_BLOCK) and opens a signalfd for
  // them with SFD_CLOEXEC | SFD_NONBLOCK. `what` names the signals in
  // messages ("SIGINT/SIGTERM"). Failures: ErrnoStatus("blocking <what>")
  // or ErrnoStatus("creating a signalfd for <what>").
  static Result<SignalFd> Open(std::initializer_list<int> signals, std::string_view what);

  bool valid() const { return fd_.valid(); }
  // For poll(2): readable while a signal is pending.
  int fd() const { return fd_.get(); }

  // Takes the next pending signal and returns its number; nullopt when none
  // is pending (never blocks) or the SignalFd holds no fd.
  std::optional<int> ReadSignal();

 private:
  explicit SignalFd(UniqueFd fd) : fd_(std::move(fd)) {}

  UniqueFd fd_;
};

}  // namespace tierckpt
