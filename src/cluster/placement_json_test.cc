#include "cluster/placement_json.h"

#include <gtest/gtest.h>

#include "cluster/hostfile.h"

namespace tierckpt::cluster {
namespace {

Placement Place(const char* hostfile, PlacementPolicy policy) {
  Result<Membership> m = ParseHostfile(hostfile, "test");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  Result<Placement> p = PlacePrimary(*m, policy);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return *p;
}

constexpr const char* kRacks =
    "a1 h1:1 domain=rackA\na2 h2:1 domain=rackA\nb1 h3:1 domain=rackB\nb2 h4:1 domain=rackB\n"
    "c1 h5:1 domain=rackC\nc2 h6:1 domain=rackC\n";

TEST(PlacementJsonTest, RoundTrips) {
  const Placement cases[] = {
      Place("solo h:1\n", {1, 1}),
      Place("a h1:1\nb h2:1\nc h3:1\nd h4:1\n", {2, 1}),
      Place("a h1:1\nb h2:1\nc h3:1\nd h4:1\ne h5:1\n", {3, 2}),
      Place(kRacks, {3, 1}),
      Place(kRacks, {2, 3}),
  };
  for (const Placement& p : cases) {
    std::string text = PlacementToJsonText(p);
    Result<Placement> back = ParsePlacementJson(text, "test");
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
    EXPECT_EQ(*back, p) << text;
    // And through the JSON value, as the manifest will embed it.
    Result<Placement> value = PlacementFromJson(PlacementToJson(p), "value");
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    EXPECT_EQ(*value, p);
  }
}

TEST(PlacementJsonTest, DocumentedShape) {
  Placement p = Place("a h1:1 domain=r1\nb h2:1 domain=r2\n", {2, 1});
  EXPECT_EQ(
      PlacementToJsonText(p),
      "{\"format\":\"tierckpt.placement\",\"nodes\":[{\"domain\":\"r1\",\"node\":\"a\",\"replicas\":[\"b\"]},"
      "{\"domain\":\"r2\",\"node\":\"b\",\"replicas\":[\"a\"]}],\"replicas\":2,\"ring\":[\"a\",\"b\"],"
      "\"spacing\":1,\"version\":1}");
  Placement plain = Place("a h1:1\n", {1, 1});
  EXPECT_EQ(PlacementToJson(plain)["nodes"][0].contains("domain"), false);
}

TEST(PlacementJsonTest, UnknownKeysAreIgnored) {
  Result<Placement> p = ParsePlacementJson(
      R"({"format":"tierckpt.placement","version":1,"replicas":2,"spacing":1,"ring":["a","b"],"future":true,
          "nodes":[{"node":"a","replicas":["b"],"x":1},{"node":"b","replicas":["a"]}]})",
      "t");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->HoldersOf("b"), (std::vector<std::string>{"b", "a"}));
}

TEST(PlacementJsonTest, AcceptsSignedIntegersBuiltInMemory) {
  Placement p = Place("a h1:1\nb h2:1\nc h3:1\n", {2, 2});
  nlohmann::json j = PlacementToJson(p);
  j["replicas"] = static_cast<int>(2);
  j["version"] = static_cast<int64_t>(1);
  Result<Placement> back = PlacementFromJson(j, "value");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, p);
  j["spacing"] = -2;
  EXPECT_NE(PlacementFromJson(j, "value").status().message().find("field \"spacing\" must be an integer"),
            std::string::npos);
}

TEST(PlacementJsonTest, RejectsMalformedInputNamingTheField) {
  const std::string head = R"({"format":"tierckpt.placement","version":1,"replicas":2,"spacing":1,)";
  struct Case {
    std::string text;
    const char* expected;
  };
  const Case cases[] = {
      {"", "is not valid JSON"},
      {"{\"format\":", "is not valid JSON"},
      {"[]", "is not a JSON object"},
      {"{}", "field \"format\" must be a string"},
      {R"({"format":"other","version":1})", "format is \"other\", not \"tierckpt.placement\""},
      {R"({"format":"tierckpt.placement","version":2})", "has version 2 but this build reads version 1"},
      {R"({"format":"tierckpt.placement","version":-1})", "field \"version\" must be an integer"},
      {R"({"format":"tierckpt.placement","version":1,"replicas":"2"})",
       "field \"replicas\" must be an integer"},
      {R"({"format":"tierckpt.placement","version":1,"replicas":2,"spacing":4294967296})",
       "field \"spacing\" must be an integer"},
      {head + R"("ring":"a"})", "field \"ring\" must be an array of node ids"},
      {head + R"("ring":["a",1]})", "field \"ring\" has an entry that is not a string"},
      {head + R"("ring":["a","b"]})", "field \"nodes\" must be an array"},
      {head + R"("ring":["a","b"],"nodes":[1]})", "nodes[0]: is not an object"},
      {head + R"("ring":["a","b"],"nodes":[{"replicas":[]}]})", "nodes[0]: field \"node\" must be a string"},
      {head + R"("ring":["a","b"],"nodes":[{"node":"a","domain":"","replicas":["b"]}]})",
       "nodes[0]: field \"domain\" is empty"},
      {head + R"("ring":["a","b"],"nodes":[{"node":"a"}]})", "nodes[0]: field \"replicas\" must be an array"},
      {head + R"("ring":["a","a"],"nodes":[]})", "lists node \"a\" twice in its ring"},
      {head + R"("ring":[],"nodes":[]})", "has an empty ring"},
      {head + R"("ring":["a"],"nodes":[{"node":"a","replicas":[]}]})", "records a policy that does not fit"},
      {head + R"("ring":["a","b c"],"nodes":[]})", "ring position 1: node id \"b c\""},
      {head + R"("ring":["a","b"],"nodes":[{"node":"a","replicas":["b"]}]})",
       "has 1 nodes but 2 ring positions"},
      {head + R"("ring":["a","b"],"nodes":[{"node":"a","replicas":["a"]},{"node":"b","replicas":["a"]}]})",
       "node \"a\" lists replica holders that do not follow from the ring"},
      {head + R"("ring":["a","b"],"nodes":[{"node":"b","replicas":["a"]},{"node":"a","replicas":["b"]}]})",
       "not sorted by node id"},
      {head + R"("ring":["a","b"],"nodes":[{"node":"a","replicas":["b"]},{"node":"c","replicas":["a"]}]})",
       "node \"c\" is not on the ring"},
  };
  for (const Case& c : cases) {
    Result<Placement> p = ParsePlacementJson(c.text, "step 7");
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), Code::kCorruption) << c.text;
    EXPECT_NE(p.status().message().find("placement step 7: "), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(c.expected), std::string::npos)
        << c.text << "\n  got: " << p.status().message();
  }
  std::string huge(kMaxPlacementJsonBytes + 1, ' ');
  EXPECT_NE(ParsePlacementJson(huge, "big").status().message().find("above the"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::cluster
