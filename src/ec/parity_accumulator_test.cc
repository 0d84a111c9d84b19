// ParityAccumulator (parity_accumulator.h): parts folded one at a time, in
// small chunks, give ReedSolomon::Encode's parity of the zero-padded pieces;
// a part whose bytes do not match its manifest, or whose source fails
// mid-way, leaves the parity as it was; folding twice, wrong indices, parts
// of another step and Seal before every member is in are refused.
#include "ec/parity_accumulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "ec/ec_test_parts.h"

namespace tierckpt::ec {
namespace {

using testing::Config;
using testing::EncodedParity;
using testing::MakeParts;
using testing::MeetingSource;
using testing::Rendezvous;
using testing::TestPart;

std::vector<std::vector<uint8_t>> Snapshot(const ParityAccumulator& acc, uint32_t m) {
  std::vector<std::vector<uint8_t>> out;
  for (uint32_t j = 0; j < m; ++j) out.emplace_back(acc.Parity(j).begin(), acc.Parity(j).end());
  return out;
}

// Shapes × chunk sizes (odd ones, and one above every piece), members in an
// arbitrary order: the parity is Encode's and the record describes it.
TEST(ParityAccumulatorTest, FoldingEachPartOnceEqualsEncodingThemAll) {
  struct Shape {
    uint32_t k, m, members;
  };
  for (Shape s : {Shape{4, 2, 4}, Shape{3, 1, 3}, Shape{6, 3, 6}, Shape{4, 2, 3}, Shape{6, 3, 2}}) {
    for (size_t chunk : {size_t{1} << 20, size_t{97}, size_t{4096}}) {
      SCOPED_TRACE("rs:" + std::to_string(s.k) + "+" + std::to_string(s.m) + " members " +
                   std::to_string(s.members) + " chunk " + std::to_string(chunk));
      std::vector<TestPart> parts = MakeParts(s.members, s.k * 10 + s.m + static_cast<uint32_t>(chunk));
      Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(s.k, s.m, s.members, chunk));
      ASSERT_TRUE(acc.ok()) << acc.status().ToString();
      std::vector<uint32_t> order(s.members);
      for (uint32_t i = 0; i < s.members; ++i) order[i] = s.members - 1 - i;
      for (uint32_t i : order) {
        EXPECT_FALSE(acc->Complete());
        Status st = acc->Fold(i, parts[i].manifest, parts[i].source);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
      EXPECT_TRUE(acc->Complete());
      const auto want = EncodedParity(s.k, s.m, parts);
      EXPECT_EQ(Snapshot(*acc, s.m), want);
      Result<ParityRecord> r = acc->Seal();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->data.size(), s.members);
      ASSERT_EQ(r->parity.size(), s.m);
      for (uint32_t i = 0; i < s.members; ++i) {
        EXPECT_EQ(r->data[i].member, parts[i].manifest.node);
        EXPECT_EQ(r->data[i].length, parts[i].piece.size());
        ASSERT_EQ(r->data[i].objects.size(), parts[i].manifest.objects.size());
        for (size_t o = 0; o < r->data[i].objects.size(); ++o) {
          EXPECT_EQ(r->data[i].objects[o].name, parts[i].manifest.objects[o].name);
          EXPECT_EQ(r->data[i].objects[o].checksum, parts[i].manifest.objects[o].checksum);
        }
      }
      for (uint32_t j = 0; j < s.m; ++j) {
        EXPECT_EQ(r->parity[j].index, j);
        EXPECT_EQ(r->parity[j].length, want[j].size());
        EXPECT_EQ(r->parity[j].checksum, ComputeChecksum(want[j].data(), want[j].size()).ToString());
      }
    }
  }
}

TEST(ParityAccumulatorTest, AHolderOfSomePiecesKeepsOnlyThoseAndTheRecordsMerge) {
  std::vector<TestPart> parts = MakeParts(4, 7);
  const auto want = EncodedParity(4, 2, parts);
  std::vector<ParityRecord> records;
  for (uint32_t j = 0; j < 2; ++j) {
    ParityAccumulatorConfig c = Config(4, 2, 4, 333);
    c.held = {j};
    Result<ParityAccumulator> acc = ParityAccumulator::Create(c);
    ASSERT_TRUE(acc.ok()) << acc.status().ToString();
    for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(acc->Fold(i, parts[i].manifest, parts[i].source).ok());
    EXPECT_TRUE(acc->Parity(1 - j).empty());
    EXPECT_EQ(std::vector<uint8_t>(acc->Parity(j).begin(), acc->Parity(j).end()), want[j]);
    Result<ParityRecord> r = acc->Seal();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->parity.size(), 1u);
    EXPECT_EQ(r->parity[0].index, j);
    records.push_back(*r);
  }
  ParityRecord merged = records[1];
  ASSERT_TRUE(merged.Merge(records[0]).ok());
  ASSERT_EQ(merged.parity.size(), 2u);
  EXPECT_EQ(merged.parity[0], records[0].parity[0]);
  EXPECT_EQ(merged.parity[1], records[1].parity[0]);
  // A record of other data does not merge, nor one whose piece differs.
  ParityRecord other = records[0];
  other.data[0].member = "node-x";
  EXPECT_EQ(merged.Merge(other).code(), Code::kInvalidArgument);
  ParityRecord conflict = records[0];
  conflict.parity[0].checksum = "xxh3-64:0000000000000000";
  EXPECT_EQ(merged.Merge(conflict).code(), Code::kInvalidArgument);
  EXPECT_EQ(merged.parity.size(), 2u);
}

