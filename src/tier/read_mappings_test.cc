#include "tier/read_mappings.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TempDir;

constexpr uint64_t kReadKiB = 1024;

std::string ReadPattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 13);
  return s;
}

void WriteFile(const std::string& path, const std::string& data) {
  Result<UniqueFd> fd = OpenFile(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_TRUE(PwriteAll(fd->get(), data.data(), data.size(), 0, path).ok());
}

void Resize(const std::string& path, uint64_t size) {
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(size)), 0);
}

// "f<i>", built with append: GCC 12 at -O3 warns (-Wrestrict) on "f" + std::to_string(i).
std::string FileName(int i) {
  std::string name = "f";
  name.append(std::to_string(i));
  return name;
}

std::string Bytes(const ReadView& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size());
}

// Keeps files of 4 KiB and more, up to max_bytes of them.
ReadMappingsOptions SmallOptions(uint64_t max_bytes = 1 << 20, size_t max_mappings = 16) {
  return ReadMappingsOptions{
      .max_bytes = max_bytes, .max_mappings = max_mappings, .min_file_bytes = 4 * kReadKiB};
}

TEST(ReadMappingsTest, SmallFilesAreReadNotKept) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  const std::string data = ReadPattern(1000, 'a');
  WriteFile(dir.Sub("small"), data);
  Result<ReadView> v = rm.Open(dir.Sub("small"));
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_FALSE(v->kept());
  EXPECT_EQ(Bytes(*v), data);
  EXPECT_EQ(rm.Stats().mappings, 0u);
  EXPECT_EQ(rm.Stats().maps, 0u);
}

TEST(ReadMappingsTest, EmptyFileGivesAnEmptyView) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  WriteFile(dir.Sub("empty"), "");
  Result<ReadView> v = rm.Open(dir.Sub("empty"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 0u);
  EXPECT_EQ(rm.Stats().maps, 0u);
}

TEST(ReadMappingsTest, KeepsOneMappingPerFileAndReusesIt) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  const std::string data = ReadPattern(64 * kReadKiB, 'b');
  WriteFile(dir.Sub("f"), data);
  Result<ReadView> first = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->kept());
  EXPECT_EQ(Bytes(*first), data);
  Result<ReadView> second = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->data(), first->data());  // the same mapping
  ReadMappingsStats s = rm.Stats();
  EXPECT_EQ(s.maps, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.mappings, 1u);
  EXPECT_EQ(s.mapped_bytes, 64 * kReadKiB);
}

TEST(ReadMappingsTest, TheMappingFollowsItsFileAcrossRenames) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  WriteFile(dir.Sub("seg_1"), ReadPattern(64 * kReadKiB, 'c'));
  Result<ReadView> in_pool = rm.Open(dir.Sub("seg_1"));
  ASSERT_TRUE(in_pool.ok());
  // pool → step → pool, as the segment pool recycles a file.
  ASSERT_TRUE(RenamePath(dir.Sub("seg_1"), dir.Sub("object")).ok());
  Result<ReadView> in_step = rm.Open(dir.Sub("object"));
  ASSERT_TRUE(in_step.ok());
  EXPECT_EQ(in_step->data(), in_pool->data());
  EXPECT_EQ(in_step->key(), in_pool->key());
  ASSERT_TRUE(RenamePath(dir.Sub("object"), dir.Sub("seg_2")).ok());
  ASSERT_TRUE(rm.Open(dir.Sub("seg_2")).ok());
  EXPECT_EQ(rm.Stats().maps, 1u);
  EXPECT_EQ(rm.Stats().hits, 2u);
}

TEST(ReadMappingsTest, SeesBytesWrittenAfterTheFileWasMapped) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  WriteFile(dir.Sub("f"), ReadPattern(64 * kReadKiB, 'd'));
  ASSERT_TRUE(rm.Open(dir.Sub("f")).ok());
  const std::string changed = ReadPattern(64 * kReadKiB, 'x');
  WriteFile(dir.Sub("f"), changed);  // O_TRUNC + write: same inode, new bytes
  Result<ReadView> again = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Bytes(*again), changed);
}

TEST(ReadMappingsTest, AFileThatGrewIsMappedAgain) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  const std::string data = ReadPattern(64 * kReadKiB, 'e');
  WriteFile(dir.Sub("f"), data);
  Result<ReadView> old = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(old.ok());
  Resize(dir.Sub("f"), 128 * kReadKiB);
  Result<ReadView> grown = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(grown.ok());
  EXPECT_EQ(grown->size(), 128 * kReadKiB);
  EXPECT_EQ(Bytes(*grown), data + std::string(64 * kReadKiB, '\0'));
  EXPECT_EQ(Bytes(*old), data);  // an older view stays readable
  ReadMappingsStats s = rm.Stats();
  EXPECT_EQ(s.maps, 2u);
  EXPECT_EQ(s.mappings, 1u);
  EXPECT_EQ(s.mapped_bytes, 128 * kReadKiB);
}

TEST(ReadMappingsTest, AFileThatShrankIsReadThroughItsLongerMapping) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  const std::string data = ReadPattern(128 * kReadKiB, 'f');
  WriteFile(dir.Sub("f"), data);
  ASSERT_TRUE(rm.Open(dir.Sub("f")).ok());
  Resize(dir.Sub("f"), 64 * kReadKiB);
  Result<ReadView> shrunk = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(shrunk.ok());
  EXPECT_EQ(shrunk->size(), 64 * kReadKiB);
  EXPECT_EQ(Bytes(*shrunk), data.substr(0, 64 * kReadKiB));
  EXPECT_EQ(rm.Stats().maps, 1u);
  EXPECT_EQ(rm.Stats().hits, 1u);
}

