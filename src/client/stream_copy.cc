// Non-temporal copies: an AVX2 kernel (built for AVX2 by a target attribute
// and run only where the CPU has it) and an SSE2 one (the x86-64 baseline).
#include "client/stream_copy.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#define TIERCKPT_STREAM_X86 1
#else
#define TIERCKPT_STREAM_X86 0
#endif

namespace tierckpt::client_internal {
namespace {

// Below this many bytes a copy is plain memcpy: aligning the destination and the
// loop's set-up cost more than streaming saves.
constexpr uint64_t kStreamMin = 256;

// The bytes up to dst's next multiple of `align`, copied plainly: the kernels' stores are aligned.
void CopyHead(uint8_t*& dst, const uint8_t*& src, uint64_t& n, uintptr_t align) {
  const uint64_t head = (align - (reinterpret_cast<uintptr_t>(dst) & (align - 1))) & (align - 1);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
}

#if TIERCKPT_STREAM_X86
void CopySse2(uint8_t* dst, const uint8_t* src, uint64_t n) {
  if (n >= kStreamMin) {
    CopyHead(dst, src, n, 16);
    const uint64_t body = n & ~uint64_t{63};
    for (uint64_t i = 0; i < body; i += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
    }
    dst += body;
    src += body;
    n -= body;
  }
  std::memcpy(dst, src, n);
}

__attribute__((target("avx2"))) void CopyAvx2(uint8_t* dst, const uint8_t* src, uint64_t n) {
  if (n >= kStreamMin) {
    CopyHead(dst, src, n, 32);
    const uint64_t body = n & ~uint64_t{127};
    for (uint64_t i = 0; i < body; i += 128) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 64));
      const __m256i d = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 96));
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
    }
    dst += body;
    src += body;
    n -= body;
  }
  std::memcpy(dst, src, n);
}
#endif

}  // namespace

bool StreamKernelRuns(StreamKernel kernel) {
  if (kernel == StreamKernel::kMemcpy) return true;
#if TIERCKPT_STREAM_X86
  if (kernel == StreamKernel::kSse2) return true;
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return kernel == StreamKernel::kAvx2 && avx2;
#else
  return false;
#endif
}

StreamKernel BestStreamKernel() {
  static const StreamKernel best = StreamKernelRuns(StreamKernel::kAvx2)   ? StreamKernel::kAvx2
                                   : StreamKernelRuns(StreamKernel::kSse2) ? StreamKernel::kSse2
                                                                           : StreamKernel::kMemcpy;
  return best;
}

std::string_view StreamKernelName(StreamKernel kernel) {
  switch (kernel) {
    case StreamKernel::kAvx2:
      return "avx2";
    case StreamKernel::kSse2:
      return "sse2";
    case StreamKernel::kMemcpy:
      return "memcpy";
  }
  return "unknown";
}

void StreamCopy(StreamKernel kernel, uint8_t* dst, const uint8_t* src, uint64_t n) {
#if TIERCKPT_STREAM_X86
  if (kernel == StreamKernel::kAvx2) return CopyAvx2(dst, src, n);
  if (kernel == StreamKernel::kSse2) return CopySse2(dst, src, n);
#else
  (void)kernel;
#endif
  std::memcpy(dst, src, n);
}

void StreamCopy(uint8_t* dst, const uint8_t* src, uint64_t n) { StreamCopy(BestStreamKernel(), dst, src, n); }

void StreamFence() {
#if TIERCKPT_STREAM_X86
  _mm_sfence();
#endif
}

}  // namespace tierckpt::client_internal
