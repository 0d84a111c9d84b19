// work_queue.h — a fixed set of threads running submitted tasks in FIFO order.
//
// Used by the verifier (hashing sealed objects) and the persister. Stop()
// lets the threads finish the task each is running, discards tasks not yet
// started (their owners must tolerate that: pending work is recorded on disk
// or in the memory tier's index, not only in the queue), and joins.
//
// Thread-safe. Tasks must not call Stop() on their own queue.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace tierckpt::agent {

class WorkQueue {
 public:
  // on_thread_start (may be empty) runs first in each thread, before any
  // task: the agent lowers its background threads' priority there.
  WorkQueue(std::string name, int threads, std::function<void()> on_thread_start = {});
  ~WorkQueue();  // Stop()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues task; returns false (and drops it) after Stop().
  bool Submit(std::function<void()> task);
  void Stop();

  size_t queued() const;   // submitted, not started
  size_t running() const;  // started, not finished
  // Blocks until nothing is queued or running (tests).
  void Drain();

 private:
  void Loop();

  const std::string name_;
  Mutex stop_mu_;  // serialises Stop()
  mutable Mutex mu_;
  CondVar cv_{&mu_};       // signalled on Submit and Stop
  CondVar idle_cv_{&mu_};  // signalled when a task finishes
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  size_t running_ GUARDED_BY(mu_) = 0;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace tierckpt::agent
