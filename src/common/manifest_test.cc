#include "tierckpt/manifest.h"

#include <gtest/gtest.h>

#include "common/checksum.h"

namespace tierckpt {
namespace {

Manifest Sample() {
  Manifest m;
  m.ns = "job1";
  m.step = 42;
  m.world_size = 2;
  m.created_unix_ms = 1700000000000;
  m.node = "node-a";
  m.objects.push_back({".metadata", 10, ComputeChecksum("0123456789", 10).ToString(), "node-a"});
  m.objects.push_back({"__0_0.distcp", 3, ComputeChecksum("abc", 3).ToString(), "node-a"});
  return m;
}

TEST(ManifestTest, RoundTrip) {
  Manifest m = Sample();
  auto parsed = Manifest::Parse(m.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->ToJson(), m.ToJson());
  EXPECT_EQ(parsed->TotalBytes(), 13u);
  ASSERT_NE(parsed->Find("__0_0.distcp"), nullptr);
  EXPECT_EQ(parsed->Find("missing"), nullptr);
}

TEST(ManifestTest, PendingChecksumsAreAllowedOnlyWhenTheManifestSaysSo) {
  Manifest m = Sample();
  m.objects[1].checksum = "";
  EXPECT_FALSE(m.Validate().ok());  // an empty checksum in a plain manifest
  EXPECT_EQ(m.ToJson().find("checksums_pending"), std::string::npos);
  m.checksums_pending = true;
  EXPECT_TRUE(m.Validate().ok());
  auto parsed = Manifest::Parse(m.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->checksums_pending);
  EXPECT_EQ(parsed->objects[1].checksum, "");
  m.objects[0].checksum = "xxh3-64:nothex";  // pending excuses an empty checksum, not a bad one
  EXPECT_FALSE(m.Validate().ok());
  std::string bad = Sample().ToJson();
  bad.replace(bad.find("\"objects\""), 9, "\"checksums_pending\": 1, \"objects\"");
  Result<Manifest> wrong = Manifest::Parse(bad, "test");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("checksums_pending"), std::string::npos)
      << wrong.status().ToString();
}

TEST(ManifestTest, MembersRoundTripAndAreOmittedForOneNode) {
  Manifest one = Sample();
  EXPECT_EQ(one.ToJson().find("members"), std::string::npos);
  EXPECT_FALSE(one.SpansNodes());
  Manifest m = Sample();
  m.members = {"node-a", "node-b"};
  m.objects[1].node = "node-b";
  auto parsed = Manifest::Parse(m.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->members, m.members);
  EXPECT_TRUE(parsed->SpansNodes());
  EXPECT_EQ(parsed->objects[1].node, "node-b");
}

TEST(ManifestTest, TheSpanOfACommitAnswerRoundTripsAndMustCountEveryMember) {
  Manifest m = Sample();
  EXPECT_EQ(m.ToJson().find("\"span\""), std::string::npos);  // absent unless set
  m.members = {"node-a", "node-b"};
  m.span = SpanSummary{2, 5, 1000, SpanNamesDigest({"a", "b"})};
  auto parsed = Manifest::Parse(m.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_TRUE(parsed->span.has_value());
  EXPECT_EQ(parsed->span->parts, 2u);
  EXPECT_EQ(parsed->span->objects, 5u);
  EXPECT_EQ(parsed->span->bytes, 1000u);
  EXPECT_EQ(parsed->span->names_digest, SpanNamesDigest({"b", "a"}));  // any order
  EXPECT_EQ(parsed->TotalBytes(), 13u);  // the objects listed: this node's part
  m.span->parts = 3;
  EXPECT_FALSE(m.Validate().ok());
  std::string bad = Sample().ToJson();
  bad.replace(bad.find("\"objects\""), 9, "\"span\": [], \"objects\"");
  EXPECT_NE(Manifest::Parse(bad, "test").status().message().find("span"), std::string::npos);
}

TEST(ManifestTest, PlacementRoundTripsAsAnObject) {
  Manifest m = Sample();
  m.placement = R"({"format":"tierckpt.placement","replicas":2})";
  const std::string text = m.ToJson();
  EXPECT_NE(text.find("\"placement\": {"), std::string::npos) << text;
  auto parsed = Manifest::Parse(text, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->placement, m.placement);
  m.placement = "[1, 2]";
  EXPECT_FALSE(m.Validate().ok());
  std::string bad = Sample().ToJson();
  bad.replace(bad.find("\"total_bytes\""), 0, "\"placement\": \"n2\", ");
  EXPECT_EQ(Manifest::Parse(bad, "src").status().code(), Code::kCorruption);
}

// Decision 116: a non-coordinator part names the members by a MemberRef.
TEST(ManifestTest, AMemberRefRoundTripsAndIsCheckedOnParse) {
  Manifest m = Sample();
  m.member_ref = MemberRef{64, 5, 0x0123456789abcdefULL, "node-b"};
  ASSERT_TRUE(m.Validate().ok()) << m.Validate().ToString();
  EXPECT_TRUE(m.SpansNodes());
  EXPECT_EQ(m.MemberCount(), 64u);
  const std::string text = m.ToJson();
  EXPECT_NE(text.find("\"digest\": \"xxh3-64:0123456789abcdef\""), std::string::npos) << text;
  auto parsed = Manifest::Parse(text, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->member_ref, m.member_ref);
  EXPECT_TRUE(parsed->members.empty());
  EXPECT_EQ(parsed->ToJson(), text);
  auto bad = [&](const std::string& from, const std::string& to, const char* want) {
    std::string t = text;
    ASSERT_NE(t.find(from), std::string::npos) << from;
    t.replace(t.find(from), from.size(), to);
    Result<Manifest> r = Manifest::Parse(t, "src");
    EXPECT_EQ(r.status().code(), Code::kCorruption) << from;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().ToString();
  };
  bad("\"index\": 5", "\"index\": 64", "place 64 of 64");
  bad("\"count\": 64", "\"count\": 1", "of 1 members");
  bad("xxh3-64:0123", "xxh3-32:0123", "member_ref.digest");
  bad("\"coordinator\": \"node-b\"", "\"coordinator\": \"node-a\"", "own node as coordinator");
  bad("\"coordinator\": \"node-b\"", "\"coordinator\": \"../x\"", "member_ref.coordinator");
  Manifest both = m;
  both.members = {"node-a", "node-b"};
  EXPECT_FALSE(both.Validate().ok());
  Manifest foreign = m;
  foreign.objects[1].node = "node-c";  // a part holds its own node's objects only
  EXPECT_FALSE(foreign.Validate().ok());
}

TEST(ManifestTest, RejectsBadMembers) {
  auto bad = [](std::vector<std::string> members, std::string object_node, const char* want) {
    Manifest m = Sample();
    m.members = std::move(members);
    m.objects[1].node = std::move(object_node);
    Status s = m.Validate();
    EXPECT_FALSE(s.ok()) << want;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.ToString();
    auto parsed = Manifest::Parse(m.ToJson(), "src");
    EXPECT_EQ(parsed.status().code(), Code::kCorruption) << want;
  };
  bad({"node-b", "node-a"}, "node-a", "not sorted");
  bad({"node-a", "node-a"}, "node-a", "repeat");
  bad({"node-b", "node-c"}, "node-b", "node \"node-a\" is not among");
  bad({"node-a", "node-b"}, "node-x", "written by node \"node-x\"");
  bad({"node-a", "../x"}, "node-a", "member 1");
  std::string text = Sample().ToJson();
  text.replace(text.find("\"total_bytes\""), 0, "\"members\": \"node-a\", ");
  EXPECT_EQ(Manifest::Parse(text, "src").status().code(), Code::kCorruption);
}

TEST(ManifestTest, RejectsDamage) {
  std::string good = Sample().ToJson();
  auto expect_bad = [](std::string text, const char* why) {
    auto r = Manifest::Parse(text, "/x/_tierckpt_manifest.json");
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << why;
    EXPECT_NE(r.status().message().find("/x/_tierckpt_manifest.json"), std::string::npos);
  };
  expect_bad(good.substr(0, good.size() / 2), "truncated");
  expect_bad("[]", "not an object");
  expect_bad("", "empty");
  std::string v2 = good;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  expect_bad(v2, "newer version");
  std::string hostile = good;
  hostile.replace(hostile.find("__0_0.distcp"), 12, "../../etc/pw");
  expect_bad(hostile, "path escape");
  std::string neg = good;
  neg.replace(neg.find("\"size\": 3"), 9, "\"size\": -3");
  expect_bad(neg, "negative size");
  std::string total = good;
  total.replace(total.find("\"total_bytes\": 13"), 17, "\"total_bytes\": 14");
  expect_bad(total, "total mismatch");
}

TEST(ManifestTest, RejectsDuplicatesAndUnsorted) {
  Manifest m = Sample();
  m.objects.push_back(m.objects[0]);
  EXPECT_FALSE(m.Validate().ok());
  m = Sample();
  std::swap(m.objects[0], m.objects[1]);
  EXPECT_FALSE(m.Validate().ok());
}

}  // namespace
}  // namespace tierckpt
