#include "client/copy_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "common/checksum.h"

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

// A copy larger than a cache streams every run past it, small runs included
// (decision 173): runs of every size around the streamed body's 64-byte blocks,
// at odd addresses on both sides, land exactly, in both directions and split
// over threads, and nothing around them is written.
TEST(CopyRunsTest, AStreamedCopyOfManySmallRunsAtOddAddressesLandsEveryByteInBothDirections) {
  std::mt19937 gen(173);
  const uint64_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 4095, 4097, 65537, 300001};
  std::vector<uint64_t> run_sizes;
  uint64_t total = 0;
  while (total <= (9u << 20)) {  // above the 8 MiB where the copy streams
    run_sizes.push_back(sizes[gen() % std::size(sizes)]);
    total += run_sizes.back();
  }
  const std::vector<uint8_t> source = Pattern(total + 64, 5);
  std::vector<CopyRun> runs;
  uint64_t at = 0, placed = 3;  // the object's side starts off any alignment too
  for (size_t i = 0; i < run_sizes.size(); ++i) {
    runs.push_back({placed, Address(source.data() + at + i % 7), run_sizes[i]});
    at += run_sizes[i];
    placed += run_sizes[i] + 1 + i % 5;  // gaps of 1..5 bytes
  }
  const size_t object_size = placed + 8;
  for (int threads : {1, 3}) {
    std::vector<uint8_t> object(object_size, 0xEE);
    ASSERT_TRUE(CopyRuns(object.data(), object.size(), "o", runs.data(), runs.size(), threads,
                         CopyDirection::kIntoObject)
                    .ok());
    std::vector<uint8_t> expected(object_size, 0xEE);
    for (const CopyRun& r : runs) {
      const auto* src = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(r.address));
      std::copy(src, src + r.size, expected.begin() + r.offset);
    }
    ASSERT_TRUE(object == expected) << "into the object, threads " << threads;

    std::vector<uint8_t> back(total + 7 * runs.size() + 64, 0xEE);
    std::vector<CopyRun> out = runs;
    uint64_t to = 1;
    for (CopyRun& r : out) {
      r.address = Address(back.data() + to);
      to += r.size + 1;
    }
    ASSERT_TRUE(
        CopyRuns(object.data(), object.size(), "o", out.data(), out.size(), threads, CopyDirection::kOutOfObject)
            .ok());
    std::vector<uint8_t> expected_back(back.size(), 0xEE);
    to = 1;
    for (const CopyRun& r : runs) {
      const auto* src = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(r.address));
      std::copy(src, src + r.size, expected_back.begin() + to);
      to += r.size + 1;
    }
    ASSERT_TRUE(back == expected_back) << "out of the object, threads " << threads;
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

// Runs in shuffled order that overlap in the object, cross the 64 KiB pieces and
// land at odd destination addresses, in an object below and one above the size
// where the copy streams past the cache: every destination gets its bytes and
// the checksum is the whole object's, gaps included.
TEST(CopyRunsTest, CopyOutAndChecksumCopiesEveryRunAndHashesTheWholeObject) {
  for (size_t object_size : {size_t{0}, size_t{1000}, size_t{(1u << 20) + 77}, size_t{(9u << 20) + 4321}}) {
    const std::vector<uint8_t> object = Pattern(object_size, 11);
    std::mt19937 gen(static_cast<uint32_t>(object_size));
    std::vector<CopyRun> runs;
    std::vector<std::vector<uint8_t>> dests;
    for (int i = 0; object_size > 0 && i < 40; ++i) {
      const uint64_t offset = gen() % object_size;
      const uint64_t size = i % 5 == 0 ? 0 : std::min<uint64_t>(object_size - offset, gen() % (600u << 10));
      dests.emplace_back(size + 3, 0);
      runs.push_back({offset, 0, size});
    }
    runs.push_back({0, 0, object_size});  // the whole object too, overlapping every other run
    dests.emplace_back(object_size + 3, 0);
    for (size_t i = 0; i < runs.size(); ++i)
      runs[i].address = Address(dests[i].data() + i % 3);  // odd alignment
    std::shuffle(runs.begin(), runs.end(), gen);

    Result<Checksum> sum = CopyOutAndChecksum(object.data(), object.size(), "o", runs.data(), runs.size());
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(*sum, ComputeChecksum(object.data(), object.size())) << object_size << " bytes";
    for (const CopyRun& r : runs) {
      const auto* got = reinterpret_cast<const uint8_t*>(static_cast<uintptr_t>(r.address));
      ASSERT_TRUE(std::equal(got, got + r.size, object.begin() + static_cast<ptrdiff_t>(r.offset)))
          << "run at " << r.offset << " of " << r.size << " bytes, object of " << object_size;
    }
  }
}

TEST(CopyRunsTest, CopyOutAndChecksumRefusesARunPastTheEndBeforeCopying) {
  const std::vector<uint8_t> object = Pattern(100, 1);
  std::vector<uint8_t> a(50, 0), b(50, 0);
  const std::vector<CopyRun> runs = {{0, Address(a.data()), 50}, {60, Address(b.data()), 50}};
  Result<Checksum> sum =
      CopyOutAndChecksum(object.data(), object.size(), "__1_0.distcp", runs.data(), runs.size());
  ASSERT_EQ(sum.status().code(), Code::kInvalidArgument) << sum.status().ToString();
  EXPECT_NE(sum.status().message().find("__1_0.distcp"), std::string::npos) << sum.status().message();
  EXPECT_EQ(a, std::vector<uint8_t>(50, 0)) << "a run was copied before every run was checked";
}

}  // namespace
}  // namespace tierckpt::client_internal
