// BufferCache (decision 164): a buffer given back is handed out again, the
// smallest that fits; what is kept idle is bounded by count and bytes.
#include "common/buffer_cache.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace tierckpt {
namespace {

TEST(BufferCacheTest, ABufferGivenBackIsHandedOutAgainTheSmallestThatFits) {
  BufferCache cache(1 << 20, 4);
  uint8_t* small = nullptr;
  uint8_t* big = nullptr;
  {
    BufferCache::Lease a = cache.Take(1000);
    BufferCache::Lease b = cache.Take(5000);
    EXPECT_EQ(a.size(), 1000u);
    EXPECT_EQ(b.size(), 5000u);
    std::memset(a.data(), 1, a.size());
    std::memset(b.data(), 2, b.size());
    small = a.data();
    big = b.data();
    EXPECT_EQ(cache.idle_count(), 0u);
  }
  EXPECT_EQ(cache.idle_count(), 2u);
  EXPECT_EQ(cache.idle_bytes(), 6000u);
  BufferCache::Lease c = cache.Take(900);
  EXPECT_EQ(c.data(), small);  // the smallest that fits
  EXPECT_EQ(c.size(), 1000u);
  BufferCache::Lease d = cache.Take(1001);
  EXPECT_EQ(d.data(), big);
  EXPECT_EQ(d.size(), 5000u);
  BufferCache::Lease e = cache.Take(10);  // none idle: a new one
  EXPECT_NE(e.data(), small);
  EXPECT_NE(e.data(), big);
  EXPECT_EQ(cache.idle_count(), 0u);
}

TEST(BufferCacheTest, WhatIsKeptIdleIsBoundedByCountAndBytes) {
  BufferCache cache(10000, 2);
  {
    std::vector<BufferCache::Lease> leases;
    for (size_t n : {100, 200, 300, 400}) leases.push_back(cache.Take(n));
  }
  EXPECT_EQ(cache.idle_count(), 2u);  // the largest went first
  EXPECT_EQ(cache.idle_bytes(), 300u);
  { BufferCache::Lease huge = cache.Take(20000); }  // above keep_bytes: never kept
  EXPECT_EQ(cache.idle_count(), 2u);
  {
    BufferCache::Lease a = cache.Take(9000);
    BufferCache::Lease b = cache.Take(9000);
  }
  EXPECT_LE(cache.idle_bytes(), 10000u);
}

TEST(BufferCacheTest, LeasesMoveAndManyThreadsShareTheCache) {
  BufferCache cache(1 << 20, 8);
  BufferCache::Lease a = cache.Take(64);
  BufferCache::Lease b = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.size(), 64u);
  b = cache.Take(32);  // the 64-byte one goes back
  EXPECT_EQ(cache.idle_count(), 1u);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 200; ++i) {
        BufferCache::Lease l = cache.Take(static_cast<size_t>(100 + (i % 7) * 50));
        std::memset(l.data(), t, l.size());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_LE(cache.idle_count(), 8u);
}

}  // namespace
}  // namespace tierckpt
