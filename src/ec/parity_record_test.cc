// ParityRecord (parity_record.h): ToJson → Parse gives the record back, and
// Parse refuses each broken field with kCorruption naming it and where.
#include "ec/parity_record.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "common/checksum.h"

namespace tierckpt::ec {
namespace {

using nlohmann::json;

std::string Sum(const std::string& s) { return ComputeChecksum(s.data(), s.size()).ToString(); }

ParityRecord Sample() {
  ParityRecord r;
  r.ns = "job";
  r.step = 1200;
  r.group = 2;
  r.k = 4;
  r.m = 2;
  r.data.push_back(
      DataPiece{"node-a", 7, {{"a.pt", 3, Sum("a")}, {"b/c.pt", 0, Sum("")}, {"d.pt", 4, Sum("d")}}});
  r.data.push_back(DataPiece{"node-b", 10, {{"x.pt", 10, Sum("x")}}});
  r.data.push_back(DataPiece{"node-c", 0, {}});  // a part with no objects
  r.parity.push_back(ParityPiece{0, 10, Sum("p0")});
  r.parity.push_back(ParityPiece{1, 10, Sum("p1")});
  return r;
}

TEST(ParityRecordTest, ToJsonThenParseGivesTheRecordBack) {
  const ParityRecord r = Sample();
  ASSERT_TRUE(r.Validate().ok()) << r.Validate().ToString();
  const std::string text = r.ToJson();
  Result<ParityRecord> back = ParityRecord::Parse(text, "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->ToJson(), text);
  EXPECT_EQ(back->PieceLength(), 10u);
  // A holder's record of one piece of a code with the most pieces.
  ParityRecord one = r;
  one.k = 200;
  one.m = 56;
  one.parity = {ParityPiece{55, 10, Sum("p55")}};
  Result<ParityRecord> back_one = ParityRecord::Parse(one.ToJson(), "test");
  ASSERT_TRUE(back_one.ok()) << back_one.status().ToString();
  EXPECT_EQ(*back_one, one);
}

struct Broken {
  std::string what;
  std::function<void(json&)> edit;
  std::string says;  // the message must contain this
};

// Each case's edit of the good record is refused by Parse as corruption, its message naming the
// broken field (says) and the file.
void ExpectEachRefused(const json& good, const std::vector<Broken>& cases) {
  for (const Broken& c : cases) {
    json j = good;
    c.edit(j);
    Result<ParityRecord> r = ParityRecord::Parse(j.dump(), "holder-3/rec.json");
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << c.what;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.what << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("holder-3/rec.json"), std::string::npos) << c.what;
  }
}

TEST(ParityRecordTest, ParseRefusesEachBrokenFieldNamingIt) {
  const std::vector<Broken> cases = {
      {"format", [](json& j) { j["format"] = "tierckpt.manifest"; }, "format is \"tierckpt.manifest\""},
      {"format missing", [](json& j) { j.erase("format"); }, "\"format\" must be a string"},
      {"version", [](json& j) { j["version"] = 2; }, "has version 2"},
      {"version type", [](json& j) { j["version"] = "1"; }, "\"version\" must be a non-negative integer"},
      {"namespace", [](json& j) { j["namespace"] = "../x"; }, "namespace"},
      {"step", [](json& j) { j["step"] = -1; }, "\"step\" must be a non-negative integer"},
      {"step range", [](json& j) { j["step"] = uint64_t{10'000'000'000}; }, "step"},
      {"group", [](json& j) { j.erase("group"); }, "\"group\" must be"},
      {"group range", [](json& j) { j["group"] = uint64_t{1} << 32; }, "\"group\" is 4294967296, above"},
      {"k zero", [](json& j) { j["k"] = 0; }, "rs:0+2 needs"},
      {"m zero", [](json& j) { j["m"] = 0; }, "rs:4+0 needs"},
      {"too many pieces", [](json& j) { j["k"] = 255; }, "k + m ≤ 256"},
      {"data type", [](json& j) { j["data"] = json::object(); }, "\"data\" must be an array"},
      {"data empty", [](json& j) { j["data"] = json::array(); }, "data lists 0 pieces"},
      {"data above k", [](json& j) { j["k"] = 2; }, "data lists 3 pieces"},
      {"data entry", [](json& j) { j["data"][1] = 5; }, "\"data[1]\" must be an object"},
      {"member", [](json& j) { j["data"][1]["member"] = "a b"; }, "data[1].member (a node id)"},
      {"member missing", [](json& j) { j["data"][1].erase("member"); },
       "\"data[1].member\" must be a string"},
      {"member twice", [](json& j) { j["data"][2]["member"] = "node-a"; },
       "data[2].member \"node-a\" is another"},
      {"piece length", [](json& j) { j["data"][0]["piece_length"] = 8; }, "data[0].piece_length is 8 but"},
      {"objects type", [](json& j) { j["data"][0]["objects"] = "x"; },
       "\"data[0].objects\" must be an array"},
      {"object name", [](json& j) { j["data"][0]["objects"][1]["name"] = "b//c"; },
       "data[0].objects[1].name"},
      {"object reserved name", [](json& j) { j["data"][0]["objects"][0]["name"] = "_tierckpt_x"; },
       "data[0].objects[0].name"},
      {"objects unsorted", [](json& j) { std::swap(j["data"][0]["objects"][0], j["data"][0]["objects"][2]); },
       "must be sorted by name and unique"},
      {"objects repeated", [](json& j) { j["data"][0]["objects"][2]["name"] = "b/c.pt"; },
       "data[0].objects[2].name \"b/c.pt\" is not after"},
      {"object size", [](json& j) { j["data"][0]["objects"][0]["size"] = 3.5; },
       "\"data[0].objects[0].size\" must be a non-negative integer"},
      {"object sizes overflow",
       [](json& j) {
         j["data"][0]["objects"][0]["size"] = UINT64_MAX;
         j["data"][0]["objects"][2]["size"] = 5;
       },
       "data[0].objects[2].size overflows"},
      {"object checksum", [](json& j) { j["data"][0]["objects"][2]["checksum"] = "crc32:00"; },
       "data[0].objects[2].checksum"},
      {"parity type", [](json& j) { j["parity"] = 1; }, "\"parity\" must be an array"},
      {"parity empty", [](json& j) { j["parity"] = json::array(); }, "parity lists no piece"},
      {"parity index", [](json& j) { j["parity"][1]["index"] = 2; }, "parity[1].index is 2, not below m = 2"},
      {"parity index twice", [](json& j) { j["parity"][1]["index"] = 0; }, "parity[1].index 0 is not above"},
      {"parity length", [](json& j) { j["parity"][0]["length"] = 7; },
       "parity[0].length is 7 but the longest"},
      {"parity checksum", [](json& j) { j["parity"][1]["checksum"] = "xxh3-64:123"; }, "parity[1].checksum"},
      {"parity entry", [](json& j) { j["parity"][0] = json::array(); }, "\"parity[0]\" must be an object"},
  };
  const json good = json::parse(Sample().ToJson());
  ExpectEachRefused(good, cases);
  for (std::string_view text : {"", "[]", "{", "null", "{\"format\": 1}"}) {
    EXPECT_EQ(ParityRecord::Parse(text, "t").status().code(), Code::kCorruption) << text;
  }
}

// Decision 141: each data piece carries its part manifest's other fields.
ParityRecord WithHeaders() {
  ParityRecord r = Sample();
  r.data[0].part = PartHeader{4, 1700000000123, {"node-a", "node-b", "node-c"}, std::nullopt,
                              R"({"format":"tierckpt.placement","version":1})"};
  r.data[1].part = PartHeader{4, 1700000000456, {}, MemberRef{3, 1, 0x0123456789abcdefULL, "node-a"}, ""};
  return r;  // data[2] has none, as a record written before decision 141
}

TEST(ParityRecordTest, APartsManifestFieldsRoundTripAndGiveItsManifestBack) {
  const ParityRecord r = WithHeaders();
  ASSERT_TRUE(r.Validate().ok()) << r.Validate().ToString();
  Result<ParityRecord> back = ParityRecord::Parse(r.ToJson(), "test");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r);
  EXPECT_EQ(back->ToJson(), r.ToJson());
  std::optional<Manifest> coordinator = back->PartManifest(0);
  ASSERT_TRUE(coordinator.has_value());
  EXPECT_EQ(coordinator->node, "node-a");
  EXPECT_EQ(coordinator->members, (std::vector<std::string>{"node-a", "node-b", "node-c"}));
  EXPECT_EQ(coordinator->placement, r.data[0].part->placement);
  EXPECT_EQ(coordinator->world_size, 4u);
  EXPECT_EQ(coordinator->created_unix_ms, 1700000000123u);
  ASSERT_EQ(coordinator->objects.size(), 3u);
  EXPECT_EQ(coordinator->objects[2].checksum, Sum("d"));
  EXPECT_EQ(coordinator->objects[2].node, "node-a");
  std::optional<Manifest> other = back->PartManifest(1);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->member_ref, r.data[1].part->member_ref);
  EXPECT_TRUE(other->members.empty());
  EXPECT_TRUE(other->Validate().ok());
  EXPECT_FALSE(back->PartManifest(2).has_value());
  EXPECT_FALSE(back->PartManifest(3).has_value());
  // The manifest's own form of the fields: what a member's part says.
  const json j = json::parse(r.ToJson());
  EXPECT_EQ(j["data"][1]["part"]["member_ref"]["digest"], "xxh3-64:0123456789abcdef");
  EXPECT_EQ(j["data"][0]["part"]["placement"]["format"], "tierckpt.placement");
  EXPECT_FALSE(j["data"][2].contains("part"));
}

TEST(ParityRecordTest, ParseRefusesABrokenPartHeaderNamingIt) {
  const std::vector<Broken> cases = {
      {"part type", [](json& j) { j["data"][1]["part"] = 3; }, "\"data[1].part\" must be an object"},
      {"part field", [](json& j) { j["data"][1]["part"]["objects"] = json::array(); },
       "\"data[1].part.objects\" is not a part manifest field"},
      {"part world size", [](json& j) { j["data"][1]["part"].erase("world_size"); }, "world_size"},
      {"part members", [](json& j) { j["data"][0]["part"]["members"] = {"node-b", "node-c"}; },
       "fields of data[0].part: node \"node-a\" is not among the step's members"},
      {"part member_ref", [](json& j) { j["data"][1]["part"]["member_ref"]["coordinator"] = "node-b"; },
       "fields of data[1].part: member_ref names this part's own node as coordinator"},
      {"part digest", [](json& j) { j["data"][1]["part"]["member_ref"]["digest"] = "x"; }, "member_ref.digest"},
      {"part placement", [](json& j) { j["data"][0]["part"]["placement"] = "x"; }, "placement"},
  };
  const json good = json::parse(WithHeaders().ToJson());
  ExpectEachRefused(good, cases);
}

TEST(ParityRecordTest, ARecordWithoutPartHeadersMergesWithOneThatHasThemAndTwoHeadersMustAgree) {
  ParityRecord old = Sample();
  old.parity = {ParityPiece{0, 10, Sum("p0")}};
  ParityRecord newer = WithHeaders();
  newer.parity = {ParityPiece{1, 10, Sum("p1")}};
  ASSERT_TRUE(old.Merge(newer).ok());
  EXPECT_EQ(old, WithHeaders());  // the headers kept, both pieces
  ParityRecord other = WithHeaders();
  other.data[1].part->created_unix_ms += 1;  // another save's part
  ParityRecord mine = WithHeaders();
  Status st = mine.Merge(other);
  EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.ToString();
  EXPECT_EQ(mine, WithHeaders());  // unchanged
}

}  // namespace
}  // namespace tierckpt::ec
