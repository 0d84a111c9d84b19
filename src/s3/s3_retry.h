// s3_retry.h — when to try an S3 request again: capped exponential backoff
// with full jitter (the AWS SDKs' standard mode).
//
// Before retry n (n = 1 for the second attempt) the caller sleeps a uniformly
// random time in [0, min(cap, base * 2^(n-1))]. Sleep and randomness are
// injectable so tests run instantly and deterministically.
//
// Thread safety: RetryPolicy is const after construction and may be shared;
// the default random source is thread-local.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

namespace tierckpt::s3 {

struct RetryOptions {
  // Total tries per request, the first included (S3Config::max_attempts).
  int max_attempts = 6;
  std::chrono::milliseconds base{100};
  std::chrono::milliseconds cap{10000};
  // Sleeps for the given time; empty = std::this_thread::sleep_for.
  std::function<void(std::chrono::milliseconds)> sleep;
  // Uniform 64-bit random numbers; empty = a thread-local std::mt19937_64.
  std::function<uint64_t()> random;
};

class RetryPolicy {
 public:
  explicit RetryPolicy(RetryOptions options = {});

  int max_attempts() const { return options_.max_attempts; }
  // The upper bound of the delay before retry n (n >= 1): min(cap, base * 2^(n-1)).
  std::chrono::milliseconds Ceiling(int retry) const;
  // A full-jitter delay before retry n: uniform in [0, Ceiling(n)].
  std::chrono::milliseconds Delay(int retry) const;
  // Sleeps Delay(retry).
  void Backoff(int retry) const;

 private:
  // Const after construction.
  const RetryOptions options_;
};

}  // namespace tierckpt::s3
