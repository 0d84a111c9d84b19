#include "client/stream_copy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tierckpt::client_internal {
namespace {

constexpr StreamKernel kKernels[] = {StreamKernel::kAvx2, StreamKernel::kSse2, StreamKernel::kMemcpy};

TEST(StreamCopyTest, TheBestKernelIsAvx2WhereTheCpuHasIt) {
#if defined(__x86_64__)
  const bool avx2 = __builtin_cpu_supports("avx2");
  EXPECT_EQ(BestStreamKernel(), avx2 ? StreamKernel::kAvx2 : StreamKernel::kSse2);
  EXPECT_TRUE(StreamKernelRuns(StreamKernel::kSse2));
#else
  EXPECT_EQ(BestStreamKernel(), StreamKernel::kMemcpy);
#endif
  EXPECT_TRUE(StreamKernelRuns(BestStreamKernel()));
  EXPECT_EQ(StreamKernelName(StreamKernel::kAvx2), "avx2");
}

// Every size around the kernels' thresholds (256 bytes, 64- and 128-byte blocks),
// from and to every alignment of a cache line: exactly the n bytes land, none
// around them is written.
TEST(StreamCopyTest, EveryKernelCopiesEverySizeAtEveryAlignmentExactly) {
  std::vector<uint64_t> sizes;
  for (uint64_t n = 0; n <= 400; ++n) sizes.push_back(n);
  for (uint64_t n : {511u, 512u, 513u, 4095u, 4096u, 4097u, 65536u + 33, (1u << 20) + 127}) sizes.push_back(n);
  const uint64_t largest = (1u << 20) + 127;
  std::vector<uint8_t> src(largest + 64);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<uint8_t> dst(largest + 256);
  for (StreamKernel kernel : kKernels) {
    if (!StreamKernelRuns(kernel)) continue;
    for (uint64_t n : sizes) {
      for (uint64_t dst_at = 64; dst_at < 128; dst_at += (n > 4096 ? 13 : 1)) {
        const uint64_t src_at = (dst_at * 7) % 64;
        std::fill(dst.begin(), dst.end(), uint8_t{0xEE});
        StreamCopy(kernel, dst.data() + dst_at, src.data() + src_at, n);
        StreamFence();
        ASSERT_TRUE(std::equal(src.begin() + src_at, src.begin() + src_at + n, dst.begin() + dst_at))
            << StreamKernelName(kernel) << " n=" << n << " dst_at=" << dst_at;
        ASSERT_EQ(dst[dst_at - 1], 0xEE) << StreamKernelName(kernel) << " wrote before, n=" << n;
        ASSERT_EQ(dst[dst_at + n], 0xEE) << StreamKernelName(kernel) << " wrote past, n=" << n;
      }
    }
  }
}

}  // namespace
}  // namespace tierckpt::client_internal
