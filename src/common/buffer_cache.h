// buffer_cache.h — a few large byte buffers kept for reuse, so that a
// stream received again and again (a parity holder's fold pulls a member's
// objects into one, decision 164) lands in pages already faulted in rather
// than in fresh ones each time (on the bench VM, 12% of a holder's CPU was
// the kernel clearing fresh pages for those buffers).
//
// Take(size) hands out the smallest idle buffer of at least size bytes, or
// a new one (not zero-filled); the Lease gives it back when destroyed. Idle
// buffers are kept up to keep_count of them and keep_bytes in all (the
// largest given back beyond that is freed); a buffer above keep_bytes is
// never kept.
//
// Thread-safe. Leases must not outlive the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/mutex.h"

namespace tierckpt {

class BufferCache {
 public:
  BufferCache(size_t keep_bytes, size_t keep_count) : keep_bytes_(keep_bytes), keep_count_(keep_count) {}
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&& o) noexcept;
    ~Lease();
    uint8_t* data() const { return bytes_.get(); }
    size_t size() const { return size_; }

   private:
    friend class BufferCache;
    Lease(BufferCache* cache, std::unique_ptr<uint8_t[]> bytes, size_t size)
        : cache_(cache), bytes_(std::move(bytes)), size_(size) {}
    BufferCache* cache_ = nullptr;
    std::unique_ptr<uint8_t[]> bytes_;
    size_t size_ = 0;
  };

  // A buffer of at least size bytes (size() says how many); its bytes are
  // whatever it held.
  Lease Take(size_t size) EXCLUDES(mu_);

  // Idle buffers and their bytes now.
  size_t idle_count() const EXCLUDES(mu_);
  size_t idle_bytes() const EXCLUDES(mu_);

 private:
  void Give(std::unique_ptr<uint8_t[]> bytes, size_t size) EXCLUDES(mu_);

  const size_t keep_bytes_;
  const size_t keep_count_;
  mutable Mutex mu_;
  std::multimap<size_t, std::unique_ptr<uint8_t[]>> idle_ GUARDED_BY(mu_);  // by size
  size_t idle_bytes_ GUARDED_BY(mu_) = 0;
};

}  // namespace tierckpt
