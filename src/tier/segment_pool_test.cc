#include "tier/segment_pool.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <optional>

#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::InodeOf;
using testing::TempDir;

// Makes a file of size bytes at path.
void MakeFile(const std::string& path, uint64_t size) {
  Result<UniqueFd> fd = OpenFile(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(fd.ok());
  ASSERT_EQ(::ftruncate(fd->get(), static_cast<off_t>(size)), 0);
}

uint64_t SizeOf(const std::string& path) { return StatPath(path)->size; }

// "f<n>", built with append: GCC 12 at -O3 warns (-Wrestrict) on "f" + std::to_string(n).
std::string FileName(uint64_t n) {
  std::string name = "f";
  name.append(std::to_string(n));
  return name;
}

TEST(SegmentPoolTest, BestFitPicksTheSmallestLargeEnoughSegment) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  for (uint64_t size : {4096u, 16384u, 65536u}) {
    std::string f = dir.Sub(FileName(size));
    MakeFile(f, size);
    Result<uint64_t> added = pool.Put(f);
    ASSERT_TRUE(added.ok());
    EXPECT_EQ(*added, size);
  }
  EXPECT_EQ(pool.count(), 3u);
  EXPECT_EQ(pool.bytes(), 4096u + 16384u + 65536u);
  EXPECT_EQ(pool.BestFit(10000), 16384u);
  EXPECT_EQ(pool.BestFit(4096), 4096u);
  EXPECT_EQ(pool.BestFit(100000), 65536u);  // none fits: the largest, grown

  Result<uint64_t> old = pool.Take(10000, dir.Sub("obj"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, 16384u);
  EXPECT_EQ(SizeOf(dir.Sub("obj")), 10000u);
  EXPECT_EQ(pool.bytes(), 4096u + 65536u);

  old = pool.Take(100000, dir.Sub("big"));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(*old, 65536u);
  EXPECT_EQ(SizeOf(dir.Sub("big")), 100000u);
  EXPECT_EQ(pool.count(), 1u);
}

TEST(SegmentPoolTest, RecyclingKeepsTheInode) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  MakeFile(dir.Sub("a"), 8192);
  const uint64_t ino = InodeOf(dir.Sub("a"));
  ASSERT_NE(ino, 0u);
  ASSERT_TRUE(pool.Put(dir.Sub("a")).ok());
  EXPECT_FALSE(StatPath(dir.Sub("a"))->exists);
  ASSERT_TRUE(pool.Take(8192, dir.Sub("b")).ok());
  EXPECT_EQ(InodeOf(dir.Sub("b")), ino);
  EXPECT_TRUE(pool.empty());
}

TEST(SegmentPoolTest, EmptyFilesAreNotPooled) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  MakeFile(dir.Sub("empty"), 0);
  Result<uint64_t> added = pool.Put(dir.Sub("empty"));
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*added, 0u);
  EXPECT_TRUE(pool.empty());
  EXPECT_FALSE(StatPath(dir.Sub("empty"))->exists);
  EXPECT_EQ(pool.Put(dir.Sub("absent")).status().code(), Code::kNotFound);
}

TEST(SegmentPoolTest, ReleaseOneKeepsTheBestFit) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  for (int i = 1; i <= 3; ++i) {
    MakeFile(dir.Sub(FileName(i)), 4096u * i);
    ASSERT_TRUE(pool.Put(dir.Sub(FileName(i))).ok());
  }
  // Keeping the fit for 12288 (the largest), the next largest goes first.
  Result<uint64_t> freed = pool.ReleaseOne(12288);
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 8192u);
  freed = pool.ReleaseOne(12288);
  EXPECT_EQ(*freed, 4096u);
  freed = pool.ReleaseOne(12288);
  EXPECT_EQ(*freed, 0u);  // only the kept one is left
  EXPECT_EQ(pool.count(), 1u);
  freed = pool.ReleaseOne(std::nullopt);
  EXPECT_EQ(*freed, 12288u);
  EXPECT_TRUE(pool.empty());
  EXPECT_TRUE(ListDir(dir.Sub("pool"))->empty());
}

