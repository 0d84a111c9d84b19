// s3_parallel.cc — see s3_parallel.h.
#include "s3/s3_parallel.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace tierckpt::s3 {

Status ParallelFor(size_t count, int concurrency, const std::function<Status(size_t)>& task) {
  const size_t threads = std::min<size_t>(count, static_cast<size_t>(std::max(1, concurrency)));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) TC_RETURN_IF_ERROR(task(i));
    return Status::Ok();
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  size_t failed_index = count;  // guarded by mu
  Status failure;               // guarded by mu
  auto worker = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const size_t i = next.fetch_add(1);
      if (i >= count) return;
      Status s = task(i);
      if (!s.ok()) {
        std::lock_guard lock(mu);
        if (i < failed_index) {
          failed_index = i;
          failure = std::move(s);
        }
        failed.store(true);
      }
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return failure;
}

}  // namespace tierckpt::s3