TEST(ReadMappingsTest, ForgetReleasesTheMappingButNotLiveViews) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  const std::string data = ReadPattern(64 * kReadKiB, 'g');
  WriteFile(dir.Sub("f"), data);
  Result<ReadView> v = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(v.ok());
  rm.ForgetPath(dir.Sub("f"));
  ASSERT_EQ(::unlink(dir.Sub("f").c_str()), 0);
  ReadMappingsStats s = rm.Stats();
  EXPECT_EQ(s.mappings, 0u);
  EXPECT_EQ(s.mapped_bytes, 0u);
  EXPECT_EQ(s.forgotten, 1u);
  EXPECT_EQ(Bytes(*v), data);  // the view still owns the mapping
  rm.ForgetPath(dir.Sub("f"));  // gone: no-op
  rm.Forget(v->key());          // already forgotten: no-op
  EXPECT_EQ(rm.Stats().forgotten, 1u);
}

TEST(ReadMappingsTest, ANewFileAfterForgetIsMappedAfresh) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  WriteFile(dir.Sub("f"), ReadPattern(64 * kReadKiB, 'h'));
  ASSERT_TRUE(rm.Open(dir.Sub("f")).ok());
  rm.ForgetPath(dir.Sub("f"));
  ASSERT_EQ(::unlink(dir.Sub("f").c_str()), 0);
  const std::string other = ReadPattern(64 * kReadKiB, 'i');
  WriteFile(dir.Sub("f"), other);
  Result<ReadView> v = rm.Open(dir.Sub("f"));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(Bytes(*v), other);
  EXPECT_EQ(rm.Stats().maps, 2u);
}

TEST(ReadMappingsTest, EvictsTheLeastRecentlyUsedToStayWithinMaxBytes) {
  TempDir dir;
  ReadMappings rm(SmallOptions(/*max_bytes=*/128 * kReadKiB));
  for (const char* n : {"a", "b", "c"}) WriteFile(dir.Sub(n), ReadPattern(64 * kReadKiB, n[0]));
  ASSERT_TRUE(rm.Open(dir.Sub("a")).ok());
  ASSERT_TRUE(rm.Open(dir.Sub("b")).ok());
  ASSERT_TRUE(rm.Open(dir.Sub("a")).ok());  // b is now the least recently used
  ASSERT_TRUE(rm.Open(dir.Sub("c")).ok());
  ReadMappingsStats s = rm.Stats();
  EXPECT_EQ(s.mappings, 2u);
  EXPECT_EQ(s.mapped_bytes, 128 * kReadKiB);
  EXPECT_EQ(s.evictions, 1u);
  ASSERT_TRUE(rm.Open(dir.Sub("a")).ok());  // still kept
  EXPECT_EQ(rm.Stats().maps, 3u);
  ASSERT_TRUE(rm.Open(dir.Sub("b")).ok());  // was evicted
  EXPECT_EQ(rm.Stats().maps, 4u);
}

TEST(ReadMappingsTest, EvictsToStayWithinMaxMappings) {
  TempDir dir;
  ReadMappings rm(SmallOptions(/*max_bytes=*/1 << 20, /*max_mappings=*/1));
  WriteFile(dir.Sub("a"), ReadPattern(8 * kReadKiB, 'a'));
  WriteFile(dir.Sub("b"), ReadPattern(8 * kReadKiB, 'b'));
  ASSERT_TRUE(rm.Open(dir.Sub("a")).ok());
  Result<ReadView> b = rm.Open(dir.Sub("b"));
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b->kept());
  EXPECT_EQ(rm.Stats().mappings, 1u);
  EXPECT_EQ(rm.Stats().evictions, 1u);
}

TEST(ReadMappingsTest, AFileLargerThanTheBoundIsReadButNotKept) {
  TempDir dir;
  ReadMappings rm(SmallOptions(/*max_bytes=*/32 * kReadKiB));
  const std::string data = ReadPattern(64 * kReadKiB, 'j');
  WriteFile(dir.Sub("big"), data);
  Result<ReadView> v = rm.Open(dir.Sub("big"));
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->kept());
  EXPECT_EQ(Bytes(*v), data);
  EXPECT_EQ(rm.Stats().mappings, 0u);
}

TEST(ReadMappingsTest, OpenOfAMissingFileNamesIt) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  Result<ReadView> v = rm.Open(dir.Sub("missing"));
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), Code::kNotFound);
  EXPECT_NE(v.status().message().find(dir.Sub("missing")), std::string::npos) << v.status().ToString();
}

TEST(ReadMappingsTest, ConcurrentOpensShareOneMappingPerFile) {
  TempDir dir;
  ReadMappings rm(SmallOptions());
  std::vector<std::string> data;
  for (int i = 0; i < 4; ++i) {
    data.push_back(ReadPattern(64 * kReadKiB, static_cast<char>('k' + i)));
    WriteFile(dir.Sub(FileName(i)), data.back());
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r) {
        int i = (t + r) % 4;
        Result<ReadView> v = rm.Open(dir.Sub(FileName(i)));
        if (!v.ok() || Bytes(*v) != data[static_cast<size_t>(i)]) {
          ++bad;
          continue;
        }
        if (r % 10 == 9) rm.Forget(v->key());  // churn: forgotten while others read
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  ReadMappingsStats s = rm.Stats();
  EXPECT_LE(s.mappings, 4u);
  EXPECT_EQ(s.hits + s.maps, 300u);
}

}  // namespace
}  // namespace tierckpt::agent
