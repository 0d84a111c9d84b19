#include "client/mapping_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "os/files.h"

namespace tierckpt::client {
namespace {

using Access = Mapping::Access;

class MappingCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/tc_mapcache_XXXXXX");
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { ASSERT_TRUE(RemoveTree(dir_).ok()); }

  // Creates dir_/name with size bytes of `fill`.
  void MakeFile(const std::string& name, size_t size, char fill) {
    Result<UniqueFd> fd = OpenFile(Path(name), O_CREAT | O_TRUNC | O_RDWR);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    std::string bytes(size, fill);
    ASSERT_TRUE(PwriteAll(fd->get(), bytes.data(), bytes.size(), 0, name).ok());
  }
  UniqueFd Open(const std::string& name, int flags = O_RDWR) {
    Result<UniqueFd> fd = OpenFile(Path(name), flags);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    return fd.ok() ? std::move(fd).value() : UniqueFd();
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

MappingCache::Options Opts(uint64_t capacity, size_t max_entries = 0) {
  MappingCache::Options o;
  o.capacity_bytes = capacity;
  o.max_entries = max_entries;
  return o;
}

// Issue 18: sealed bytes are read-only, so a stray write through a mapping
// the client keeps (for the next save) faults instead of changing a committed
// step; the recycled segment is writable again once handed to a new writer.
TEST_F(MappingCacheTest, SealedMappingFaultsOnWriteUntilHandedToANewWriter) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MakeFile("a", 8192, 'x');
  MappingCache cache(Opts(1 << 20));
  uint8_t* first = nullptr;
  {
    auto lease = cache.Acquire(Open("a"), 8192, Access::kReadWrite, "a");
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    first = lease->data();
    first[10] = 'y';
    ASSERT_TRUE(lease->MakeReadOnly("a").ok());
    ASSERT_TRUE(lease->MakeReadOnly("a").ok());  // twice is a no-op
    EXPECT_EQ(first[10], 'y');                   // still readable
    EXPECT_DEATH({ static_cast<volatile uint8_t*>(lease->data())[20] = 'z'; }, "");
  }
  // The kept mapping is still read-only while nobody holds it.
  EXPECT_DEATH({ static_cast<volatile uint8_t*>(first)[20] = 'z'; }, "");
  auto again = cache.Acquire(Open("a"), 8192, Access::kReadWrite, "a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->reused());
  ASSERT_EQ(again->data(), first);
  again->data()[20] = 'z';  // writable again: no fault
  EXPECT_EQ(again->data()[20], 'z');
  EXPECT_EQ(again->data()[10], 'y');
  // A read-only lease has nothing to protect.
  auto ro = cache.Acquire(Open("a", O_RDONLY), 8192, Access::kReadOnly, "a");
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_TRUE(ro->MakeReadOnly("a").ok());
}

TEST_F(MappingCacheTest, ReusesAWritableMappingOfTheSameFileAfterRelease) {
  MakeFile("a", 8192, 'x');
  MappingCache cache(Opts(1 << 20));
  uint8_t* first = nullptr;
  {
    auto lease = cache.Acquire(Open("a"), 8192, Access::kReadWrite, "a");
    ASSERT_TRUE(lease.ok()) << lease.status().ToString();
    EXPECT_FALSE(lease->reused());
    first = lease->data();
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(first[100], 'x');
    first[100] = 'y';  // shared mapping: visible through the file
  }
  auto again = cache.Acquire(Open("a"), 8192, Access::kReadWrite, "a");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->reused());
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(again->data()[100], 'y');
  MappingCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, 8192u);

  char c = 0;
  UniqueFd fd = Open("a", O_RDONLY);
  ASSERT_EQ(pread(fd.get(), &c, 1, 100), 1);
  EXPECT_EQ(c, 'y');
}

TEST_F(MappingCacheTest, RecycledFileRenamedKeepsItsMapping) {
  MakeFile("seg", 4096, 'a');
  MappingCache cache(Opts(1 << 20));
  uint8_t* first = nullptr;
  {
    auto lease = cache.Acquire(Open("seg"), 4096, Access::kReadWrite, "seg");
    ASSERT_TRUE(lease.ok());
    first = lease->data();
  }
  ASSERT_TRUE(RenamePath(Path("seg"), Path("recycled")).ok());  // same inode, new name
  auto lease = cache.Acquire(Open("recycled"), 4096, Access::kReadWrite, "recycled");
  ASSERT_TRUE(lease.ok());
  EXPECT_TRUE(lease->reused());
  EXPECT_EQ(lease->data(), first);
}

TEST_F(MappingCacheTest, AWritableMappingIsNeverHandedOutTwiceAtOnce) {
  MakeFile("a", 4096, 'a');
  MappingCache cache(Opts(1 << 20));
  auto one = cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a");
  ASSERT_TRUE(one.ok());
  auto two = cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a");
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE(two->reused());
  EXPECT_NE(one->data(), two->data());
  // Both map the same file.
  one->data()[7] = 'q';
  EXPECT_EQ(two->data()[7], 'q');
  two->Reset();
  one->Reset();
  auto three = cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a");
  ASSERT_TRUE(three.ok());
  EXPECT_TRUE(three->reused());
}

TEST_F(MappingCacheTest, ReadOnlyMappingsAreShared) {
  MakeFile("r", 4096, 'r');
  MappingCache cache(Opts(1 << 20));
  auto one = cache.Acquire(Open("r", O_RDONLY), 4096, Access::kReadOnly, "r");
  auto two = cache.Acquire(Open("r", O_RDONLY), 4096, Access::kReadOnly, "r");
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(two.ok());
  EXPECT_TRUE(two->reused());
  EXPECT_EQ(one->data(), two->data());
  EXPECT_EQ(two->data()[0], 'r');
  // Read and write mappings of one file are distinct entries.
  auto w = cache.Acquire(Open("r"), 4096, Access::kReadWrite, "r");
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE(w->reused());
  EXPECT_EQ(cache.stats().entries, 2u);
}

TEST_F(MappingCacheTest, SizeMismatchIsAProtocolError) {
  MakeFile("a", 4096, 'a');
  MappingCache cache(Opts(1 << 20));
  auto lease = cache.Acquire(Open("a"), 8192, Access::kReadWrite, "object ns/1/a");
  ASSERT_FALSE(lease.ok());
  EXPECT_EQ(lease.status().code(), Code::kProtocolError);
  EXPECT_NE(lease.status().message().find("object ns/1/a"), std::string::npos);
  EXPECT_NE(lease.status().message().find("4096"), std::string::npos);
}

TEST_F(MappingCacheTest, SweepDropsMappingsOfDeletedFiles) {
  MakeFile("gone", 4096, 'g');
  MakeFile("kept", 4096, 'k');
  MappingCache cache(Opts(1 << 20));
  ASSERT_TRUE(cache.Acquire(Open("gone"), 4096, Access::kReadWrite, "gone").ok());
  ASSERT_TRUE(cache.Acquire(Open("kept"), 4096, Access::kReadWrite, "kept").ok());
  EXPECT_EQ(cache.SweepDeleted(), 0u);
  ASSERT_EQ(unlink(Path("gone").c_str()), 0);
  EXPECT_EQ(cache.SweepDeleted(), 1u);
  MappingCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, 4096u);
  EXPECT_EQ(s.swept, 1u);
  auto kept = cache.Acquire(Open("kept"), 4096, Access::kReadWrite, "kept");
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(kept->reused());
}

