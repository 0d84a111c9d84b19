#include "client/parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tierckpt::client {

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first;  // guarded by mu
  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      Status s = fn(i);
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first.ok()) first = std::move(s);
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  size_t extra = std::min<size_t>(n, static_cast<size_t>(std::max(threads, 1))) - (n > 0 ? 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return first;
}

}  // namespace tierckpt::client
