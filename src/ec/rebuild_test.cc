// RebuildPiece (rebuild.h): for 4+2, 3+1 and 6+3 groups (full and short),
// every pattern of up to M lost pieces rebuilds each lost member's objects
// byte for byte from the survivors; a corrupt parity piece is detected and
// set aside (used in its place: another survivor; none left: an error naming
// it); too few survivors is kFailedPrecondition naming the counts.
#include "ec/rebuild.h"

#include <gtest/gtest.h>

#include <memory>

#include "ec/ec_test_parts.h"

namespace tierckpt::ec {
namespace {

using testing::Config;
using testing::MakeParts;
using testing::TestPart;

struct Group {
  uint32_t k = 0, m = 0;
  std::vector<TestPart> parts;
  std::vector<std::vector<uint8_t>> parity;
  ParityRecord record;
};

Group MakeGroup(uint32_t k, uint32_t m, uint32_t members, uint32_t seed, uint64_t min_bytes = 0) {
  Group g{k, m, MakeParts(members, seed, min_bytes), {}, {}};
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(k, m, members, 1000));
  EXPECT_TRUE(acc.ok());
  for (uint32_t i = 0; i < members; ++i)
    EXPECT_TRUE(acc->Fold(i, g.parts[i].manifest, g.parts[i].source).ok());
  for (uint32_t j = 0; j < m; ++j) g.parity.emplace_back(acc->Parity(j).begin(), acc->Parity(j).end());
  Result<ParityRecord> r = acc->Seal();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (r.ok()) g.record = *r;
  return g;
}

// The survivors of group g when the pieces in `lost` (bits: data pieces
// 0..members-1, then parity k..k+m-1) are gone.
struct Survivors {
  std::vector<std::unique_ptr<MemoryPieceSource>> parity;
  std::vector<Survivor> list;
};
Survivors SurvivorsOf(Group& g, uint64_t lost_mask) {
  Survivors s;
  for (uint32_t i = 0; i < g.parts.size(); ++i) {
    if (!(lost_mask >> i & 1)) s.list.push_back(Survivor{.piece = i, .part = &g.parts[i].source});
  }
  for (uint32_t j = 0; j < g.m; ++j) {
    if (lost_mask >> (g.k + j) & 1) continue;
    s.parity.push_back(std::make_unique<MemoryPieceSource>(g.parity[j]));
    s.list.push_back(Survivor{.piece = g.k + j, .parity = s.parity.back().get()});
  }
  return s;
}

void ExpectRebuilt(const TestPart& part, const MemoryObjectSink& sink) {
  ASSERT_EQ(sink.objects().size(), part.manifest.objects.size());
  for (const ObjectEntry& e : part.manifest.objects) {
    auto it = sink.objects().find(e.name);
    ASSERT_NE(it, sink.objects().end()) << e.name;
    EXPECT_EQ(it->second, *const_cast<TestPart&>(part).source.Find(e.name)) << e.name;
  }
}

TEST(RebuildTest, EveryPatternOfUpToMLostPiecesRebuildsEachLostPartByteForByte) {
  struct Shape {
    uint32_t k, m, members;
  };
  for (Shape sh : {Shape{4, 2, 4}, Shape{3, 1, 3}, Shape{6, 3, 6}, Shape{4, 2, 3}, Shape{6, 3, 4}}) {
    for (size_t chunk : {size_t{1} << 20, size_t{61}}) {
      SCOPED_TRACE("rs:" + std::to_string(sh.k) + "+" + std::to_string(sh.m) + " members " +
                   std::to_string(sh.members) + " chunk " + std::to_string(chunk));
      Group g = MakeGroup(sh.k, sh.m, sh.members, sh.k * 100 + sh.m * 10 + sh.members);
      int rebuilt = 0;
      const uint32_t n = sh.k + sh.m;
      for (uint64_t lost = 1; lost < (uint64_t{1} << n); ++lost) {
        bool zero_piece = false;  // a short group's missing pieces are never lost
        for (uint32_t i = sh.members; i < sh.k; ++i) zero_piece |= (lost >> i & 1) != 0;
        if (zero_piece || __builtin_popcountll(lost) > static_cast<int>(sh.m)) continue;
        Survivors s = SurvivorsOf(g, lost);
        for (uint32_t i = 0; i < sh.members; ++i) {
          if (!(lost >> i & 1)) continue;
          MemoryObjectSink sink;
          Result<RebuildReport> r =
              RebuildPiece(g.record, i, s.list, sink, RebuildOptions{.chunk_bytes = chunk});
          ASSERT_TRUE(r.ok()) << "lost mask " << lost << ", piece " << i << ": " << r.status().ToString();
          EXPECT_TRUE(r->rejected.empty());
          EXPECT_EQ(r->used.size(), sh.k);
          ExpectRebuilt(g.parts[i], sink);
          if (HasFatalFailure()) return;
          ++rebuilt;
        }
      }
      EXPECT_GT(rebuilt, 0);
    }
  }
}

TEST(RebuildTest, ACorruptParityPieceIsDetectedAndAnotherSurvivorUsed) {
  Group g = MakeGroup(4, 2, 4, 21, /*min_bytes=*/200);
  g.parity[0][100] ^= 0x08;                        // inside the lost piece's length: it matters
  Survivors s = SurvivorsOf(g, uint64_t{1} << 0);  // data 1..3, parity 0 (corrupt) and 1
  MemoryObjectSink sink;
  Result<RebuildReport> r = RebuildPiece(g.record, 0, s.list, sink, RebuildOptions{.chunk_bytes = 64});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->rejected.size(), 1u);
  EXPECT_EQ(r->rejected[0].first, 4u);  // parity piece 0
  EXPECT_EQ(r->rejected[0].second.code(), Code::kCorruption);
  EXPECT_EQ(r->used, (std::vector<uint32_t>{1, 2, 3, 5}));
  ExpectRebuilt(g.parts[0], sink);
}