// The corrupt object is the last of its part, so objects before it were
// folded already and must be taken out again.
TEST(ParityAccumulatorTest, ACorruptDataObjectIsRefusedAndLeavesTheParityAsItWas) {
  std::vector<TestPart> parts = MakeParts(4, 11, /*min_bytes=*/100);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(4, 2, 4, 64));
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->Fold(0, parts[0].manifest, parts[0].source).ok());
  const auto before = Snapshot(*acc, 2);

  TestPart& bad = parts[1];
  std::vector<ObjectEntry>& objs = bad.manifest.objects;
  auto last = std::find_if(objs.rbegin(), objs.rend(), [](const ObjectEntry& e) { return e.size > 0; });
  ASSERT_NE(last, objs.rend());
  std::vector<uint8_t>* bytes = bad.source.Find(last->name);
  (*bytes)[bytes->size() / 2] ^= 0x40;
  Status st = acc->Fold(1, bad.manifest, bad.source);
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find(last->name), std::string::npos) << st.message();
  EXPECT_EQ(Snapshot(*acc, 2), before);
  EXPECT_FALSE(acc->broken());
  EXPECT_EQ(acc->Missing(), (std::vector<uint32_t>{1, 2, 3}));

  (*bytes)[bytes->size() / 2] ^= 0x40;  // the intact copy
  for (uint32_t i = 1; i < 4; ++i) ASSERT_TRUE(acc->Fold(i, parts[i].manifest, parts[i].source).ok());
  EXPECT_EQ(Snapshot(*acc, 2), EncodedParity(4, 2, parts));
}

// Fails the nth read; with `flaky`, every read after the nth returns
// changed bytes instead.
class FailingSource : public ObjectSource {
 public:
  FailingSource(ObjectSource& inner, int fail_at, bool flaky)
      : inner_(inner), fail_at_(fail_at), flaky_(flaky) {}
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override {
    ++reads_;
    if (!flaky_ && reads_ == fail_at_) return IoError("injected read failure on " + std::string(name));
    TC_RETURN_IF_ERROR(inner_.Read(name, offset, buf, len));
    if (flaky_ && reads_ >= fail_at_ && len > 0) buf[0] ^= 1;
    return Status::Ok();
  }

 private:
  ObjectSource& inner_;
  int fail_at_;
  bool flaky_;
  int reads_ = 0;
};

