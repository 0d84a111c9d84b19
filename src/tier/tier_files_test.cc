// TierFiles: the tier's file work as values in, values out (no tier, no lock).
#include "tier/tier_files.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/files.h"
#include "os/fs_stat.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TempDir;

class TierFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(layout_.PoolDir(), 0700).ok());
    ASSERT_TRUE(MakeDirs(layout_.NamespacesDir(), 0700).ok());
  }
  TempDir dir_;
  Layout layout_{dir_.Sub("root")};
  ReadMappings mappings_{ReadMappingsOptions{.max_bytes = 1u << 30, .min_file_bytes = 1}};
  TierFiles files_{&layout_, &mappings_};
};

TEST_F(TierFilesTest, ObjectsAreCreatedOnceBeneathTheStepDir) {
  const std::string partial = layout_.PartialDir("ns", 1);
  Result<UniqueFd> dir = files_.MakeStepDir(partial);
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  Result<UniqueFd> fd = files_.CreateObjectFile(dir->get(), partial, "sub/obj", 4096);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(StatPath(partial + "/sub/obj")->size, 4096u);
  // A second creator of the name fails; the first's file stays.
  Result<UniqueFd> again = files_.CreateObjectFile(dir->get(), partial, "sub/obj", 1);
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  EXPECT_EQ(StatPath(partial + "/sub/obj")->size, 4096u);
  Result<bool> reserved = files_.ReserveFile(fd->get(), 4096, "ns/1/sub/obj");
  ASSERT_TRUE(reserved.ok()) << reserved.status().ToString();
  EXPECT_TRUE(*reserved) << "a fresh (sparse) object file must get its pages reserved";
}

// Issue 40: a steady save's CreateObject spent ~28 ms per 512 MiB in
// fallocate of a recycled segment whose pages were all there already. Such
// a file is handed out as it is; one with a hole anywhere is still reserved.
TEST_F(TierFilesTest, ReserveFileSkipsAFileThatHoldsEveryPageAndReservesOneWithHoles) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // The agent's root is a tmpfs (/dev/shm by default); /tmp here is another file system.
  for (const std::string base : {"/dev/shm", "/tmp"}) {
    SCOPED_TRACE(base);
    const std::string path = base + "/tc_reserve_" + std::to_string(::getpid()) + "_seg";
    struct Remove {
      std::string path;
      ~Remove() { ::unlink(path.c_str()); }
    } remove{path};
    auto allocated = [&] { return StatFile(path, Follow::kNo, IfMissing::kFail)->allocated_bytes; };
    auto reserve = [&](uint64_t size) {
      Result<UniqueFd> fd = OpenFile(path, O_RDWR);
      EXPECT_TRUE(fd.ok()) << fd.status().ToString();
      if (!fd.ok()) return false;
      EXPECT_TRUE(TruncateFd(fd->get(), size, "test").ok());
      Result<bool> r = files_.ReserveFile(fd->get(), size, "ns/1/seg");
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      return r.ok() && *r;
    };
    // Written in full: every page is there, nothing to reserve.
    ASSERT_TRUE(WriteFileAtomic(path, std::string(16 * page, 'x'), false).ok());
    ASSERT_EQ(allocated(), 16 * page);
    EXPECT_FALSE(reserve(16 * page));
    // Cut to a size that ends inside a page: still whole.
    EXPECT_FALSE(reserve(10 * page + 1));
    // Grown past its pages (a pool segment given a larger object): a hole at the end.
    EXPECT_TRUE(reserve(20 * page));
    EXPECT_EQ(allocated(), 20 * page);
    EXPECT_FALSE(reserve(20 * page));
    // A hole in the middle, the same size on disk as a whole file of a page less.
    {
      Result<UniqueFd> fd = OpenFile(path, O_RDWR);
      ASSERT_TRUE(fd.ok());
      ASSERT_EQ(::fallocate(fd->get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 5 * page, page), 0);
    }
    ASSERT_EQ(allocated(), 19 * page);
    EXPECT_TRUE(reserve(20 * page));
    EXPECT_EQ(allocated(), 20 * page);
  }
}

TEST_F(TierFilesTest, MakeStepDirReplacesWhatACrashLeft) {
  const std::string partial = layout_.PartialDir("ns", 2);
  ASSERT_TRUE(MakeDirs(partial + "/old", 0700).ok());
  ASSERT_TRUE(files_.MakeStepDir(partial).ok());
  EXPECT_TRUE(StatPath(partial)->exists);
  EXPECT_FALSE(StatPath(partial + "/old")->exists);
}

