// thread_priority.cc — see thread_priority.h.
#include "os/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "common/log.h"
#include "os/fd.h"

namespace tierckpt {
namespace {

// linux/ioprio.h, which glibc does not wrap.
constexpr int kIoprioWhoProcess = 1;  // a tid with per-thread I/O contexts
constexpr int kIoprioClassShift = 13;
constexpr int kIoprioClassBestEffort = 2;
constexpr int kIoprioClassIdle = 3;
constexpr int kLowNice = 10;

int IoprioValue(int io_class, int level) { return (io_class << kIoprioClassShift) | level; }

pid_t ThisTid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

std::string TidLabel(pid_t tid) { return "thread " + std::to_string(tid); }

Status SetIoprio(pid_t tid, int io_class, int level) {
  if (::syscall(SYS_ioprio_set, kIoprioWhoProcess, tid, IoprioValue(io_class, level)) != 0) {
    return ErrnoStatus("ioprio_set(class " + std::to_string(io_class) + ", level " + std::to_string(level) +
                       ") of " + TidLabel(tid));
  }
  return Status::Ok();
}

}  // namespace

Result<ThreadPriority> ParseThreadPriority(std::string_view text) {
  if (text == "normal") return ThreadPriority::kNormal;
  if (text == "low") return ThreadPriority::kLow;
  if (text == "idle") return ThreadPriority::kIdle;
  return InvalidArgument("background priority \"" + std::string(text.substr(0, 40)) +
                         "\" is unknown; use normal, low (nice 10, I/O best-effort 7) or idle (SCHED_IDLE, "
                         "I/O idle)");
}

std::string_view ThreadPriorityName(ThreadPriority p) {
  switch (p) {
    case ThreadPriority::kNormal:
      return "normal";
    case ThreadPriority::kLow:
      return "low";
    case ThreadPriority::kIdle:
      return "idle";
  }
  return "normal";
}

Status SetThisThreadPriority(ThreadPriority p) {
  const pid_t tid = ThisTid();
  switch (p) {
    case ThreadPriority::kNormal:
      return Status::Ok();
    case ThreadPriority::kLow: {
      errno = 0;
      const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
      if (nice == -1 && errno != 0) return ErrnoStatus("getpriority of " + TidLabel(tid));
      // Only ever lower: a thread already nicer than 10 stays so.
      if (nice < kLowNice && ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), kLowNice) != 0) {
        return ErrnoStatus("setpriority(nice " + std::to_string(kLowNice) + ") of " + TidLabel(tid));
      }
      return SetIoprio(tid, kIoprioClassBestEffort, 7);
    }
    case ThreadPriority::kIdle: {
      sched_param param{};
      param.sched_priority = 0;
      if (::sched_setscheduler(tid, SCHED_IDLE, &param) != 0) {
        return ErrnoStatus("sched_setscheduler(SCHED_IDLE) of " + TidLabel(tid));
      }
      return SetIoprio(tid, kIoprioClassIdle, 0);
    }
  }
  return InvalidArgument("unknown ThreadPriority");
}

Result<ThreadPriorityState> ThisThreadPriority() {
  const pid_t tid = ThisTid();
  ThreadPriorityState s;
  errno = 0;
  s.nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  if (s.nice == -1 && errno != 0) return ErrnoStatus("getpriority of " + TidLabel(tid));
  s.policy = ::sched_getscheduler(tid);
  if (s.policy < 0) return ErrnoStatus("sched_getscheduler of " + TidLabel(tid));
  const long io = ::syscall(SYS_ioprio_get, kIoprioWhoProcess, tid);
  if (io < 0) return ErrnoStatus("ioprio_get of " + TidLabel(tid));
  s.io_class = static_cast<int>(io >> kIoprioClassShift);
  s.io_level = static_cast<int>(io & ((1 << kIoprioClassShift) - 1));
  return s;
}

void LowerThisThreadForBackgroundWork(ThreadPriority p, std::string_view thread) {
  Status s = SetThisThreadPriority(p);
  if (s.ok()) return;
  static std::atomic<bool> warned{false};
  if (warned.exchange(true)) return;
  Log(LogLevel::kWarn, "background_priority")
      .Kv("thread", thread)
      .Kv("wanted", ThreadPriorityName(p))
      .Kv("why",
          "could not lower the priority of a background thread; it runs at normal priority "
          "(later failures are not logged)")
      .Err(s);
}

}  // namespace tierckpt