TEST(ParityAccumulatorTest, AReadFailingMidwayLeavesTheParityAsItWas) {
  std::vector<TestPart> parts = MakeParts(3, 5, /*min_bytes=*/500);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(3, 1, 3, 50));
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->Fold(2, parts[2].manifest, parts[2].source).ok());
  const auto before = Snapshot(*acc, 1);
  FailingSource failing(parts[0].source, /*fail_at=*/4, /*flaky=*/false);
  Status st = acc->Fold(0, parts[0].manifest, failing);
  EXPECT_EQ(st.code(), Code::kIoError) << st.ToString();
  EXPECT_EQ(Snapshot(*acc, 1), before);
  for (uint32_t i = 0; i < 2; ++i) ASSERT_TRUE(acc->Fold(i, parts[i].manifest, parts[i].source).ok());
  EXPECT_EQ(Snapshot(*acc, 1), EncodedParity(3, 1, parts));
}

TEST(ParityAccumulatorTest, APartThatChangesWhileBeingTakenOutBreaksTheAccumulator) {
  std::vector<TestPart> parts = MakeParts(3, 5, /*min_bytes=*/500);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(3, 1, 3, 50));
  ASSERT_TRUE(acc.ok());
  // From read 3 on the bytes differ: the first object fails its checksum and
  // its second reading differs from its first.
  FailingSource flaky(parts[0].source, /*fail_at=*/3, /*flaky=*/true);
  Status st = acc->Fold(0, parts[0].manifest, flaky);
  EXPECT_EQ(st.code(), Code::kAborted) << st.ToString();
  EXPECT_TRUE(acc->broken());
  EXPECT_EQ(acc->Fold(1, parts[1].manifest, parts[1].source).code(), Code::kAborted);
  EXPECT_EQ(acc->Seal().status().code(), Code::kAborted);
}

TEST(ParityAccumulatorTest, FoldingAPartTwiceIsRefused) {
  std::vector<TestPart> parts = MakeParts(4, 3);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(4, 2, 4, 1000));
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->Fold(0, parts[0].manifest, parts[0].source).ok());
  const auto before = Snapshot(*acc, 2);
  EXPECT_EQ(acc->Fold(0, parts[0].manifest, parts[0].source).code(), Code::kAlreadyExists);
  // The same node's part under another index too.
  EXPECT_EQ(acc->Fold(1, parts[0].manifest, parts[0].source).code(), Code::kAlreadyExists);
  EXPECT_EQ(Snapshot(*acc, 2), before);
}

TEST(ParityAccumulatorTest, WrongIndicesStepsAndPendingChecksumsAreRefused) {
  std::vector<TestPart> parts = MakeParts(4, 3);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(4, 2, 3, 1000));  // a short last group
  ASSERT_TRUE(acc.ok());
  EXPECT_EQ(acc->Fold(3, parts[3].manifest, parts[3].source).code(), Code::kInvalidArgument);  // ≥ members
  EXPECT_EQ(acc->Fold(4, parts[0].manifest, parts[0].source).code(), Code::kInvalidArgument);  // ≥ k
  Manifest other_step = parts[0].manifest;
  other_step.step = testing::kStep + 1;
  EXPECT_EQ(acc->Fold(0, other_step, parts[0].source).code(), Code::kInvalidArgument);
  Manifest other_ns = parts[0].manifest;
  other_ns.ns = "other";
  EXPECT_EQ(acc->Fold(0, other_ns, parts[0].source).code(), Code::kInvalidArgument);
  Manifest pending = parts[0].manifest;
  pending.checksums_pending = true;
  EXPECT_EQ(acc->Fold(0, pending, parts[0].source).code(), Code::kFailedPrecondition);
  EXPECT_EQ(acc->Missing(), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_FALSE(ParityAccumulator::Create(Config(4, 2, 5, 1000)).ok());  // members > k
  EXPECT_FALSE(ParityAccumulator::Create(Config(4, 2, 0, 1000)).ok());
  ParityAccumulatorConfig held = Config(4, 2, 4, 1000);
  held.held = {2};
  EXPECT_FALSE(ParityAccumulator::Create(held).ok());
  held.held = {1, 1};
  EXPECT_FALSE(ParityAccumulator::Create(held).ok());
}

