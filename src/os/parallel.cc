// parallel.cc — see parallel.h.
#include "os/parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tierckpt {

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn) {
  const size_t count = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  if (count <= 1) {
    for (size_t i = 0; i < n; ++i) TC_RETURN_IF_ERROR(fn(i));
    return Status::Ok();
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  size_t failed_index = n;  // guarded by mu
  Status failure;           // guarded by mu
  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      Status s = fn(i);
      if (!s.ok()) {
        std::lock_guard lock(mu);
        if (i < failed_index) {
          failed_index = i;
          failure = std::move(s);
        }
        failed.store(true, std::memory_order_relaxed);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(count - 1);
  for (size_t t = 1; t < count; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace tierckpt