TEST_F(MappingCacheTest, MaybeSweepIsRateLimitedButEventuallyRuns) {
  MakeFile("a", 4096, 'a');
  MappingCache cache(Opts(1 << 20));
  ASSERT_TRUE(cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a").ok());
  cache.MaybeSweep();
  ASSERT_EQ(unlink(Path("a").c_str()), 0);
  for (int i = 0; i < 200 && cache.stats().entries != 0; ++i) {
    cache.MaybeSweep();
    usleep(5000);
  }
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(MappingCacheTest, EvictsLeastRecentlyUsedBeyondCapacity) {
  for (const char* n : {"a", "b", "c"}) MakeFile(n, 4096, n[0]);
  MappingCache cache(Opts(2 * 4096));
  ASSERT_TRUE(cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a").ok());
  ASSERT_TRUE(cache.Acquire(Open("b"), 4096, Access::kReadWrite, "b").ok());
  ASSERT_TRUE(cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a").ok());  // a is now newest
  ASSERT_TRUE(cache.Acquire(Open("c"), 4096, Access::kReadWrite, "c").ok());  // evicts b
  MappingCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.evictions, 1u);
  auto a = cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->reused());
  a->Reset();
  auto b = cache.Acquire(Open("b"), 4096, Access::kReadWrite, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->reused());
}

TEST_F(MappingCacheTest, EvictsBeyondMaxEntries) {
  for (const char* n : {"a", "b", "c"}) MakeFile(n, 4096, n[0]);
  MappingCache cache(Opts(1 << 20, /*max_entries=*/2));
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(cache.Acquire(Open(n), 4096, Access::kReadOnly, n).ok());
  EXPECT_EQ(cache.stats().entries, 2u);
  EXPECT_EQ(cache.stats().evictions, 1u);
}

TEST_F(MappingCacheTest, ResizedFileDropsTheStaleMapping) {
  MakeFile("a", 8192, 'a');
  MappingCache cache(Opts(1 << 20));
  ASSERT_TRUE(cache.Acquire(Open("a"), 8192, Access::kReadWrite, "a").ok());
  ASSERT_EQ(truncate(Path("a").c_str(), 4096), 0);
  auto small = cache.Acquire(Open("a"), 4096, Access::kReadWrite, "a");
  ASSERT_TRUE(small.ok());
  EXPECT_FALSE(small->reused());
  EXPECT_EQ(cache.stats().entries, 1u);
  EXPECT_EQ(cache.stats().bytes, 4096u);
}

TEST_F(MappingCacheTest, LeaseOutlivesEvictionAndTheCache) {
  MakeFile("a", 4096, 'z');
  MappingCache::Lease lease;
  {
    MappingCache cache(Opts(1 << 20));
    auto l = cache.Acquire(Open("a"), 4096, Access::kReadOnly, "a");
    ASSERT_TRUE(l.ok());
    lease = std::move(l).value();
    cache.Clear();
    EXPECT_EQ(cache.stats().entries, 0u);
  }
  ASSERT_TRUE(lease.valid());
  EXPECT_EQ(lease.data()[4095], 'z');
}

TEST_F(MappingCacheTest, ZeroCapacityDisablesCaching) {
  MakeFile("a", 4096, 'a');
  MappingCache cache(Opts(0));
  ASSERT_TRUE(cache.Acquire(Open("a"), 4096, Access::kReadOnly, "a").ok());
  auto again = cache.Acquire(Open("a"), 4096, Access::kReadOnly, "a");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->reused());
  EXPECT_EQ(cache.stats().entries, 0u);
}

TEST_F(MappingCacheTest, EmptyFileGivesAnEmptyLease) {
  MakeFile("e", 0, 'e');
  MappingCache cache(Opts(1 << 20));
  auto lease = cache.Acquire(Open("e"), 0, Access::kReadWrite, "e");
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_TRUE(lease->valid());
  EXPECT_EQ(lease->size(), 0u);
  EXPECT_EQ(lease->data(), nullptr);
}

}  // namespace
}  // namespace tierckpt::client