TEST(ParityAccumulatorTest, SealBeforeEveryMemberIsInIsRefusedNamingTheMissing) {
  std::vector<TestPart> parts = MakeParts(4, 9);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(4, 2, 4, 1000));
  ASSERT_TRUE(acc.ok());
  ASSERT_TRUE(acc->Fold(0, parts[0].manifest, parts[0].source).ok());
  ASSERT_TRUE(acc->Fold(2, parts[2].manifest, parts[2].source).ok());
  Result<ParityRecord> r = acc->Seal();
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("data pieces 1, 3 of 4"), std::string::npos) << r.status().message();
  ASSERT_TRUE(acc->Fold(1, parts[1].manifest, parts[1].source).ok());
  ASSERT_TRUE(acc->Fold(3, parts[3].manifest, parts[3].source).ok());
  r = acc->Seal();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(acc->Seal()->ToJson(), r->ToJson());
  EXPECT_EQ(acc->Fold(0, parts[0].manifest, parts[0].source).code(), Code::kFailedPrecondition);  // sealed
}

// Decision 148: the members' folds run at once (each meets the others at
// its first read, so none can have finished before another began), in small
// chunks so that their updates interleave, over parts of different lengths
// (the pieces grow while others fold), one of them corrupt (refused and
// taken out while the others fold), and a second fold of an index while its
// first is in flight: the parity is still Encode's.
TEST(ParityAccumulatorTest, FoldsOfDistinctMembersRunAtOnceAndStillGiveEncodesParity) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<TestPart> parts = MakeParts(4, 100 + round, /*min_bytes=*/200);
    Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(4, 2, 4, 97));
    ASSERT_TRUE(acc.ok());
    // Member 1's first fold is of a corrupt copy (its last non-empty object).
    TestPart bad = parts[1];
    auto last = std::find_if(bad.manifest.objects.rbegin(), bad.manifest.objects.rend(),
                             [](const ObjectEntry& e) { return e.size > 0; });
    ASSERT_NE(last, bad.manifest.objects.rend());
    (*bad.source.Find(last->name)).back() ^= 0x01;

    Rendezvous meet(4, std::chrono::seconds(20));
    std::vector<MeetingSource> sources;
    sources.emplace_back(&parts[0].source, &meet);
    sources.emplace_back(&bad.source, &meet);
    sources.emplace_back(&parts[2].source, &meet);
    sources.emplace_back(&parts[3].source, &meet);
    std::vector<Status> got(4);
    std::vector<std::thread> threads;
    for (uint32_t i = 0; i < 4; ++i) {
      threads.emplace_back([&, i] { got[i] = acc->Fold(i, (i == 1 ? bad : parts[i]).manifest, sources[i]); });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_TRUE(got[0].ok()) << got[0].ToString();
    EXPECT_EQ(got[1].code(), Code::kCorruption) << got[1].ToString();
    EXPECT_TRUE(got[2].ok()) << got[2].ToString();
    EXPECT_TRUE(got[3].ok()) << got[3].ToString();
    EXPECT_FALSE(acc->broken());
    EXPECT_EQ(acc->Missing(), (std::vector<uint32_t>{1}));

    // The intact copy, while a second fold of index 1 tries to join it.
    Rendezvous again(1, std::chrono::seconds(20));
    MeetingSource slow(&parts[1].source, &again);
    ASSERT_TRUE(acc->Fold(1, parts[1].manifest, slow).ok());
    EXPECT_EQ(acc->Fold(1, parts[1].manifest, parts[1].source).code(), Code::kAlreadyExists);
    EXPECT_TRUE(acc->Complete());
    EXPECT_EQ(Snapshot(*acc, 2), EncodedParity(4, 2, parts));
    EXPECT_TRUE(acc->Seal().ok());
  }
}

