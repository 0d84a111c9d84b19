#include "tier/part_record.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "common/checksum.h"
#include "tier/parts.h"

namespace tierckpt::agent {
namespace {

Manifest PartOf(const std::string& node, int n) {
  Manifest m;
  m.ns = "job";
  m.step = 9;
  m.node = node;
  m.world_size = static_cast<uint32_t>(n);
  for (int i = 1; i <= n; ++i) m.members.push_back("n" + std::to_string(i));
  std::sort(m.members.begin(), m.members.end());
  // A placement names the whole ring, as the agents' does (docs/placement.md).
  std::string ring;
  for (const std::string& id : m.members) ring += (ring.empty() ? "\"" : ",\"") + id + "\"";
  m.placement = "{\"format\":\"tierckpt.placement\",\"ring\":[" + ring + "]}";
  m.objects.push_back({"__" + node + ".distcp", 1, ComputeChecksum("x", 1).ToString(), node});
  return m;
}

// The same part as a non-coordinator keeps it since decision 116: the
// members by count, digest, its place and the coordinator; no placement.
Manifest CompactPartOf(const std::string& node, int n) {
  Manifest m = PartOf(node, n);
  const MemberListDigest d = DigestMembers(m.members);
  const auto self = std::find(m.members.begin(), m.members.end(), node);
  m.member_ref = MemberRef{static_cast<uint32_t>(d.count), static_cast<uint32_t>(self - m.members.begin()), d.digest,
                           node == "n1" ? "n2" : "n1"};
  m.members.clear();
  m.placement.clear();
  return m;
}

TEST(PartRecordTest, ARecordIsTheSameSizeWhateverTheMembers) {
  const size_t at2 = EncodePartRecord(CompactPartOf("n1", 2)).size();
  for (int n = 2; n <= 64; n *= 2) {
    const std::string record = EncodePartRecord(CompactPartOf("n1", n));
    EXPECT_LE(record.size(), at2 + 2) << "N = " << n << ":\n" << record;  // the digits of the count and world size
  }
}

TEST(PartRecordTest, RoundTripsWithTheMembersAsCountAndDigest) {
  const Manifest part = CompactPartOf("n2", 5);
  Result<PartRecord> back = ParsePartRecord(EncodePartRecord(part), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->members_digest.has_value());
  EXPECT_EQ(*back->members_digest, DigestMembers(PartOf("n2", 5).members));
  EXPECT_EQ(back->members_digest->count, 5u);
  EXPECT_TRUE(back->part.members.empty());
  EXPECT_FALSE(back->part.member_ref.has_value());
  EXPECT_TRUE(back->member_ids.empty());
  EXPECT_TRUE(back->part.placement.empty());  // the coordinator's record carries it
  EXPECT_EQ(back->part.node, "n2");
  EXPECT_EQ(back->part.objects.size(), 1u);
  EXPECT_EQ(back->part.world_size, 5u);
}

// Decision 116: a part that lists the members (the coordinator's) keeps the
// list and the placement in its record; a damaged list is refused.
TEST(PartRecordTest, TheCoordinatorsRecordListsTheMembersAndThePlacement) {
  const Manifest part = PartOf("n1", 5);
  const std::string text = EncodePartRecord(part);
  Result<PartRecord> back = ParsePartRecord(text, "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->member_ids, part.members);
  EXPECT_EQ(*back->members_digest, DigestMembers(part.members));
  EXPECT_TRUE(back->part.members.empty());
  EXPECT_EQ(back->part.placement, part.placement);
  std::string bad = text;
  bad.replace(bad.find("\"n3\""), 4, "\"n9\"");
  Result<PartRecord> r = ParsePartRecord(bad, "mem://x job/9/_tierckpt_part.n1.json");
  EXPECT_EQ(r.status().code(), Code::kCorruption);
  EXPECT_NE(r.status().message().find("do not match its count and digest"), std::string::npos)
      << r.status().ToString();
}

TEST(PartRecordTest, ARecordOfTheFirstFormatIsTheManifestWithItsList) {
  const Manifest part = PartOf("n2", 5);
  Result<PartRecord> back = ParsePartRecord(part.ToJson(), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->members_digest.has_value());
  EXPECT_EQ(back->part.members, part.members);
}

TEST(PartRecordTest, DamagedOrUnknownRecordsAreRefusedNamingTheRecord) {
  const std::string good = EncodePartRecord(CompactPartOf("n2", 3));
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"version\":1", "\"version\":2"},
           {"\"count\":3", "\"count\":-3"},
           {"xxh3-64:", "xxh3-32:"},
           {"\"part\"", "\"parts\""},
       }) {
    std::string bad = good;
    ASSERT_NE(bad.find(from), std::string::npos) << from;
    bad.replace(bad.find(from), from.size(), to);
    Result<PartRecord> r = ParsePartRecord(bad, "mem://x job/9/_tierckpt_part.n2.json");
    EXPECT_EQ(r.status().code(), Code::kCorruption) << from;
    EXPECT_NE(r.status().message().find("_tierckpt_part.n2.json"), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(ParsePartRecord("{", "x").status().code(), Code::kCorruption);
}

// Decision 113: a merger of a new agent merges records of both formats, and
// a record of another save (other members) is refused whichever its format.
TEST(PartRecordTest, AMergerTakesRecordsOfBothFormatsAndChecksTheirMembers) {
  PartMerger merger(PartOf("n1", 3));
  ASSERT_TRUE(merger.Add(PartOf("n1", 3)).ok());
  ASSERT_TRUE(merger.Add(*ParsePartRecord(PartOf("n2", 3).ToJson(), "old")).ok());
  ASSERT_TRUE(merger.Add(*ParsePartRecord(EncodePartRecord(PartOf("n3", 3)), "new")).ok());
  Result<Manifest> whole = merger.Finish("n1");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->objects.size(), 3u);
  EXPECT_EQ(whole->members, PartOf("n1", 3).members);
  EXPECT_EQ(whole->placement, PartOf("n1", 3).placement);

  PartMerger other(PartOf("n1", 3));
  Manifest foreign = PartOf("n2", 4);  // a save of the same step number on 4 nodes
  Status st = other.Add(*ParsePartRecord(EncodePartRecord(foreign), "new"));
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("4 members"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("3 members"), std::string::npos) << st.ToString();
  EXPECT_FALSE(other.Has("n2"));
  EXPECT_EQ(other.Add(*ParsePartRecord(foreign.ToJson(), "old")).code(), Code::kCorruption);
}

// Decision 116: a merger whose own part names the members by member_ref
// takes the list and the placement from the coordinator's record and merges
// every part, old or new; a coordinator's record of another save is refused.
TEST(PartRecordTest, AMergerWithoutTheListTakesItFromTheCoordinatorsRecord) {
  const Manifest own = CompactPartOf("n3", 3);
  Result<PartMerger> merger =
      PartMerger::FromCoordinatorRecord(own, *ParsePartRecord(EncodePartRecord(PartOf("n1", 3)), "coordinator"));
  ASSERT_TRUE(merger.ok()) << merger.status().ToString();
  EXPECT_EQ(merger->members(), PartOf("n1", 3).members);
  EXPECT_TRUE(merger->Has("n1"));
  ASSERT_TRUE(merger->Add(own).ok());
  ASSERT_TRUE(merger->Add(*ParsePartRecord(EncodePartRecord(CompactPartOf("n2", 3)), "new")).ok());
  Result<Manifest> whole = merger->Finish("n3");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->members, PartOf("n1", 3).members);
  EXPECT_EQ(whole->placement, PartOf("n1", 3).placement);
  EXPECT_EQ(whole->objects.size(), 3u);