TEST(RebuildTest, ACorruptParityPieceWithNoOtherSurvivorFailsNamingIt) {
  Group g = MakeGroup(4, 2, 4, 21, /*min_bytes=*/200);
  g.parity[0][100] ^= 0x08;
  Survivors s = SurvivorsOf(g, (uint64_t{1} << 0) | (uint64_t{1} << 5));  // parity 1 lost too
  MemoryObjectSink sink;
  Result<RebuildReport> r = RebuildPiece(g.record, 0, s.list, sink);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("3 usable pieces of the 4 needed"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("parity piece 0 hashes to"), std::string::npos) << r.status().message();
}

TEST(RebuildTest, ACorruptDataSurvivorIsSetAsideToo) {
  Group g = MakeGroup(3, 1, 3, 8, /*min_bytes=*/300);
  const std::string& name = g.parts[1].manifest.objects[0].name;
  (*g.parts[1].source.Find(name))[5] ^= 1;
  Survivors s = SurvivorsOf(g, uint64_t{1} << 0);  // data 1 (corrupt), data 2, parity 0
  MemoryObjectSink sink;
  Result<RebuildReport> r = RebuildPiece(g.record, 0, s.list, sink);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("data piece 1 (node node-1): object " + name), std::string::npos)
      << r.status().message();
}

TEST(RebuildTest, FewerThanKSurvivorsIsRefusedNamingTheCounts) {
  Group g = MakeGroup(4, 2, 4, 2);
  Survivors s = SurvivorsOf(g, 0b000111);  // three lost of 4+2
  MemoryObjectSink sink;
  Result<RebuildReport> r = RebuildPiece(g.record, 0, s.list, sink);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("3 usable pieces of the 4 needed (3 survivors given, 0 set aside"),
            std::string::npos)
      << r.status().message();
  // A parity piece the record does not describe is not used.
  ParityRecord only_one = g.record;
  only_one.parity.pop_back();
  Survivors t = SurvivorsOf(g, 0b000001);
  r = RebuildPiece(only_one, 0, t.list, sink);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rejected.size(), 1u);
}

TEST(RebuildTest, BadArgumentsAreRefused) {
  Group g = MakeGroup(4, 2, 3, 2);  // a short group: piece 3 is zeros
  Survivors s = SurvivorsOf(g, 0b000001);
  MemoryObjectSink sink;
  EXPECT_EQ(RebuildPiece(g.record, 3, s.list, sink).status().code(), Code::kInvalidArgument);  // a zero piece
  std::vector<Survivor> with_lost = s.list;
  with_lost.push_back(Survivor{.piece = 0, .part = &g.parts[0].source});
  EXPECT_EQ(RebuildPiece(g.record, 0, with_lost, sink).status().code(), Code::kInvalidArgument);
  std::vector<Survivor> twice = s.list;
  twice.push_back(s.list[0]);
  EXPECT_EQ(RebuildPiece(g.record, 0, twice, sink).status().code(), Code::kInvalidArgument);
  std::vector<Survivor> zero = s.list;
  zero.push_back(Survivor{.piece = 3, .part = &g.parts[0].source});
  EXPECT_EQ(RebuildPiece(g.record, 0, zero, sink).status().code(), Code::kInvalidArgument);
  std::vector<Survivor> no_source = s.list;
  no_source[0].part = nullptr;
  EXPECT_EQ(RebuildPiece(g.record, 0, no_source, sink).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace tierckpt::ec