// Decision 149: a source that has the bytes in place is read through View,
// never copied with Read; an object whose source vouches for the manifest's
// checksum (a peer stream checked on arrival) is not hashed again, so the
// source's word is taken: a byte flipped behind it is not seen, while the
// same bytes from a source that does not vouch are refused.
class InPlaceSource : public ObjectSource {
 public:
  InPlaceSource(MemoryObjectSource* inner, std::string vouched_name, std::string vouched_sum)
      : inner_(inner), vouched_name_(std::move(vouched_name)), vouched_sum_(std::move(vouched_sum)) {}
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override {
    ++reads;
    return inner_->Read(name, offset, buf, len);
  }
  Result<const uint8_t*> View(std::string_view name, uint64_t offset, size_t len) override {
    return inner_->View(name, offset, len);
  }
  std::string VerifiedChecksum(std::string_view name) const override {
    return name == vouched_name_ ? vouched_sum_ : std::string();
  }
  int reads = 0;

 private:
  MemoryObjectSource* const inner_;
  const std::string vouched_name_;
  const std::string vouched_sum_;
};

TEST(ParityAccumulatorTest, BytesInPlaceAreNotCopiedAndAnObjectItsSourceVouchesForIsNotHashedAgain) {
  std::vector<TestPart> parts = MakeParts(3, 41, /*min_bytes=*/1000);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(3, 2, 3, 256));
  ASSERT_TRUE(acc.ok());
  std::vector<InPlaceSource> sources;
  for (TestPart& p : parts) sources.emplace_back(&p.source, "", "");
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(acc->Fold(i, parts[i].manifest, sources[i]).ok());
  for (const InPlaceSource& s : sources) EXPECT_EQ(s.reads, 0);
  EXPECT_EQ(Snapshot(*acc, 2), EncodedParity(3, 2, parts));

  // The first object (at least 1000 bytes) with a byte flipped behind its checksum.
  TestPart flipped = parts[0];
  const ObjectEntry& first = flipped.manifest.objects[0];
  ASSERT_GT(first.size, 0u);
  (*flipped.source.Find(first.name))[0] ^= 0x01;
  InPlaceSource vouching(&flipped.source, first.name, first.checksum);
  Result<ParityAccumulator> trusting = ParityAccumulator::Create(Config(3, 2, 3, 256));
  ASSERT_TRUE(trusting.ok());
  EXPECT_TRUE(trusting->Fold(0, flipped.manifest, vouching).ok());
  InPlaceSource silent(&flipped.source, "", "");
  Result<ParityAccumulator> checking = ParityAccumulator::Create(Config(3, 2, 3, 256));
  ASSERT_TRUE(checking.ok());
  EXPECT_EQ(checking->Fold(0, flipped.manifest, silent).code(), Code::kCorruption);
  // A source vouching for another checksum than the manifest's is hashed as any.
  InPlaceSource other(&flipped.source, first.name, "xxh3-64:0000000000000000");
  EXPECT_EQ(checking->Fold(0, flipped.manifest, other).code(), Code::kCorruption);
}

