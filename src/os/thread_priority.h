// thread_priority.h — lowering the CPU and I/O priority of the calling
// thread, for the agent's background work (persist, replication queue,
// verify, preallocation), so that training on the same cores runs first.
//
//   kNormal  nothing is changed (the process's nice value and policy).
//   kLow     nice 10 (setpriority on the thread's tid: Linux applies it to
//            that thread only) and I/O class best-effort, level 7 (lowest).
//            Such a thread still gets ~10% of a core a nice-0 thread keeps
//            busy (CFS weights 110 vs 1024), so its work finishes.
//   kIdle    SCHED_IDLE (runs only on a core nothing else wants) and I/O
//            class idle. Work can starve while training keeps every core busy.
//
// A thread can lower its priority but, unprivileged, not raise it back:
// call it once at the start of a background thread.
//
// Errors: kInvalidArgument for an unknown name; ErrnoStatus of the failing
// call (setpriority, sched_setscheduler, ioprio_set) naming the thread's tid.
// Thread-safe (each call affects only the calling thread).
#pragma once

#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

enum class ThreadPriority { kNormal, kLow, kIdle };

// "normal" | "low" | "idle".
Result<ThreadPriority> ParseThreadPriority(std::string_view text);
std::string_view ThreadPriorityName(ThreadPriority p);

// Applies p to the calling thread (kNormal: Ok, nothing changed). On error
// the thread may be partly lowered (CPU but not I/O); it is never raised.
Status SetThisThreadPriority(ThreadPriority p);

// What the calling thread runs with, as the kernel reports it.
struct ThreadPriorityState {
  int nice = 0;
  int policy = 0;    // SCHED_OTHER, SCHED_IDLE, ...
  int io_class = 0;  // 0 none (follows nice), 1 real time, 2 best effort, 3 idle
  int io_level = 0;  // 0..7 within the class
};
Result<ThreadPriorityState> ThisThreadPriority();

// SetThisThreadPriority for a background thread named `thread` ("persist"):
// a failure is logged at warn once per process with its reason (later
// failures are not logged), never fatal: the work runs at normal priority.
void LowerThisThreadForBackgroundWork(ThreadPriority p, std::string_view thread);

}  // namespace tierckpt
