// ParityPieceFiles (decision 163) over a real tmpfs-or-disk directory: a
// piece is a pool file folded in place, published by a rename, and reused
// (zeroed) once it comes back.
#include "replication/parity_piece_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "os/files.h"
#include "testing/temp_dir.h"

namespace tierckpt::agent {
namespace {

namespace fs = std::filesystem;

ino_t InodeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

class ParityPieceFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(dir.Sub("root/out")).ok());
    Result<UniqueFd> fd = OpenDirNoFollow(dir.Sub("root/out"));
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    out = std::move(fd).value();
  }
  std::string Pool() const { return dir.Sub("root/parity_pool"); }
  std::vector<std::string> PoolNames() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(Pool())) names.push_back(e.path().filename());
    return names;
  }

  testing_util::TempDir dir;
  UniqueFd out;
};

TEST_F(ParityPieceFilesTest, APieceGrowsZeroFilledKeepsItsBytesAndIsPublishedByARename) {
  ParityPieceFiles files(Pool());
  std::unique_ptr<ec::PieceMemory> piece = files.Make();
  EXPECT_EQ(piece->size(), 0u);
  ASSERT_TRUE(piece->Resize(5000).ok());
  ASSERT_EQ(piece->size(), 5000u);
  for (uint64_t i = 0; i < 5000; ++i) ASSERT_EQ(piece->data()[i], 0) << i;
  std::memset(piece->data(), 0xab, 5000);
  ASSERT_TRUE(piece->Resize(9000).ok());  // grows: kept, then zeros
  EXPECT_EQ(piece->data()[4999], 0xab);
  EXPECT_EQ(piece->data()[5000], 0);
  EXPECT_EQ(piece->data()[8999], 0);
  ASSERT_TRUE(piece->Resize(4000).ok());  // shrinks
  EXPECT_EQ(piece->data()[3999], 0xab);
  ASSERT_EQ(PoolNames().size(), 1u);  // the file folded in place is in the pool dir
  const ino_t inode = InodeOf(JoinPath(Pool(), PoolNames()[0]));

  ASSERT_TRUE(piece->Publish(out.get(), "parity_0", dir.Sub("root/out/parity_0")).ok());
  EXPECT_EQ(piece->size(), 0u);
  EXPECT_EQ(InodeOf(dir.Sub("root/out/parity_0")), inode);  // renamed, not copied
  Result<std::string> bytes = ReadFileToString(dir.Sub("root/out/parity_0"), 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, std::string(4000, '\xab'));
  piece.reset();  // published: nothing goes back to the pool
  EXPECT_TRUE(PoolNames().empty());
  EXPECT_EQ(files.pool_bytes(), 0u);
}

TEST_F(ParityPieceFilesTest, AnUnpublishedOrRecycledFileIsReusedZeroedForTheNextPiece) {
  ParityPieceFiles files(Pool());
  ino_t first = 0;
  {
    std::unique_ptr<ec::PieceMemory> piece = files.Make();
    ASSERT_TRUE(piece->Resize(8192).ok());
    std::memset(piece->data(), 0x5a, 8192);
    first = InodeOf(JoinPath(Pool(), PoolNames()[0]));
  }  // dropped before its seal: back to the pool, pages and bytes kept
  EXPECT_EQ(files.pool_bytes(), 8192u);

  std::unique_ptr<ec::PieceMemory> again = files.Make();
  ASSERT_TRUE(again->Resize(6000).ok());
  EXPECT_EQ(files.pool_bytes(), 0u);
  ASSERT_EQ(PoolNames().size(), 1u);
  EXPECT_EQ(InodeOf(JoinPath(Pool(), PoolNames()[0])), first);  // the same file
  for (uint64_t i = 0; i < 6000; ++i) ASSERT_EQ(again->data()[i], 0) << i;  // zeroed, not the old 0x5a
  ASSERT_TRUE(again->Publish(out.get(), "parity_1", dir.Sub("root/out/parity_1")).ok());

  // A sealed group's piece dropped: recycled into the pool as it is.
  Result<uint64_t> added = files.Recycle(out.get(), "parity_1", dir.Sub("root/out/parity_1"));
  ASSERT_TRUE(added.ok()) << added.status().ToString();
  EXPECT_EQ(*added, 6000u);
  EXPECT_FALSE(fs::exists(dir.Sub("root/out/parity_1")));
  EXPECT_EQ(files.pool_bytes(), 6000u);
  EXPECT_EQ(files.Release(1), 6000u);
  EXPECT_EQ(files.pool_bytes(), 0u);
  EXPECT_TRUE(PoolNames().empty());
}

TEST_F(ParityPieceFilesTest, RecycleNeverFollowsALinkAndLoadAdoptsOnlyPoolFiles) {
  ASSERT_TRUE(WriteFileAtomic(dir.Sub("root/keep"), "mine", false).ok());
  ASSERT_EQ(::symlink(dir.Sub("root/keep").c_str(), dir.Sub("root/out/parity_0").c_str()), 0);
  {
    ParityPieceFiles files(Pool());
    Result<uint64_t> added = files.Recycle(out.get(), "parity_0", dir.Sub("root/out/parity_0"));
    ASSERT_TRUE(added.ok()) << added.status().ToString();
    EXPECT_EQ(*added, 0u);
    EXPECT_TRUE(fs::is_symlink(dir.Sub("root/out/parity_0")));  // left for the caller to remove
    std::unique_ptr<ec::PieceMemory> piece = files.Make();
    ASSERT_TRUE(piece->Resize(100).ok());
  }  // its file stays in the pool
  ASSERT_TRUE(WriteFileAtomic(JoinPath(Pool(), "stray.tmp"), "x", false).ok());
  ParityPieceFiles restarted(Pool());
  std::unique_ptr<ec::PieceMemory> piece = restarted.Make();
  ASSERT_TRUE(piece->Resize(50).ok());  // the first use loads the pool: the earlier file, not the stray
  EXPECT_EQ(PoolNames().size(), 1u);
  EXPECT_EQ(PoolNames()[0].rfind("seg_", 0), 0u);
  Result<std::string> kept = ReadFileToString(dir.Sub("root/keep"), 1 << 20);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(*kept, "mine");
}

}  // namespace
}  // namespace tierckpt::agent
