// ParallelFor (parallel.h): every index once, several threads, the failure
// contract (new work stops, the lowest failing index is reported).
#include "os/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tierckpt {
namespace {

TEST(ParallelForTest, RunsEveryIndexExactlyOnce) {
  std::vector<std::atomic<int>> seen(1000);
  Status s = ParallelFor(seen.size(), 4, [&](size_t i) {
    seen[i].fetch_add(1);
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i].load(), 1) << i;
}

TEST(ParallelForTest, UsesSeveralThreads) {
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  Status s = ParallelFor(8, 3, [&](size_t) {
    int now = inside.fetch_add(1) + 1;
    int prev = max_inside.load();
    while (now > prev && !max_inside.compare_exchange_weak(prev, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    inside.fetch_sub(1);
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
    return Status::Ok();
  });
  ASSERT_TRUE(s.ok());
  EXPECT_GT(max_inside.load(), 1);
  EXPECT_LE(max_inside.load(), 3);
  EXPECT_GT(ids.size(), 1u);
}

TEST(ParallelForTest, FirstErrorWinsAndStopsNewWork) {
  std::atomic<int> calls{0};
  Status s = ParallelFor(10000, 2, [&](size_t i) -> Status {
    calls.fetch_add(1);
    if (i == 3) return NotFound("object 3 is missing");
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "object 3 is missing");
  EXPECT_LT(calls.load(), 10000);
}

TEST(ParallelForTest, TheLowestFailingIndexIsReported) {
  // Index 7 fails at once; index 2 fails later, while 7's failure is already
  // recorded. The result is index 2's, whatever the timing.
  Status s = ParallelFor(8, 8, [&](size_t i) -> Status {
    if (i == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return Aborted("index 2");
    }
    if (i == 7) return NotFound("index 7");
    return Status::Ok();
  });
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
}

TEST(ParallelForTest, OneThreadRunsInOrderOnTheCallerAndStopsAtTheFirstFailure) {
  std::vector<size_t> order;
  const std::thread::id caller = std::this_thread::get_id();
  bool elsewhere = false;
  Status s = ParallelFor(10, 1, [&](size_t i) -> Status {
    elsewhere |= std::this_thread::get_id() != caller;
    order.push_back(i);
    return i == 4 ? Internal("index 4") : Status::Ok();
  });
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_FALSE(elsewhere);
}

TEST(ParallelForTest, ZeroItemsIsOk) {
  EXPECT_TRUE(ParallelFor(0, 4, [](size_t) { return Internal("never called"); }).ok());
}

}  // namespace
}  // namespace tierckpt
