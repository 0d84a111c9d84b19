// mutex.h — the mutex, scoped lock and condition variable of the project:
// std::mutex and std::condition_variable with the capability attributes of
// common/thread_annotations.h, so that clang checks every GUARDED_BY and
// REQUIRES (leveldb's port::Mutex / port::CondVar, absl::Mutex's shape).
//
// Mutex: not recursive; Lock/Unlock, or a MutexLock for a scope. AssertHeld
// only tells the analysis (no run-time check).
// MutexLock: holds the mutex from construction to destruction; Unlock()
// and Lock() release and retake it inside the scope (to run I/O unlocked).
// CondVar: bound to one Mutex, which the caller of a Wait holds; Wait
// releases it while blocked and holds it again on return. Spurious wake-ups
// happen: wait in a loop on the condition. (As leveldb's port::CondVar, the
// waits carry no annotation: the analysis cannot tell which Mutex a CondVar
// is bound to. The guarded reads of the loop's condition are checked.)
// Thread-safe (that is what they are for); none is copyable or movable.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "common/thread_annotations.h"

namespace tierckpt {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  bool TryLock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  void AssertHeld() ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_->Unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Releases the mutex before the scope ends; Lock() takes it again.
  void Unlock() RELEASE() {
    held_ = false;
    mu_->Unlock();
  }
  void Lock() ACQUIRE() {
    mu_->Lock();
    held_ = true;
  }

 private:
  Mutex* const mu_;
  bool held_ = true;
};

class CondVar {
 public:
  explicit CondVar(Mutex* mu) : mu_(mu) {}
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Blocks until signalled (or spuriously woken).
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // The same, until deadline at the latest; false when it passed.
  template <class Clock, class Duration>
  bool WaitUntil(const std::chrono::time_point<Clock, Duration>& deadline) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  // The same for at most timeout; false when it ran out.
  template <class Rep, class Period>
  bool WaitFor(const std::chrono::duration<Rep, Period>& timeout) {
    std::unique_lock<std::mutex> lock(mu_->mu_, std::adopt_lock);
    const bool signalled = cv_.wait_for(lock, timeout) == std::cv_status::no_timeout;
    lock.release();
    return signalled;
  }
  void Signal() { cv_.notify_one(); }
  void SignalAll() { cv_.notify_all(); }

 private:
  Mutex* const mu_;
  std::condition_variable cv_;
};

}  // namespace tierckpt
