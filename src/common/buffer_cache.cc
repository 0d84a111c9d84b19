// buffer_cache.cc — see buffer_cache.h.
#include "common/buffer_cache.h"

#include <utility>

namespace tierckpt {

BufferCache::Lease::Lease(Lease&& o) noexcept
    : cache_(std::exchange(o.cache_, nullptr)), bytes_(std::move(o.bytes_)), size_(std::exchange(o.size_, 0)) {}

BufferCache::Lease& BufferCache::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (cache_ != nullptr && bytes_ != nullptr) cache_->Give(std::move(bytes_), size_);
    cache_ = std::exchange(o.cache_, nullptr);
    bytes_ = std::move(o.bytes_);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

BufferCache::Lease::~Lease() {
  if (cache_ != nullptr && bytes_ != nullptr) cache_->Give(std::move(bytes_), size_);
}

BufferCache::Lease BufferCache::Take(size_t size) {
  {
    MutexLock lock(&mu_);
    auto it = idle_.lower_bound(size);
    if (it != idle_.end()) {
      const size_t got = it->first;
      std::unique_ptr<uint8_t[]> bytes = std::move(it->second);
      idle_.erase(it);
      idle_bytes_ -= got;
      return Lease(this, std::move(bytes), got);
    }
  }
  return Lease(this, std::unique_ptr<uint8_t[]>(new uint8_t[size == 0 ? 1 : size]), size);
}

void BufferCache::Give(std::unique_ptr<uint8_t[]> bytes, size_t size) {
  std::unique_ptr<uint8_t[]> freed;  // outside the lock
  MutexLock lock(&mu_);
  if (size > keep_bytes_ || keep_count_ == 0) {
    freed = std::move(bytes);
    return;
  }
  idle_.emplace(size, std::move(bytes));
  idle_bytes_ += size;
  while (idle_.size() > keep_count_ || idle_bytes_ > keep_bytes_) {
    auto largest = std::prev(idle_.end());
    idle_bytes_ -= largest->first;
    freed = std::move(largest->second);  // the previous one (if any) is freed here, under the lock: rare
    idle_.erase(largest);
  }
}

size_t BufferCache::idle_count() const {
  MutexLock lock(&mu_);
  return idle_.size();
}

size_t BufferCache::idle_bytes() const {
  MutexLock lock(&mu_);
  return idle_bytes_;
}

}  // namespace tierckpt