// An index, or a node, whose fold is in flight is refused as if folded.
TEST(ParityAccumulatorTest, AnIndexOrNodeWhoseFoldIsInFlightIsRefused) {
  std::vector<TestPart> parts = MakeParts(2, 21, /*min_bytes=*/100);
  Result<ParityAccumulator> acc = ParityAccumulator::Create(Config(2, 1, 2, 16));
  ASSERT_TRUE(acc.ok());
  // The first fold waits at its first read until the main thread has tried
  // the same index and the same node under the other index.
  Rendezvous meet(2, std::chrono::seconds(20));
  MeetingSource held(&parts[0].source, &meet);
  Status first;
  std::thread folding([&] { first = acc->Fold(0, parts[0].manifest, held); });
  while (meet.arrived() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // claimed
  const Status same_index = acc->Fold(0, parts[0].manifest, parts[0].source);
  const Status same_node = acc->Fold(1, parts[0].manifest, parts[0].source);
  EXPECT_TRUE(meet.Arrive().ok());
  folding.join();
  ASSERT_TRUE(first.ok()) << first.ToString();
  EXPECT_EQ(same_index.code(), Code::kAlreadyExists) << same_index.ToString();
  EXPECT_NE(same_index.message().find("in flight"), std::string::npos) << same_index.message();
  EXPECT_EQ(same_node.code(), Code::kAlreadyExists) << same_node.ToString();
  ASSERT_TRUE(acc->Fold(1, parts[1].manifest, parts[1].source).ok());
  EXPECT_EQ(Snapshot(*acc, 1), EncodedParity(2, 1, parts));
}

// A piece memory that refuses to grow while `refuse` is set (a full mount),
// in process memory otherwise; counts the pieces made.
class RefusingPieceMemory final : public PieceMemory {
 public:
  explicit RefusingPieceMemory(const bool* refuse) : refuse_(refuse), inner_(MakeHeapPieceMemory()) {}
  Status Resize(uint64_t length) override {
    if (*refuse_ && length > inner_->size()) return ResourceExhausted("no room (test)");
    return inner_->Resize(length);
  }
  uint8_t* data() override { return inner_->data(); }
  uint64_t size() const override { return inner_->size(); }
  Status Publish(int dir_fd, const std::string& name, const std::string& path) override {
    return inner_->Publish(dir_fd, name, path);
  }

 private:
  const bool* refuse_;
  std::unique_ptr<PieceMemory> inner_;
};

// Decision 163: a piece's memory that cannot grow refuses the fold that
// needed it, before any byte is read, and leaves the parity as it was: the
// index can be folded once there is room, and the parity is Encode's.
TEST(ParityAccumulatorTest, APieceMemoryThatCannotGrowRefusesTheFoldAndLeavesTheParityAsItWas) {
  std::vector<TestPart> parts = MakeParts(4, 21, /*min_bytes=*/300);
  bool refuse = false;
  uint32_t made = 0;
  ParityAccumulatorConfig c = Config(4, 2, 4, 64);
  c.memory = [&](uint32_t) -> Result<std::unique_ptr<PieceMemory>> {
    ++made;
    return std::unique_ptr<PieceMemory>(std::make_unique<RefusingPieceMemory>(&refuse));
  };
  Result<ParityAccumulator> acc = ParityAccumulator::Create(std::move(c));
  ASSERT_TRUE(acc.ok()) << acc.status().ToString();
  EXPECT_EQ(made, 2u);
  // The longest part first under refusal: nothing folds.
  uint32_t longest = 0;
  for (uint32_t i = 1; i < 4; ++i) {
    if (parts[i].piece.size() > parts[longest].piece.size()) longest = i;
  }
  refuse = true;
  Status st = acc->Fold(longest, parts[longest].manifest, parts[longest].source);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("data piece " + std::to_string(longest)), std::string::npos) << st.ToString();
  EXPECT_EQ(acc->length(), 0u);
  EXPECT_EQ(acc->Missing(), (std::vector<uint32_t>{0, 1, 2, 3}));
  refuse = false;
  for (uint32_t i = 0; i < 4; ++i) {
    st = acc->Fold(i, parts[i].manifest, parts[i].source);
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  EXPECT_EQ(Snapshot(*acc, 2), EncodedParity(4, 2, parts));
}

// The maker's error fails Create, naming the piece.
TEST(ParityAccumulatorTest, AMakerThatFailsFailsCreateNamingThePiece) {
  ParityAccumulatorConfig c = Config(4, 2, 4, 64);
  c.memory = [](uint32_t j) -> Result<std::unique_ptr<PieceMemory>> {
    if (j == 1) return ResourceExhausted("no pool (test)");
    return MakeHeapPieceMemory();
  };
  Result<ParityAccumulator> acc = ParityAccumulator::Create(std::move(c));
  ASSERT_FALSE(acc.ok());
  EXPECT_EQ(acc.status().code(), Code::kResourceExhausted);
  EXPECT_NE(acc.status().message().find("parity piece 1"), std::string::npos) << acc.status().ToString();
}

}  // namespace
}  // namespace tierckpt::ec
