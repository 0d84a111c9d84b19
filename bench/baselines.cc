#include "baselines.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/checksum.h"
#include "os/fd.h"
#include "os/mapping.h"

namespace tierckpt::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBestOf = 3;
// The piece size of the chunked memcpy: CopyAndChecksum's chunk. glibc copies
// large blocks with non-temporal stores and pieces of this size with cached
// ones; which is faster depends on the machine, so both are measured.
constexpr size_t kPiece = 256 * 1024;

// Copies every object of layout from src to dst on `threads` threads, each
// object with one memcpy (piece == 0) or in pieces of `piece` bytes.
double TimedCopy(const Layout& layout, const uint8_t* src, uint8_t* dst, int threads, size_t piece = 0) {
  auto start = Clock::now();
  ParallelOver(layout.count, threads, [&](size_t i) {
    const uint64_t off = layout.Offset(i), size = layout.Size(i);
    const uint64_t step = piece == 0 ? size : piece;
    for (uint64_t done = 0; done < size; done += step) {
      std::memcpy(dst + off + done, src + off + done, std::min(step, size - done));
    }
  });
  return SecondsSince(start);
}

Measurement BestOf(std::string name, int threads, const std::function<double()>& run) {
  Measurement m{std::move(name), 0, threads, kBestOf, ""};
  for (int r = 0; r < kBestOf; ++r) {
    double s = run();
    if (r == 0 || s < m.seconds) m.seconds = s;
  }
  return m;
}

// Keeps the checksums observable so the compiler cannot drop the hashing.
std::atomic<uint64_t> g_sink{0};

}  // namespace

Result<std::vector<Measurement>> RunBaselines(const Layout& layout, const HostBuffer& src,
                                              const HostBuffer& dst, int threads) {
  std::vector<Measurement> out;
  const uint8_t* s = src.data();
  uint8_t* d = dst.data();

  std::vector<Measurement> variants;
  for (int t : {threads, 1}) {
    const std::string suffix = t == threads ? "" : "_1thread";
    variants.push_back(BestOf("memcpy_whole" + suffix, t, [&] { return TimedCopy(layout, s, d, t); }));
    variants.push_back(
        BestOf("memcpy_pieces" + suffix, t, [&] { return TimedCopy(layout, s, d, t, kPiece); }));
    if (threads == 1) break;
  }
  auto faster = [](const Measurement& a, const Measurement& b) { return a.seconds < b.seconds; };
  Measurement best = *std::min_element(variants.begin(), variants.end(), faster);
  best.detail = "fastest of " + std::to_string(variants.size()) + " memcpy variants: " + best.name;
  best.name = "memcpy_warm";
  out.push_back(best);
  out.insert(out.end(), variants.begin(), variants.end());
  out.push_back(BestOf("copy_checksum_warm", threads, [&] {
    auto start = Clock::now();
    ParallelOver(layout.count, threads, [&](size_t i) {
      Checksum c = CopyAndChecksum(d + layout.Offset(i), s + layout.Offset(i), layout.Size(i));
      g_sink.fetch_xor(c.value, std::memory_order_relaxed);
    });
    return SecondsSince(start);
  }));
  out.push_back(BestOf("checksum_only", threads, [&] {
    auto start = Clock::now();
    ParallelOver(layout.count, threads, [&](size_t i) {
      Checksum c = ComputeChecksum(s + layout.Offset(i), layout.Size(i));
      g_sink.fetch_xor(c.value, std::memory_order_relaxed);
    });
    return SecondsSince(start);
  }));

  {
    TC_ASSIGN_OR_RETURN(HostBuffer fresh, HostBuffer::Allocate(layout.total_bytes, "cold anonymous"));
    out.push_back({"memcpy_cold_anon", TimedCopy(layout, s, fresh.data(), threads), threads, 1, ""});
  }
  {
    UniqueFd fd(memfd_create("tc_bench_cold", MFD_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus("memfd_create for the cold shmem baseline");
    if (ftruncate(fd.get(), static_cast<off_t>(layout.total_bytes)) != 0) {
      return ErrnoStatus("ftruncate of the cold shmem baseline memfd to " +
                         std::to_string(layout.total_bytes) + " bytes");
    }
    TC_ASSIGN_OR_RETURN(Mapping m, Mapping::Map(fd.get(), layout.total_bytes,
                                                Mapping::Access::kReadWrite, /*populate=*/false,
                                                "cold shmem baseline memfd"));
    out.push_back({"memcpy_cold_shmem", TimedCopy(layout, s, m.data(), threads), threads, 1, ""});
  }
  return out;
}

const Measurement* Find(const std::vector<Measurement>& list, const std::string& name) {
  auto it = std::find_if(list.begin(), list.end(), [&](const Measurement& m) { return m.name == name; });
  return it == list.end() ? nullptr : &*it;
}

}  // namespace tierckpt::bench
