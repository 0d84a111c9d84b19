// The sources and sinks of piece_io.h: a part folded from open files gives
// the parity it gives from memory, a rebuild reads parity pieces from files,
// and the sources' errors name the object and what failed.
#include "ec/piece_io.h"

#include <fcntl.h>
#include <gtest/gtest.h>

#include "ec/ec_test_parts.h"
#include "ec/rebuild.h"
#include "os/files.h"
#include "testing/temp_dir.h"

namespace tierckpt::ec {
namespace {

using testing::Config;
using testing::MakeParts;
using testing::TestPart;
using testing_util::TempDir;

UniqueFd WriteFile(const std::string& path, std::span<const uint8_t> bytes) {
  Result<UniqueFd> fd = OpenFile(path, O_RDWR | O_CREAT | O_TRUNC);
  EXPECT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_TRUE(PwriteAll(fd->get(), bytes.data(), bytes.size(), 0, path).ok());
  return std::move(*fd);
}

TEST(PieceIoTest, PartsFoldedFromFilesAndParityReadFromFilesRebuildAsFromMemory) {
  TempDir dir("tc_ec");
  std::vector<TestPart> parts = MakeParts(3, 77, /*min_bytes=*/1000);
  std::vector<FdObjectSource> files(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    for (const ObjectEntry& e : parts[i].manifest.objects) {
      const std::string path =
          dir.Sub("p" + std::to_string(i) + "_" + std::to_string(&e - &parts[i].manifest.objects[0]));
      ASSERT_TRUE(files[i].Add(e.name, WriteFile(path, *parts[i].source.Find(e.name)), path).ok());
    }
  }
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(3, 2, 3, 256));
  ASSERT_TRUE(acc.ok());
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(acc->Fold(i, parts[i].manifest, files[i]).ok());
  const auto want = testing::EncodedParity(3, 2, parts);
  for (uint32_t j = 0; j < 2; ++j)
    EXPECT_EQ(std::vector<uint8_t>(acc->Parity(j).begin(), acc->Parity(j).end()), want[j]);
  Result<ParityRecord> record = acc->Seal();
  ASSERT_TRUE(record.ok());

  FdPieceSource p0(WriteFile(dir.Sub("parity0"), want[0]), dir.Sub("parity0"));
  FdPieceSource p1(WriteFile(dir.Sub("parity1"), want[1]), dir.Sub("parity1"));
  std::vector<Survivor> survivors = {
      {.piece = 2, .part = &files[2]}, {.piece = 3, .parity = &p0}, {.piece = 4, .parity = &p1}};
  for (uint32_t lost : {0u, 1u}) {
    MemoryObjectSink sink;
    Result<RebuildReport> r =
        RebuildPiece(*record, lost, survivors, sink, RebuildOptions{.chunk_bytes = 100});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    for (const ObjectEntry& e : parts[lost].manifest.objects)
      EXPECT_EQ(sink.objects().at(e.name), *parts[lost].source.Find(e.name));
  }
}

TEST(PieceIoTest, SourcesSayWhatFailedAndWhere) {
  TempDir dir("tc_ec");
  std::vector<uint8_t> bytes(10, 7);
  FdObjectSource files;
  ASSERT_TRUE(files.Add("a.pt", WriteFile(dir.Sub("a"), bytes), dir.Sub("a")).ok());
  EXPECT_EQ(files.Add("a.pt", WriteFile(dir.Sub("b"), bytes), dir.Sub("b")).code(), Code::kAlreadyExists);
  uint8_t buf[20];
  EXPECT_TRUE(files.Read("a.pt", 2, buf, 8).ok());
  Status st = files.Read("a.pt", 5, buf, 8);  // past the end of the file
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("object a.pt (" + dir.Sub("a") + ")"), std::string::npos) << st.message();
  EXPECT_EQ(files.Read("b.pt", 0, buf, 1).code(), Code::kNotFound);

  MemoryObjectSource mem;
  mem.Put("x", bytes);
  EXPECT_EQ(mem.Read("x", 4, buf, 7).code(), Code::kIoError);
  EXPECT_EQ(mem.Read("y", 0, buf, 1).code(), Code::kNotFound);
  MemoryPieceSource piece(bytes);
  EXPECT_TRUE(piece.Read(0, buf, 10).ok());
  EXPECT_EQ(piece.Read(9, buf, 2).code(), Code::kIoError);
}

}  // namespace
}  // namespace tierckpt::ec
