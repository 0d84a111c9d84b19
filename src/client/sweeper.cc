#include "client/sweeper.h"

#include <utility>

namespace tierckpt::client {

Sweeper::Sweeper(std::shared_ptr<MappingCache> cache, std::chrono::milliseconds interval)
    : cache_(std::move(cache)), interval_(interval), thread_([this] { Run(); }) {}

Sweeper::~Sweeper() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void Sweeper::Run() {
  MutexLock lock(&mu_);
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + interval_;
    while (!stop_ && cv_.WaitUntil(deadline)) {
    }
    if (stop_) return;
    lock.Unlock();
    cache_->SweepDeleted();
    lock.Lock();
  }
}

}  // namespace tierckpt::client