  Result<PartMerger> foreign =
      PartMerger::FromCoordinatorRecord(own, *ParsePartRecord(EncodePartRecord(PartOf("n1", 4)), "coordinator"));
  ASSERT_TRUE(foreign.ok());  // the coordinator's list is the reference; own is checked against it when added
  Status st = foreign->Add(own);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("3 members"), std::string::npos) << st.ToString();
  // A coordinator's record without the list (a non-coordinator's form) cannot serve.
  EXPECT_EQ(PartMerger::FromCoordinatorRecord(own, *ParsePartRecord(EncodePartRecord(CompactPartOf("n1", 3)), "x"))
                .status()
                .code(),
            Code::kCorruption);
}

TEST(MergeTurnTest, APartWithoutTheListGivesItsOwnTurnFromItsPlaceAndTheCount) {
  Manifest full = PartOf("n1", 6);  // n1, n2, ..., n6
  for (uint64_t step : {0u, 7u, 8u, 11u}) {
    full.step = step;
    for (int i = 1; i <= 6; ++i) {
      Manifest part = CompactPartOf("n" + std::to_string(i), 6);
      part.step = step;
      EXPECT_EQ(MergeTurn(part, part.node), MergeTurn(full, part.node)) << "step " << step << " n" << i;
      EXPECT_EQ(MergeTurn(part, "n9"), kMaxMergeTurn);
    }
  }
}

}  // namespace
}  // namespace tierckpt::agent
