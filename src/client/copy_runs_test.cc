#include "client/copy_runs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace tierckpt::client_internal {
namespace {

uint64_t Address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

TEST(CopyRunsTest, ScattersIntoAndGathersOutOfTheObject) {
  std::vector<uint8_t> object(1000, 0);
  const auto a = Pattern(100, 1), b = Pattern(300, 2), c = Pattern(1, 3);
  const std::vector<CopyRun> in = {{0, Address(a.data()), 100},
                                   {500, Address(b.data()), 300},
                                   {999, Address(c.data()), 1},
                                   {10, Address(c.data()), 0}};
  ASSERT_TRUE(
      CopyRuns(object.data(), object.size(), "o", in.data(), in.size(), 1, CopyDirection::kIntoObject).ok());
  EXPECT_TRUE(std::equal(a.begin(), a.end(), object.begin()));
  EXPECT_TRUE(std::equal(b.begin(), b.end(), object.begin() + 500));
  EXPECT_EQ(object[999], c[0]);
  EXPECT_EQ(object[100], 0);  // untouched between runs
  EXPECT_EQ(object[499], 0);

  std::vector<uint8_t> back(300, 0);
  const CopyRun out{500, Address(back.data()), 300};
  ASSERT_TRUE(CopyRuns(object.data(), object.size(), "o", &out, 1, 1, CopyDirection::kOutOfObject).ok());
  EXPECT_EQ(back, b);
}

TEST(CopyRunsTest, ThreadsSplitRunsAnywhereAndCopyTheSameBytes) {
  // Runs of odd sizes whose total spans several threads' shares (4 MiB each at least).
  const size_t total = (17u << 20) + 12345;
  std::vector<uint8_t> source = Pattern(total, 9);
  std::vector<CopyRun> runs;
  uint64_t at = 0, placed = 0;
  for (uint64_t size : {uint64_t{1}, uint64_t{(5u << 20) + 3}, uint64_t{777}, uint64_t{(9u << 20) + 11}}) {
    runs.push_back({placed, Address(source.data() + at), size});
    at += size;
    placed += size + 64;  // gaps in the object
  }
  runs.push_back({placed, Address(source.data() + at), total - at});
  const size_t object_size = placed + (total - at);
  for (int threads : {1, 2, 3, 8}) {
    std::vector<uint8_t> object(object_size, 0xEE);
    ASSERT_TRUE(CopyRuns(object.data(), object.size(), "o", runs.data(), runs.size(), threads,
                         CopyDirection::kIntoObject)
                    .ok());
    for (const CopyRun& r : runs) {
      const auto* src = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(r.address));
      ASSERT_TRUE(std::equal(src, src + r.size, object.begin() + r.offset)) << "threads " << threads;
    }
    EXPECT_EQ(object[runs[0].offset + 1], 0xEE) << "a gap was written, threads " << threads;
  }
}

TEST(CopyRunsTest, ARunPastTheEndIsRefusedBeforeAnyByteIsCopied) {
  std::vector<uint8_t> object(100, 0);
  const auto a = Pattern(50, 1);
  const std::vector<CopyRun> runs = {{0, Address(a.data()), 50}, {60, Address(a.data()), 50}};
  const Status s = CopyRuns(object.data(), object.size(), "__0_0.distcp", runs.data(), runs.size(), 1,
                            CopyDirection::kIntoObject);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("__0_0.distcp"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("run 1"), std::string::npos) << s.message();
  EXPECT_EQ(object[0], 0) << "the first run was copied before the second was checked";

  const CopyRun huge{1, Address(a.data()), UINT64_MAX};  // offset + size overflows
  EXPECT_EQ(CopyRuns(object.data(), object.size(), "o", &huge, 1, 1, CopyDirection::kIntoObject).code(),
            Code::kInvalidArgument);
}

TEST(CopyRunsTest, RefusesANullAddressAndABadThreadCount) {
  std::vector<uint8_t> object(10, 0);
  const CopyRun null_run{0, 0, 4};
  EXPECT_EQ(CopyRuns(object.data(), object.size(), "o", &null_run, 1, 1, CopyDirection::kIntoObject).code(),
            Code::kInvalidArgument);
  const CopyRun empty{0, 0, 0};  // nothing to copy: no address needed
  EXPECT_TRUE(CopyRuns(object.data(), object.size(), "o", &empty, 1, 1, CopyDirection::kIntoObject).ok());
  for (int threads : {0, -1, 65}) {
    EXPECT_EQ(
        CopyRuns(object.data(), object.size(), "o", &empty, 1, threads, CopyDirection::kIntoObject).code(),
        Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace tierckpt::client_internal
