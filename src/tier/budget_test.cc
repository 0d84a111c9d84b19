#include "tier/budget.h"

#include <gtest/gtest.h>

namespace tierckpt::agent {
namespace {

TEST(BudgetTest, ParsesBytesAndUnits) {
  struct Case {
    const char* text;
    uint64_t bytes;
  };
  const Case cases[] = {
      {"1073741824", 1073741824ull}, {"512MiB", 512ull << 20}, {"8GiB", 8ull << 30},
      {"8gib", 8ull << 30},          {"1.5G", 3ull << 29},     {"500MB", 500000000ull},
      {"2KB", 2000},                 {"2K", 2048},             {"1TiB", 1ull << 40},
      {" 64 MiB ", 64ull << 20},     {"100B", 100},
  };
  for (const Case& c : cases) {
    Result<uint64_t> r = ParseByteSize(c.text, "--memory-budget");
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.bytes) << c.text;
  }
}

TEST(BudgetTest, RejectsJunkWithTheFlagName) {
  for (const char* text : {"", "GiB", "-5GiB", "12XB", "1e9", "5%5", "99999999999999999999TiB"}) {
    Result<uint64_t> r = ParseByteSize(text, "--memory-budget");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--memory-budget"), std::string::npos);
  }
}

TEST(BudgetTest, ResolvesPercentOfRam) {
  EXPECT_EQ(*ResolveBudget("25%", 16ull << 30), 4ull << 30);
  EXPECT_EQ(*ResolveBudget("100%", 16ull << 30), 16ull << 30);
  EXPECT_EQ(*ResolveBudget("12.5%", 16ull << 30), 2ull << 30);
  EXPECT_EQ(*ResolveBudget("1GiB", 16ull << 30), 1ull << 30);
  EXPECT_FALSE(ResolveBudget("0%", 16ull << 30).ok());
  EXPECT_FALSE(ResolveBudget("101%", 16ull << 30).ok());
  EXPECT_FALSE(ResolveBudget("abc%", 16ull << 30).ok());
  EXPECT_FALSE(ResolveBudget("25%", 0).ok());           // RAM unknown
  EXPECT_FALSE(ResolveBudget("1000", 16ull << 30).ok());  // below the minimum
  EXPECT_GT(PhysicalMemoryBytes(), 0u);
}

TEST(BudgetTest, FormatsBytes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(64ull << 20), "64.0 MiB");
  EXPECT_EQ(FormatBytes(4ull << 30), "4.0 GiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
}

TEST(BudgetTest, BudgetThatDoesNotFitGivesTheDockerHint) {
  MountSpace shm{64ull << 20, 64ull << 20};
  Status s = CheckBudgetFits("/dev/shm/tierckpt-0", 4ull << 30, shm, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kResourceExhausted);
  EXPECT_EQ(s.message(),
            "memory budget 4.0 GiB does not fit in /dev/shm/tierckpt-0: the mount has 64.0 MiB free. Fix: "
            "mount a larger tmpfs (docker run --shm-size=..., Kubernetes emptyDir.medium: Memory with "
            "sizeLimit) or lower --memory-budget.");
  EXPECT_TRUE(CheckBudgetFits("/r", 32ull << 20, shm, 0).ok());
  // Bytes our own files already hold count as available.
  EXPECT_TRUE(CheckBudgetFits("/r", 96ull << 20, shm, 32ull << 20).ok());
  EXPECT_TRUE(MountSpaceOf("/tmp").ok());
  EXPECT_FALSE(MountSpaceOf("/nonexistent/dir").ok());
}

}  // namespace
}  // namespace tierckpt::agent
