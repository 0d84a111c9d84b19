// s3_retry.cc — see s3_retry.h.
#include "s3/s3_retry.h"

#include <algorithm>
#include <random>
#include <thread>

namespace tierckpt::s3 {
namespace {

uint64_t ThreadRandom() {
  thread_local std::mt19937_64 engine(std::random_device{}());
  return engine();
}

}  // namespace

RetryPolicy::RetryPolicy(RetryOptions options) : options_(std::move(options)) {}

std::chrono::milliseconds RetryPolicy::Ceiling(int retry) const {
  const int64_t base = std::max<int64_t>(1, options_.base.count());
  const int64_t cap = std::max<int64_t>(base, options_.cap.count());
  int64_t ceiling = base;
  for (int i = 1; i < retry && ceiling < cap; ++i) ceiling *= 2;
  return std::chrono::milliseconds(std::min(ceiling, cap));
}

std::chrono::milliseconds RetryPolicy::Delay(int retry) const {
  const uint64_t r = options_.random ? options_.random() : ThreadRandom();
  const uint64_t ceiling = static_cast<uint64_t>(Ceiling(retry).count());
  return std::chrono::milliseconds(static_cast<int64_t>(r % (ceiling + 1)));
}

void RetryPolicy::Backoff(int retry) const {
  const std::chrono::milliseconds d = Delay(retry);
  if (options_.sleep) {
    options_.sleep(d);
  } else {
    std::this_thread::sleep_for(d);
  }
}

}  // namespace tierckpt::s3
