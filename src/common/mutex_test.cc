#include "common/mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace tierckpt {
namespace {

struct Counter {
  Mutex mu;
  CondVar cv{&mu};
  int value GUARDED_BY(mu) = 0;
};

TEST(MutexTest, CondVarWakesAWaiterAndHoldsTheMutexAgain) {
  Counter c;
  std::thread t([&] {
    MutexLock lock(&c.mu);
    c.value = 1;
    c.cv.SignalAll();
  });
  {
    MutexLock lock(&c.mu);
    while (c.value == 0) c.cv.Wait();
    EXPECT_EQ(c.value, 1);
    c.value = 2;  // still held: the analysis and the thread agree
  }
  t.join();
  MutexLock lock(&c.mu);
  EXPECT_EQ(c.value, 2);
}

TEST(MutexTest, WaitForRunsOutWithoutASignal) {
  Counter c;
  MutexLock lock(&c.mu);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.cv.WaitFor(std::chrono::milliseconds(20)) && c.value != 0);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(15));
  EXPECT_FALSE(c.cv.WaitUntil(std::chrono::steady_clock::now() - std::chrono::seconds(1)));
}

TEST(MutexTest, ScopedLockUnlocksAndRelocks) {
  Counter c;
  MutexLock lock(&c.mu);
  lock.Unlock();
  if (c.mu.TryLock()) {  // free while unlocked
    c.mu.Unlock();
  } else {
    ADD_FAILURE() << "MutexLock::Unlock left the mutex held";
  }
  lock.Lock();
  c.value = 3;
  std::thread t([&] { EXPECT_FALSE(c.mu.TryLock()); });  // held again
  t.join();
}

}  // namespace
}  // namespace tierckpt