TEST_F(TierFilesTest, PlaceSegmentTruncatesAndMovesIt) {
  const std::string partial = layout_.PartialDir("ns", 3);
  Result<UniqueFd> dir = files_.MakeStepDir(partial);
  ASSERT_TRUE(dir.ok());
  const std::string seg = layout_.PoolDir() + "/seg_7";
  ASSERT_TRUE(WriteFileAtomic(seg, std::string(8192, 'x'), false).ok());
  uint64_t size_now = 0;
  Result<UniqueFd> fd = files_.PlaceSegment(seg, 8192, dir->get(), partial, "obj", 100, &size_now);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_EQ(size_now, 100u);
  EXPECT_FALSE(StatPath(seg)->exists);
  EXPECT_EQ(StatPath(partial + "/obj")->size, 100u);
  // A missing segment: an error, nothing placed.
  Result<UniqueFd> none = files_.PlaceSegment(seg, 8192, dir->get(), partial, "obj2", 100, &size_now);
  EXPECT_FALSE(none.ok());
  EXPECT_FALSE(StatPath(partial + "/obj2")->exists);
}

TEST_F(TierFilesTest, RecycleMovesTheDirAsideAndTheFilesToTheirSegments) {
  const std::string step = layout_.StepDir("ns", 4);
  ASSERT_TRUE(MakeDirs(step + "/d", 0700).ok());
  ASSERT_TRUE(WriteFileAtomic(step + "/a", std::string(1000, 'a'), false).ok());
  ASSERT_TRUE(WriteFileAtomic(step + "/d/b", std::string(10, 'b'), false).ok());
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(step), "{}", false).ok());
  const uint64_t inode = testing::InodeOf(step + "/a");
  FileJobs jobs;
  RecycleJob job;
  job.dir = step;
  job.aside = layout_.PoolDir() + "/dropped_9";
  job.reserved = true;
  job.files = {RecycledFile{"a", 1000, 5, "ns/a"}, RecycledFile{"d/b", 10, std::nullopt, "ns/d/b"},
               RecycledFile{"never-made", 3, 6, "ns/never-made"}};
  jobs.recycles.push_back(job);
  jobs.namespace_rmdirs.push_back(layout_.NamespaceDir("ns"));
  FileOutcomes out = files_.Run(std::move(jobs));
  ASSERT_EQ(out.adopted.size(), 1u);
  EXPECT_EQ(out.adopted[0].id, 5u);
  EXPECT_EQ(out.adopted[0].bytes, 1000u);
  EXPECT_EQ(out.adopted[0].affinity, "ns/a");  // for the pool to hand it to object a first
  EXPECT_EQ(out.recycled_recorded, 1003u);  // both files bound for the pool
  EXPECT_EQ(out.released, std::vector<std::string>({step}));
  EXPECT_EQ(testing::InodeOf(layout_.PoolDir() + "/seg_5"), inode);  // same inode: pages stay
  EXPECT_FALSE(StatPath(step)->exists);
  EXPECT_FALSE(StatPath(layout_.PoolDir() + "/dropped_9")->exists);
  EXPECT_FALSE(StatPath(layout_.NamespaceDir("ns"))->exists);  // empty: removed
}

TEST_F(TierFilesTest, PublishRenamesAndAFailedOneLeavesNoRecords) {
  const std::string partial = layout_.PartialDir("ns", 5);
  ASSERT_TRUE(files_.MakeStepDir(partial).ok());
  Manifest m;
  m.ns = "ns";
  m.step = 5;
  ASSERT_TRUE(TierFiles::WriteStepRecords(partial, m, /*persist_marker=*/true).ok());
  EXPECT_TRUE(StatPath(Layout::MarkerPath(partial))->exists);
  const std::string blocker = layout_.StepDir("ns", 5);
  ASSERT_TRUE(MakeDirs(blocker + "/x", 0700).ok());  // a non-empty dir where it would go
  EXPECT_FALSE(files_.Publish(partial, blocker).ok());
  EXPECT_FALSE(StatPath(Layout::ManifestPath(partial))->exists);
  EXPECT_FALSE(StatPath(Layout::MarkerPath(partial))->exists);
  ASSERT_TRUE(RemoveTree(blocker).ok());
  ASSERT_TRUE(TierFiles::WriteStepRecords(partial, m, false).ok());
  ASSERT_TRUE(files_.Publish(partial, blocker).ok());
  EXPECT_TRUE(StatPath(Layout::ManifestPath(blocker))->exists);
}

}  // namespace
}  // namespace tierckpt::agent
