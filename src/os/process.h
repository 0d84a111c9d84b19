// process.h — child processes: start one (fork + exec, stdio redirected,
// optionally in a new session), poll or wait for its exit with or without a
// timeout, signal it; or replace this process with another program.
//
// Child owns a process it started until the process is reaped (Poll/Wait
// saw it exit) or released (Detach). A Child destroyed while it still owns
// a live process kills it (SIGKILL) and reaps it, so no caller leaks a
// running child or a zombie by returning early; a daemon meant to outlive
// its starter is Detach()ed. Move-only. Thread-compatible: one thread uses a
// Child at a time.
//
// The child starts with every signal unblocked (a SignalFd's mask is not
// inherited) and with the caller's descriptors, those opened O_CLOEXEC
// excepted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt {

// How a child ended.
struct ExitStatus {
  bool signaled = false;  // killed by a signal rather than exiting
  int code = 0;           // its exit status, when !signaled
  int signal = 0;         // the signal that ended it, when signaled

  // "with status N" or "on signal N".
  std::string Describe() const;
  // The shell's convention: code, or 128 + signal.
  int ShellCode() const { return signaled ? 128 + signal : code; }
};

struct SpawnOptions {
  // argv[0] is the program: a path (execv), or with search_path a name
  // looked up on PATH (execvp). Must not be empty.
  std::vector<std::string> argv;
  bool search_path = false;
  // setsid(2) in the child: a session and process group of its own, no
  // controlling terminal (a terminal's ^C or hang-up does not reach it).
  bool new_session = false;
  // Descriptors dup2(2)'d onto the child's stdin/stdout/stderr; -1 leaves
  // the caller's in place.
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  // When exec fails, the child writes "<exec_failure_prefix><strerror>\n"
  // to its stderr and exits with status 127.
  std::string exec_failure_prefix;
};

class Child {
 public:
  Child() = default;  // owns no process
  ~Child();
  Child(Child&& o) noexcept;
  Child& operator=(Child&& o) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // fork + exec as `options` says. A failure to fork is
  // ErrnoStatus("fork (starting <argv0>)"); a failure to exec shows as the
  // child's exit with status 127 (see exec_failure_prefix).
  static Result<Child> Spawn(const SpawnOptions& options);

  // The child's pid; -1 when this owns no process.
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  // waitpid(WNOHANG): the exit status once the child has exited (it is then
  // reaped and this owns no process), nullopt while it runs. A failure is
  // ErrnoStatus("waiting for <argv0> (pid N)"); kFailedPrecondition when
  // this owns no process.
  Result<std::optional<ExitStatus>> Poll();
  // Waits up to timeout for the exit (as Poll, checking every few ms);
  // nullopt when the child still runs at the end.
  Result<std::optional<ExitStatus>> WaitFor(std::chrono::milliseconds timeout);
  // Blocks until the child exits.
  Result<ExitStatus> Wait();

  // kill(2) with sig. ErrnoStatus("signalling <argv0> (pid N)");
  // kFailedPrecondition when this owns no process.
  Status Signal(int sig);

  // Gives the process up: it runs on, this owns no process, the destructor
  // leaves it alone. Returns its pid.
  pid_t Detach();

 private:
  Child(pid_t pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  std::string Label() const;  // "<argv0> (pid N)"
  Result<std::optional<ExitStatus>> Reap(bool block);

  pid_t pid_ = -1;
  std::string name_;  // argv[0], for messages
};

// Replaces this process with argv[0] (execv) and its arguments; returns only
// on failure: ErrnoStatus("exec <argv0>").
Status ExecReplace(const std::vector<std::string>& argv);

// The path of this process's executable (readlink of /proc/self/exe);
// ErrnoStatus("readlink /proc/self/exe") on failure.
Result<std::string> SelfExecutablePath();

// This machine's hostname (gethostname), "localhost" when it has none.
std::string HostName();

}  // namespace tierckpt
