#include "bench_util.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <utility>

#include "os/fd.h"
#include "os/parallel.h"

namespace tierckpt::bench {

HostBuffer::HostBuffer(HostBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Result<HostBuffer> HostBuffer::Allocate(size_t size, std::string_view what) {
  HostBuffer b;
  if (size == 0) return b;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus("allocating the " + std::string(what) + " buffer of " + std::to_string(size) +
                       " bytes (free memory or lower --total)");
  }
  b.data_ = static_cast<uint8_t*>(p);
  b.size_ = size;
  return b;
}

void HostBuffer::Touch() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t i = 0; i < size_; i += page) data_[i] = 1;
}

void HostBuffer::Reset() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

Result<Layout> Layout::Make(uint64_t total_bytes, uint64_t object_size) {
  if (total_bytes == 0 || object_size == 0) {
    return InvalidArgument("total bytes (" + std::to_string(total_bytes) + ") and object size (" +
                           std::to_string(object_size) + ") must both be > 0");
  }
  Layout l;
  l.total_bytes = total_bytes;
  l.object_size = object_size;
  l.count = static_cast<size_t>((total_bytes + object_size - 1) / object_size);
  return l;
}

uint64_t Layout::Size(size_t i) const {
  return std::min<uint64_t>(object_size, total_bytes - Offset(i));
}

std::string Layout::Name(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "obj_%06zu.bin", i);
  return buf;
}

void FillNonZero(uint8_t* dst, size_t size, uint64_t seed) {
  uint64_t x = seed;
  size_t i = 0;
  auto next = [&x] {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (; i + 8 <= size; i += 8) {
    uint64_t z = next();
    std::memcpy(dst + i, &z, 8);
  }
  for (; i < size; ++i) dst[i] = static_cast<uint8_t>(next());
  for (i = 0; i < size; ++i) {
    if (dst[i] == 0) dst[i] = 0xa5;
  }
}

void ParallelOver(size_t n, int threads, const std::function<void(size_t)>& fn) {
  (void)ParallelFor(n, threads, [&](size_t i) {
    fn(i);
    return Status::Ok();
  });
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double Gbps(uint64_t bytes, double seconds) {
  return seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
}

}  // namespace tierckpt::bench
