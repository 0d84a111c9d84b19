#include "common/work_queue.h"

namespace tierckpt::agent {

WorkQueue::WorkQueue(std::string name, int threads, std::function<void()> on_thread_start)
    : name_(std::move(name)) {
  if (threads < 1) threads = 1;
  threads_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, on_thread_start] {
      if (on_thread_start) on_thread_start();
      Loop();
    });
  }
}

WorkQueue::~WorkQueue() { Stop(); }

bool WorkQueue::Submit(std::function<void()> task) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.Signal();
  return true;
}

void WorkQueue::Stop() {
  MutexLock stop_lock(&stop_mu_);
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    tasks_.clear();
  }
  cv_.SignalAll();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  idle_cv_.SignalAll();
}

size_t WorkQueue::queued() const {
  MutexLock lock(&mu_);
  return tasks_.size();
}

size_t WorkQueue::running() const {
  MutexLock lock(&mu_);
  return running_;
}

void WorkQueue::Drain() {
  MutexLock lock(&mu_);
  while (!tasks_.empty() || running_ != 0) idle_cv_.Wait();
}

void WorkQueue::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      MutexLock lock(&mu_);
      while (!stopping_ && tasks_.empty()) cv_.Wait();
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    {
      MutexLock lock(&mu_);
      --running_;
    }
    idle_cv_.SignalAll();
  }
}

}  // namespace tierckpt::agent
