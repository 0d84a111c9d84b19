// crc32c_test.cc — CRC-32C against published vectors (the CRC catalogue's
// check value and the iSCSI vectors of RFC 3720 appendix B.4), hardware
// against software, streaming and Combine against one-shot.
#include "s3/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace tierckpt::s3 {
namespace {

using Impl = uint32_t (*)(const void*, size_t, uint32_t);

std::vector<std::pair<std::string, Impl>> Implementations() {
  std::vector<std::pair<std::string, Impl>> impls = {
      {"dispatch", [](const void* d, size_t n, uint32_t c) { return Crc32c(d, n, c); }},
      {"software", internal::Crc32cSoftware}};
  if (internal::Crc32cHardwareAvailable()) impls.emplace_back("hardware", internal::Crc32cHardware);
  return impls;
}

TEST(Crc32c, PublishedVectors) {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<unsigned char>(i);
    descending[i] = static_cast<unsigned char>(31 - i);
  }
  for (const auto& [name, crc] : Implementations()) {
    SCOPED_TRACE(name);
    EXPECT_EQ(crc("123456789", 9, 0), 0xE3069283u);    // CRC catalogue check value
    EXPECT_EQ(crc(zeros.data(), 32, 0), 0x8A9136AAu);  // RFC 3720 B.4
    EXPECT_EQ(crc(ones.data(), 32, 0), 0x62A8AB43u);
    EXPECT_EQ(crc(ascending.data(), 32, 0), 0x46DD794Eu);
    EXPECT_EQ(crc(descending.data(), 32, 0), 0x113FDB5Cu);
    EXPECT_EQ(crc("", 0, 0), 0u);
    EXPECT_EQ(crc("a", 1, 0), 0xC1D04330u);
  }
}

TEST(Crc32c, HardwareMatchesSoftwareOnRandomLengthsAndOffsets) {
  if (!internal::Crc32cHardwareAvailable()) GTEST_SKIP() << "no SSE4.2 on this CPU";
  std::mt19937_64 rng(42);
  std::vector<unsigned char> buf(3 * 8192 * 3 + 64);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  // Every length around the loop boundaries (short/long 3-way blocks), then random ones.
  std::vector<size_t> lengths;
  for (size_t base : {0, 8, 3 * 256, 3 * 8192, 2 * 3 * 8192}) {
    for (size_t d = 0; d < 24; ++d) {
      lengths.push_back(base + d);
      if (base >= d) lengths.push_back(base - d);
    }
  }
  for (int i = 0; i < 300; ++i) lengths.push_back(rng() % (buf.size() - 16));
  for (size_t len : lengths) {
    const size_t offset = rng() % 16;
    const uint32_t seed = (len % 3 == 0) ? 0 : static_cast<uint32_t>(rng());
    ASSERT_EQ(internal::Crc32cHardware(buf.data() + offset, len, seed),
              internal::Crc32cSoftware(buf.data() + offset, len, seed))
        << "len=" << len << " offset=" << offset;
  }
}

TEST(Crc32c, StreamingEqualsOneShot) {
  std::mt19937_64 rng(7);
  std::vector<unsigned char> buf(100000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  for (int i = 0; i < 50; ++i) {
    const size_t cut = rng() % buf.size();
    EXPECT_EQ(Crc32c(buf.data() + cut, buf.size() - cut, Crc32c(buf.data(), cut)), whole) << cut;
  }
  uint32_t crc = 0;
  for (size_t pos = 0; pos < buf.size(); pos += 777)
    crc = Crc32c(buf.data() + pos, std::min<size_t>(777, buf.size() - pos), crc);
  EXPECT_EQ(crc, whole);
}

TEST(Crc32c, CombineEqualsWhole) {
  std::mt19937_64 rng(9);
  std::vector<unsigned char> buf(200000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  const uint32_t whole = Crc32c(buf.data(), buf.size());
  for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{8192}, buf.size() - 1, buf.size()}) {
    const uint32_t a = Crc32c(buf.data(), cut);
    const uint32_t b = Crc32c(buf.data() + cut, buf.size() - cut);
    EXPECT_EQ(Crc32cCombine(a, b, buf.size() - cut), whole) << cut;
  }
  // Parts of a multipart upload: fold the per-part CRCs left to right.
  uint32_t folded = 0;
  for (size_t pos = 0; pos < buf.size(); pos += 30011) {
    const size_t n = std::min<size_t>(30011, buf.size() - pos);
    folded = Crc32cCombine(folded, Crc32c(buf.data() + pos, n), n);
  }
  EXPECT_EQ(folded, whole);
  // Lengths beyond memory: combining with len_b == 2^k * m must agree with
  // doing it in two steps (the zero-extension operator is a power).
  const uint32_t x = 0x12345678, y = 0x9abcdef0, z = 0x0f1e2d3c;
  const uint64_t big = uint64_t{1} << 40;
  EXPECT_EQ(Crc32cCombine(Crc32cCombine(x, y, big), z, big),
            Crc32cCombine(x, Crc32cCombine(y, z, big), 2 * big));
}

TEST(Crc32c, Base64IsBigEndian) {
  EXPECT_EQ(Crc32cBase64(0xE3069283u), "4waSgw==");
  EXPECT_EQ(Crc32cBase64(Crc32c("hello", 5)), "mnG7TA==");  // 0x9A71BB4C
  EXPECT_EQ(Crc32cBase64(0), "AAAAAA==");
}

}  // namespace
}  // namespace tierckpt::s3
