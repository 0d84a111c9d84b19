#include "common/checksum.h"

// Inline build: the hash is on the data path, and this lets the compiler
// specialise it; libxxhash-dev provides the header. This file's build is the
// CPU baseline (SSE2 on x86-64); xxh3_avx2.cc is the AVX2 build, taken when
// the CPU has it (decision 155).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/xxh3_avx2.h"

namespace tierckpt {
namespace {
constexpr std::string_view kXxh3Prefix = "xxh3-64:";
constexpr size_t kCopyChunk = 512 * 1024;  // fits L2; the hash re-reads from cache

// Whether this CPU runs the AVX2 build: decided once, the first time a hash runs.
bool UseAvx2() {
#if TIERCKPT_XXH3_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2;
#else
  return false;
#endif
}

uint64_t Hash(const void* data, size_t size) {
#if TIERCKPT_XXH3_AVX2
  if (UseAvx2()) return xxh3_avx2::Hash(data, size);
#endif
  return XXH3_64bits(data, size);
}

}  // namespace

std::string_view ChecksumKernel() { return UseAvx2() ? "avx2" : "baseline"; }

std::string Checksum::ToString() const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "xxh3-64:%016" PRIx64, value);
  return buf;
}

Result<Checksum> Checksum::Parse(std::string_view text) {
  if (text.substr(0, kXxh3Prefix.size()) != kXxh3Prefix) {
    return InvalidArgument("checksum \"" + std::string(text.substr(0, 40)) +
                           "\" has an unknown algorithm; expected \"xxh3-64:<16 hex digits>\"");
  }
  std::string_view hex = text.substr(kXxh3Prefix.size());
  if (hex.size() != 16) {
    return InvalidArgument("checksum \"" + std::string(text.substr(0, 40)) +
                           "\" must have exactly 16 hex digits after \"xxh3-64:\"");
  }
  uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return InvalidArgument("checksum \"" + std::string(text.substr(0, 40)) +
                             "\" has a character that is not a lowercase hex digit");
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return Checksum{v};
}

Checksum ComputeChecksum(const void* data, size_t size) { return Checksum{Hash(data, size)}; }

struct Hasher::State {
  XXH3_state_t st;
};

Hasher::Hasher() : state_(std::make_unique<State>()) { XXH3_64bits_reset(&state_->st); }
Hasher::~Hasher() = default;

void Hasher::Update(const void* data, size_t size) {
#if TIERCKPT_XXH3_AVX2
  if (UseAvx2()) {
    xxh3_avx2::Update(&state_->st, data, size);
    return;
  }
#endif
  XXH3_64bits_update(&state_->st, data, size);
}

Checksum Hasher::Finish() const { return Checksum{XXH3_64bits_digest(&state_->st)}; }

Checksum CopyAndChecksum(void* dst, const void* src, size_t size) {
  Hasher h;
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t off = 0; off < size; off += kCopyChunk) {
    size_t n = size - off < kCopyChunk ? size - off : kCopyChunk;
    std::memcpy(d + off, s + off, n);
    h.Update(d + off, n);
  }
  return h.Finish();
}

}  // namespace tierckpt
