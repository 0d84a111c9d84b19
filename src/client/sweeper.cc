#include "client/sweeper.h"

#include <utility>

namespace tierckpt::client {

Sweeper::Sweeper(std::shared_ptr<MappingCache> cache, std::chrono::milliseconds interval)
    : cache_(std::move(cache)), interval_(interval), thread_([this] { Run(); }) {}

Sweeper::~Sweeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Sweeper::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval_, [this] { return stop_; })) {
    lock.unlock();
    cache_->SweepDeleted();
    lock.lock();
  }
}

}  // namespace tierckpt::client
