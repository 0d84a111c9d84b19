// process.cc — see process.h.
#include "os/process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "os/fd.h"
#include "os/fs_stat.h"

namespace tierckpt {
namespace {

ExitStatus FromWaitStatus(int wstatus) {
  ExitStatus s;
  if (WIFSIGNALED(wstatus)) {
    s.signaled = true;
    s.signal = WTERMSIG(wstatus);
  } else {
    s.code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 0;
  }
  return s;
}

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// After fork, in the child: only async-signal-safe calls until exec.
[[noreturn]] void RunChild(const SpawnOptions& o, char* const* argv) {
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (o.new_session) ::setsid();
  if (o.stdin_fd >= 0) ::dup2(o.stdin_fd, STDIN_FILENO);
  if (o.stdout_fd >= 0) ::dup2(o.stdout_fd, STDOUT_FILENO);
  if (o.stderr_fd >= 0) ::dup2(o.stderr_fd, STDERR_FILENO);
  if (o.search_path) {
    ::execvp(argv[0], argv);
  } else {
    ::execv(argv[0], argv);
  }
  const char* err = std::strerror(errno);
  WriteAll(STDERR_FILENO, o.exec_failure_prefix.data(), o.exec_failure_prefix.size());
  WriteAll(STDERR_FILENO, err, std::strlen(err));
  WriteAll(STDERR_FILENO, "\n", 1);
  ::_exit(127);
}

std::vector<char*> ArgvOf(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  return argv;
}

}  // namespace

std::string ExitStatus::Describe() const {
  return signaled ? "on signal " + std::to_string(signal) : "with status " + std::to_string(code);
}

Child::~Child() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    Reap(/*block=*/true).status().IgnoreError();  // nothing to report to from a destructor
  }
}

Child::Child(Child&& o) noexcept : pid_(std::exchange(o.pid_, -1)), name_(std::move(o.name_)) {}

Child& Child::operator=(Child&& o) noexcept {
  if (this != &o) {
    Child dropped(std::move(*this));  // kills and reaps what this owned
    pid_ = std::exchange(o.pid_, -1);
    name_ = std::move(o.name_);
  }
  return *this;
}

Result<Child> Child::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return InvalidArgument("starting a child process: no program given");
  // Everything the child needs is built before fork: it only calls
  // async-signal-safe functions.
  std::vector<char*> argv = ArgvOf(options.argv);
  const pid_t pid = ::fork();
  if (pid < 0) return ErrnoStatus("fork (starting " + options.argv[0] + ")");
  if (pid == 0) RunChild(options, argv.data());
  return Child(pid, options.argv[0]);
}

std::string Child::Label() const { return name_ + " (pid " + std::to_string(pid_) + ")"; }

Result<std::optional<ExitStatus>> Child::Reap(bool block) {
  if (pid_ <= 0) return FailedPrecondition("waiting for a child process: none is running");
  int wstatus = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &wstatus, block ? 0 : WNOHANG);
    if (r == pid_) break;
    if (r == 0) return std::optional<ExitStatus>();
    const int err = errno;
    if (err == EINTR) continue;
    Status s = ErrnoStatus("waiting for " + Label(), err);
    if (err == ECHILD) pid_ = -1;  // reaped elsewhere: nothing left to own
    return s;
  }
  pid_ = -1;
  return std::optional<ExitStatus>(FromWaitStatus(wstatus));
}

Result<std::optional<ExitStatus>> Child::Poll() { return Reap(/*block=*/false); }

Result<std::optional<ExitStatus>> Child::WaitFor(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    TC_ASSIGN_OR_RETURN(std::optional<ExitStatus> done, Poll());
    if (done.has_value() || std::chrono::steady_clock::now() >= deadline) return done;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<ExitStatus> Child::Wait() {
  TC_ASSIGN_OR_RETURN(std::optional<ExitStatus> done, Reap(/*block=*/true));
  return *done;
}

Status Child::Signal(int sig) {
  if (pid_ <= 0) return FailedPrecondition("signalling a child process: none is running");
  if (::kill(pid_, sig) != 0) return ErrnoStatus("signalling " + Label());
  return Status::Ok();
}

pid_t Child::Detach() { return std::exchange(pid_, -1); }

Status ExecReplace(const std::vector<std::string>& args) {
  if (args.empty()) return InvalidArgument("exec: no program given");
  std::vector<char*> argv = ArgvOf(args);
  ::execv(argv[0], argv.data());
  return ErrnoStatus("exec " + args[0]);
}

Result<std::string> SelfExecutablePath() { return ReadLink("/proc/self/exe"); }

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace tierckpt
