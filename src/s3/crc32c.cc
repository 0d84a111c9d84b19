// crc32c.cc — see crc32c.h.
//
// Software: slicing-by-8 over eight 256-entry tables. Hardware (x86-64
// SSE4.2): the crc32 instruction has a latency of three cycles and a
// throughput of one, so the buffer is cut into three adjacent blocks whose
// CRCs run interleaved and are then joined with "shift by a block of zeros"
// operators (four table lookups each), as in Mark Adler's crc32c.c. The
// shift operators and Crc32cCombine multiply in GF(2)[x] modulo the
// polynomial (zlib's multmodp / x2nmodp). Every table is built at compile
// time.
#include "s3/crc32c.h"

#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace tierckpt::s3 {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // reflected 0x1EDC6F41

// a(x) * b(x) mod P(x), reflected bit order (bit 31 is x^0).
constexpr uint32_t MultModP(uint32_t a, uint32_t b) {
  if (a == 0) return 0;
  uint32_t m = 1u << 31;
  uint32_t p = 0;
  for (;;) {
    if (a & m) {
      p ^= b;
      if ((a & (m - 1)) == 0) break;
    }
    m >>= 1;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return p;
}

// kX2n[k] = x^(2^k) mod P, for every k x2nmodp can reach with a 64-bit n.
constexpr std::array<uint32_t, 67> kX2n = [] {
  std::array<uint32_t, 67> t{};
  uint32_t p = 1u << 30;  // x^1
  t[0] = p;
  for (size_t k = 1; k < t.size(); ++k) t[k] = p = MultModP(p, p);
  return t;
}();

// x^(n * 2^k) mod P.
constexpr uint32_t X2nModP(uint64_t n, unsigned k) {
  uint32_t p = 1u << 31;  // x^0
  while (n) {
    if (n & 1) p = MultModP(kX2n[k], p);
    n >>= 1;
    ++k;
  }
  return p;
}

// kSlice[0] is the classic byte table; kSlice[j][i] advances kSlice[j-1][i]
// by one more zero byte.
constexpr std::array<std::array<uint32_t, 256>, 8> kSlice = [] {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][i] = c;
  }
  for (size_t j = 1; j < 8; ++j) {
    for (uint32_t i = 0; i < 256; ++i) t[j][i] = (t[j - 1][i] >> 8) ^ t[0][t[j - 1][i] & 0xff];
  }
  return t;
}();

uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

#if defined(__x86_64__)

constexpr size_t kLong = 8192;  // bytes per stream in the long loop
constexpr size_t kShort = 256;  // bytes per stream in the short loop

using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

// Table form of "append `len` zero bytes to a raw CRC register": the
// operator is linear, so it is the xor of its images of the four bytes.
constexpr ShiftTable MakeShiftTable(size_t len) {
  const uint32_t op = X2nModP(len, 3);
  ShiftTable t{};
  for (size_t j = 0; j < 4; ++j) {
    for (uint32_t i = 0; i < 256; ++i) t[j][i] = MultModP(op, i << (8 * j));
  }
  return t;
}
constexpr ShiftTable kShiftLong = MakeShiftTable(kLong);
constexpr ShiftTable kShiftShort = MakeShiftTable(kShort);

uint32_t Shift(const ShiftTable& t, uint32_t crc) {
  return t[0][crc & 0xff] ^ t[1][(crc >> 8) & 0xff] ^ t[2][(crc >> 16) & 0xff] ^ t[3][crc >> 24];
}

// Three interleaved streams of `block` bytes each, while 3 * block remain.
__attribute__((target("sse4.2"))) inline void Interleaved(const unsigned char*& p, size_t& n, uint64_t& c0,
                                                          size_t block, const ShiftTable& shift) {
  while (n >= 3 * block) {
    uint64_t c1 = 0;
    uint64_t c2 = 0;
    const unsigned char* end = p + block;
    do {
      c0 = _mm_crc32_u64(c0, Load64(p));
      c1 = _mm_crc32_u64(c1, Load64(p + block));
      c2 = _mm_crc32_u64(c2, Load64(p + 2 * block));
      p += 8;
    } while (p < end);
    c0 = Shift(shift, static_cast<uint32_t>(c0)) ^ c1;
    c0 = Shift(shift, static_cast<uint32_t>(c0)) ^ c2;
    p += 2 * block;
    n -= 3 * block;
  }
}

__attribute__((target("sse4.2"))) uint32_t HardwareImpl(const unsigned char* p, size_t n, uint32_t crc) {
  uint64_t c0 = ~crc;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  Interleaved(p, n, c0, kLong, kShiftLong);
  Interleaved(p, n, c0, kShort, kShiftShort);
  while (n >= 8) {
    c0 = _mm_crc32_u64(c0, Load64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c0 = _mm_crc32_u8(static_cast<uint32_t>(c0), *p++);
    --n;
  }
  return ~static_cast<uint32_t>(c0);
}

#endif  // __x86_64__

}  // namespace

namespace internal {

uint32_t Crc32cSoftware(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  if constexpr (std::endian::native == std::endian::little) {
    while (size >= 8) {
      const uint64_t w = Load64(p) ^ c;
      c = kSlice[7][w & 0xff] ^ kSlice[6][(w >> 8) & 0xff] ^ kSlice[5][(w >> 16) & 0xff] ^
          kSlice[4][(w >> 24) & 0xff] ^ kSlice[3][(w >> 32) & 0xff] ^ kSlice[2][(w >> 40) & 0xff] ^
          kSlice[1][(w >> 48) & 0xff] ^ kSlice[0][w >> 56];
      p += 8;
      size -= 8;
    }
  }
  while (size > 0) {
    c = (c >> 8) ^ kSlice[0][(c ^ *p++) & 0xff];
    --size;
  }
  return ~c;
}

bool Crc32cHardwareAvailable() {
#if defined(__x86_64__)
  static const bool available = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return available;
#else
  return false;
#endif
}

uint32_t Crc32cHardware(const void* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  return HardwareImpl(static_cast<const unsigned char*>(data), size, crc);
#else
  return Crc32cSoftware(data, size, crc);
#endif
}

}  // namespace internal

uint32_t Crc32c(const void* data, size_t size, uint32_t crc) {
  if (size == 0) return crc;
  return internal::Crc32cHardwareAvailable() ? internal::Crc32cHardware(data, size, crc)
                                             : internal::Crc32cSoftware(data, size, crc);
}

uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  return MultModP(X2nModP(len_b, 3), crc_a) ^ crc_b;
}

std::string Crc32cBase64(uint32_t crc) {
  const unsigned char bytes[4] = {static_cast<unsigned char>(crc >> 24),
                                  static_cast<unsigned char>(crc >> 16), static_cast<unsigned char>(crc >> 8),
                                  static_cast<unsigned char>(crc)};
  unsigned char out[9] = {};  // 4 bytes → 8 characters + NUL
  const int n = EVP_EncodeBlock(out, bytes, 4);
  return std::string(reinterpret_cast<const char*>(out), n > 0 ? static_cast<size_t>(n) : 0);
}

}  // namespace tierckpt::s3
