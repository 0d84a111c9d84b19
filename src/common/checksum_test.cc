#include "common/checksum.h"

#include <gtest/gtest.h>

#include <vector>

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

}  // namespace
}  // namespace tierckpt
