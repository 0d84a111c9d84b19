// bench_util.h — small building blocks of the benchmark program tc_bench.
//
// HostBuffer owns an anonymous private mapping (the benchmark's source and
// destination buffers, and the fresh memory of the cold-memcpy baseline).
// Layout describes how a workload's bytes are cut into objects. The rest are
// pure helpers: a deterministic non-zero fill, a parallel loop over objects
// that mirrors how the client spreads copies across threads, and statistics.
//
// Thread safety: HostBuffer is thread-compatible (threads may write disjoint
// ranges); the free functions are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::bench {

// An anonymous MAP_PRIVATE mapping of `size` bytes. Pages are not touched by
// Allocate(); call Touch() to make them resident before timing.
class HostBuffer {
 public:
  HostBuffer() = default;
  ~HostBuffer() { Reset(); }
  HostBuffer(HostBuffer&& o) noexcept;
  HostBuffer& operator=(HostBuffer&& o) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  // kResourceExhausted naming the size when mmap fails.
  static Result<HostBuffer> Allocate(size_t size, std::string_view what);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Writes one byte per page so every page is resident.
  void Touch();
  void Reset();

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Objects [0, count) of sizes object_size, the last one possibly shorter, laid
// out back to back from offset 0.
struct Layout {
  uint64_t total_bytes = 0;
  uint64_t object_size = 0;
  size_t count = 0;

  // total_bytes > 0 and object_size > 0, else kInvalidArgument.
  static Result<Layout> Make(uint64_t total_bytes, uint64_t object_size);
  uint64_t Offset(size_t i) const { return static_cast<uint64_t>(i) * object_size; }
  uint64_t Size(size_t i) const;
  // "obj_000042.bin".
  static std::string Name(size_t i);
};

// Fills dst with a splitmix64 stream from seed; no byte is zero.
void FillNonZero(uint8_t* dst, size_t size, uint64_t seed);

// Calls fn(i) for every i in [0, n) on `threads` threads (the caller's
// included), taking indices from a shared counter: os/parallel.h's
// ParallelFor, the one the client uses.
void ParallelOver(size_t n, int threads, const std::function<void(size_t)>& fn);

// Seconds since `start` on the steady clock.
double SecondsSince(std::chrono::steady_clock::time_point start);
// The median (mean of the two middle values for an even count); 0 if empty.
double Median(std::vector<double> values);
// bytes / seconds / 1e9; 0 if seconds <= 0.
double Gbps(uint64_t bytes, double seconds);

}  // namespace tierckpt::bench
