#include "output.h"

#include <gtest/gtest.h>

namespace tierckpt::cli {
namespace {

TEST(HumanSizeTest, UsesBinaryUnitsWithOneDecimal) {
  EXPECT_EQ(HumanSize(0), "0 B");
  EXPECT_EQ(HumanSize(1023), "1023 B");
  EXPECT_EQ(HumanSize(1024), "1.0 KiB");
  EXPECT_EQ(HumanSize(1536), "1.5 KiB");
  EXPECT_EQ(HumanSize(1ull << 30), "1.0 GiB");
  EXPECT_EQ(HumanSize(256ull << 20), "256.0 MiB");
  EXPECT_EQ(HumanSize(3ull << 40), "3.0 TiB");
}

TEST(HumanRateTest, DecimalMegabytesPerSecond) {
  EXPECT_EQ(HumanRate(500'000'000, 0.5), "1000 MB/s");
  EXPECT_EQ(HumanRate(1, 0), "-");
}

TEST(FormatUnixMsTest, UtcIso8601) {
  EXPECT_EQ(FormatUnixMs(0), "-");
  EXPECT_EQ(FormatUnixMs(1'700'000'000'123), "2023-11-14T22:13:20Z");
}

TEST(TableTest, AlignsColumnsAndRightAlignsNumbers) {
  Table t({"NAME", "SIZE", "STATE"}, {false, true, false});
  t.AddRow({"a", "1.0 GiB", "committed"});
  t.AddRow({"longer_name", "12 B", ""});
  EXPECT_EQ(t.Render(),
            "NAME            SIZE  STATE\n"
            "a            1.0 GiB  committed\n"
            "longer_name     12 B\n");
}

TEST(ParseJsonTest, NoExceptionsOnGarbage) {
  EXPECT_TRUE(ParseJson("{not json").is_discarded());
  EXPECT_EQ(ParseJson(R"({"a":1})")["a"], 1);
}

}  // namespace
}  // namespace tierckpt::cli
