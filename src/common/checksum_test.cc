#include "common/checksum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

// The reference: Debian's libxxhash (its own build, linked, not inlined), against which
// the build this library picks (decision 155) must agree byte for byte.
#include <xxhash.h>

#include "common/xxh3_avx2.h"

namespace tierckpt {
namespace {

TEST(ChecksumTest, KnownVectorOfEmptyInput) {
  // XXH3_64bits("") with seed 0, as printed by `xxhsum -H3 /dev/null`.
  EXPECT_EQ(ComputeChecksum("", 0).ToString(), "xxh3-64:2d06800538d394c2");
}

TEST(ChecksumTest, ParseRoundTripAndRejects) {
  Checksum c = ComputeChecksum("hello", 5);
  auto parsed = Checksum::Parse(c.ToString());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, c);
  EXPECT_FALSE(Checksum::Parse("md5:00").ok());
  EXPECT_FALSE(Checksum::Parse("xxh3-64:123").ok());
  EXPECT_FALSE(Checksum::Parse("xxh3-64:ABCDEF0123456789").ok());
}

TEST(ChecksumTest, StreamingAndCopyMatchOneShot) {
  std::vector<uint8_t> src(3 * 1024 * 1024 + 17);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 3);
  Checksum whole = ComputeChecksum(src.data(), src.size());
  Hasher h;
  h.Update(src.data(), 1000);
  h.Update(src.data() + 1000, src.size() - 1000);
  EXPECT_EQ(h.Finish(), whole);
  std::vector<uint8_t> dst(src.size());
  EXPECT_EQ(CopyAndChecksum(dst.data(), src.data(), src.size()), whole);
  EXPECT_EQ(dst, src);
}

// Lengths through each of XXH3's code paths: 0-16, 17-128, 129-240 bytes, one
// stripe, one block (1,024 bytes with the default secret), many blocks, odd tails.
const size_t kLengths[] = {0,   1,   3,   4,   8,    9,    16,   17,   100,   128,     129,    200,
                           240, 241, 255, 256, 1023, 1024, 1025, 4096, 65537, 1 << 20, 3000017};

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(gen());
  return v;
}

TEST(ChecksumTest, EveryLengthMatchesTheSystemLibxxhash) {
  for (size_t n : kLengths) {
    const std::vector<uint8_t> v = RandomBytes(n, static_cast<uint32_t>(n));
    EXPECT_EQ(ComputeChecksum(v.data(), n).value, XXH3_64bits(v.data(), n)) << n << " bytes";
  }
}

TEST(ChecksumTest, StreamingInUnevenPiecesMatchesTheSystemLibxxhash) {
  const std::vector<uint8_t> v = RandomBytes(3000017, 5);
  const size_t pieces[] = {1, 7, 64, 255, 256, 1000, 4096, 65536, 524288};
  for (size_t piece : pieces) {
    Hasher h;
    for (size_t at = 0; at < v.size(); at += piece) h.Update(v.data() + at, std::min(piece, v.size() - at));
    EXPECT_EQ(h.Finish().value, XXH3_64bits(v.data(), v.size())) << "pieces of " << piece;
  }
  std::vector<uint8_t> dst(v.size());
  EXPECT_EQ(CopyAndChecksum(dst.data(), v.data(), v.size()).value, XXH3_64bits(v.data(), v.size()));
  EXPECT_EQ(dst, v);
}

TEST(ChecksumTest, TheAvx2BuildIsTakenWhereTheCpuHasIt) {
#if TIERCKPT_XXH3_AVX2
  const bool avx2 = __builtin_cpu_supports("avx2");
  EXPECT_EQ(ChecksumKernel(), avx2 ? "avx2" : "baseline");
  if (!avx2) GTEST_SKIP() << "this CPU has no AVX2: the baseline build is the only one to run";
  for (size_t n : kLengths) {
    const std::vector<uint8_t> v = RandomBytes(n, static_cast<uint32_t>(n) + 1);
    EXPECT_EQ(xxh3_avx2::Hash(v.data(), n), XXH3_64bits(v.data(), n)) << n << " bytes";
  }
#else
  EXPECT_EQ(ChecksumKernel(), "baseline");
#endif
}

}  // namespace
}  // namespace tierckpt