TEST(SegmentPoolTest, LoadAdoptsSegmentsAndRemovesJunk) {
  TempDir dir;
  {
    SegmentPool pool(dir.Sub("pool"));
    ASSERT_TRUE(pool.Load().ok());
    MakeFile(dir.Sub("a"), 4096);
    ASSERT_TRUE(pool.Put(dir.Sub("a")).ok());
  }
  MakeFile(dir.Sub("pool/leftover.tmp.1"), 100);
  MakeFile(dir.Sub("pool/seg_x"), 100);
  ASSERT_TRUE(MakeDirs(dir.Sub("pool/junkdir")).ok());
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  EXPECT_EQ(pool.count(), 1u);
  EXPECT_EQ(pool.bytes(), 4096u);
  EXPECT_EQ(ListDir(dir.Sub("pool"))->size(), 1u);
  // New ids do not collide with adopted ones.
  MakeFile(dir.Sub("b"), 4096);
  ASSERT_TRUE(pool.Put(dir.Sub("b")).ok());
  EXPECT_EQ(pool.count(), 2u);
}

// Adopts a new file of size bytes as a segment last holding `affinity`; its id.
uint64_t AdoptFile(SegmentPool& pool, uint64_t size, const std::string& affinity) {
  const uint64_t id = pool.NewId();
  MakeFile(pool.PathOf(id), size);
  pool.Adopt(id, size, affinity);
  return id;
}

TEST(SegmentPoolTest, AnObjectTakesTheSegmentItHeldLastAmongTheBestFits) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  // Two ranks' objects of the same size, rank 0's segment first in id order.
  const uint64_t rank0 = AdoptFile(pool, 8192, SegmentAffinity("job", "__0_0.distcp"));
  const uint64_t rank1 = AdoptFile(pool, 8192, SegmentAffinity("job", "__1_0.distcp"));
  const uint64_t other_job = AdoptFile(pool, 8192, SegmentAffinity("other", "__1_0.distcp"));
  std::optional<SegmentPool::Segment> seg = pool.Reserve(8192, SegmentAffinity("job", "__1_0.distcp"));
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->id, rank1);  // not the lowest id, rank 0's
  EXPECT_EQ(seg->affinity, SegmentAffinity("job", "__1_0.distcp"));
  EXPECT_EQ(pool.bytes(), 2u * 8192);
  // Put back (its move failed), it keeps its affinity.
  pool.Return(*seg, 8192);
  seg = pool.Reserve(8192, SegmentAffinity("job", "__1_0.distcp"));
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->id, rank1);
  // Without a segment of its own, an object takes the best fit as before.
  seg = pool.Reserve(8192, SegmentAffinity("job", "__7_0.distcp"));
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->id, rank0);
  seg = pool.Reserve(8192, SegmentAffinity("job", "__0_0.distcp"));
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->id, other_job);
  EXPECT_TRUE(pool.empty());
  EXPECT_EQ(pool.bytes(), 0u);
}

TEST(SegmentPoolTest, AffinityNeverGivesUpTheBestFitsSize) {
  TempDir dir;
  SegmentPool pool(dir.Sub("pool"));
  ASSERT_TRUE(pool.Load().ok());
  const uint64_t own_larger = AdoptFile(pool, 16384, SegmentAffinity("job", "__0_0.distcp"));
  const uint64_t fit = AdoptFile(pool, 8192, "");
  std::optional<SegmentPool::Segment> seg = pool.Reserve(8000, SegmentAffinity("job", "__0_0.distcp"));
  ASSERT_TRUE(seg.has_value());
  EXPECT_EQ(seg->id, fit);  // its own segment is larger than the best fit: memory first
  EXPECT_EQ(seg->affinity, "");
  // Released or taken, a segment leaves the affinity index with it.
  std::optional<SegmentPool::Segment> released = pool.PickRelease(std::nullopt);
  ASSERT_TRUE(released.has_value());
  EXPECT_EQ(released->id, own_larger);
  EXPECT_EQ(released->affinity, SegmentAffinity("job", "__0_0.distcp"));
  EXPECT_FALSE(pool.Reserve(1, SegmentAffinity("job", "__0_0.distcp")).has_value());
}

}  // namespace
}  // namespace tierckpt::agent
