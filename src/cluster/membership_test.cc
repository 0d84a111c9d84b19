#include "cluster/membership.h"

#include <gtest/gtest.h>

namespace tierckpt::cluster {
namespace {

std::string MembershipError(const Result<Membership>& r) { return r.ok() ? "(ok)" : r.status().message(); }

TEST(MembershipTest, CreateSortsValidatesAndCanonicalises) {
  Result<Membership> m = Membership::Create({
      {"c", "HOST-C:3", "", {5, 4}},
      {"a", "[0::1]:1", "", {0}},
      {"b", "10.0.0.2:2", "", {}},
  });
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(m->members()[0].node_id, "a");
  EXPECT_EQ(m->members()[0].address, "[::1]:1");
  EXPECT_EQ(m->members()[2].address, "host-c:3");
  EXPECT_EQ(m->members()[2].ranks, (std::vector<uint32_t>{4, 5}));
  EXPECT_FALSE(m->has_domains());
  ASSERT_NE(m->Find("b"), nullptr);
  EXPECT_EQ(m->Find("b")->address, "10.0.0.2:2");
  EXPECT_EQ(m->Find("z"), nullptr);
  ASSERT_NE(m->FindByRank(5), nullptr);
  EXPECT_EQ(m->FindByRank(5)->node_id, "c");
  EXPECT_EQ(m->FindByRank(1), nullptr);
  EXPECT_EQ(m->Describe(), "a, b, c");
  EXPECT_EQ(m->Describe(2), "a, b, ... (3 in all)");
}

TEST(MembershipTest, CreateRejectsBrokenInvariants) {
  EXPECT_NE(MembershipError(Membership::Create({})).find("no members"), std::string::npos);
  Result<Membership> r = Membership::Create({{"a", "h1:1", "", {}}, {"a", "h2:1", "", {}}});
  EXPECT_NE(MembershipError(r).find("node id \"a\" appears twice (addresses h1:1 and h2:1)"), std::string::npos)
      << MembershipError(r);
  r = Membership::Create({{"a", "H1:1", "", {}}, {"b", "h1:1", "", {}}});
  EXPECT_NE(MembershipError(r).find("address h1:1 is claimed by nodes \"a\" and \"b\""), std::string::npos)
      << MembershipError(r);
  r = Membership::Create({{"a", "h1:1", "r1", {}}, {"b", "h2:1", "", {}}});
  EXPECT_NE(MembershipError(r).find("node \"a\" has failure domain \"r1\" but node \"b\" has none"),
            std::string::npos)
      << MembershipError(r);
  r = Membership::Create({{"a", "h1:1", "", {}}, {"b", "h2:1", "r2", {}}});
  EXPECT_NE(MembershipError(r).find("node \"b\" has failure domain \"r2\" but node \"a\" has none"),
            std::string::npos)
      << MembershipError(r);
  r = Membership::Create({{"a", "h1:1", "", {1, 2}}, {"b", "h2:1", "", {2}}});
  EXPECT_NE(MembershipError(r).find("rank 2 belongs to both node \"a\" and node \"b\""), std::string::npos)
      << MembershipError(r);
  r = Membership::Create({{"a", "h1:1", "", {3, 3}}});
  EXPECT_NE(MembershipError(r).find("lists rank 3 twice"), std::string::npos) << MembershipError(r);
  r = Membership::Create({{"a b", "h1:1", "", {}}});
  EXPECT_NE(MembershipError(r).find("member 0: node id \"a b\""), std::string::npos) << MembershipError(r);
  r = Membership::Create({{"a", "h1", "", {}}});
  EXPECT_NE(MembershipError(r).find("member \"a\": address \"h1\" has no :port"), std::string::npos) << MembershipError(r);
  r = Membership::Create({{"a", "h1:1", "rack 1", {}}});
  EXPECT_NE(MembershipError(r).find("failure domain \"rack 1\""), std::string::npos) << MembershipError(r);
}

TEST(MembershipTest, FromReportsGroupsRanksByNode) {
  Result<Membership> m = Membership::FromReports({
      {3, "n1", "h1:7000", "rack1"},
      {0, "n0", "h0:7000", "rack0"},
      {1, "n0", "H0:7000", "rack0"},
      {2, "n1", "h1:7000", "rack1"},
      {2, "n1", "h1:7000", "rack1"},  // an identical repeat is harmless
  });
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ(m->members()[0], (Member{"n0", "h0:7000", "rack0", {0, 1}}));
  EXPECT_EQ(m->members()[1], (Member{"n1", "h1:7000", "rack1", {2, 3}}));
  EXPECT_TRUE(m->has_domains());
  EXPECT_EQ(m->FindByRank(3)->node_id, "n1");
}

TEST(MembershipTest, FromReportsNamesBothSidesOfAConflict) {
  EXPECT_NE(MembershipError(Membership::FromReports({})).find("no rank reported"), std::string::npos);
  Result<Membership> r = Membership::FromReports({{0, "n0", "h0:1", ""}, {5, "n0", "h9:1", ""}});
  EXPECT_NE(MembershipError(r).find("ranks 0 and 5 both report node \"n0\" but with addresses h0:1 and h9:1"),
            std::string::npos)
      << MembershipError(r);
  r = Membership::FromReports({{0, "n0", "h0:1", "r1"}, {1, "n0", "h0:1", ""}});
  EXPECT_NE(MembershipError(r).find("ranks 0 and 1 both report node \"n0\" but with failure domain \"r1\" and no "
                            "failure domain"),
            std::string::npos)
      << MembershipError(r);
  r = Membership::FromReports({{4, "n0", "h0:1", ""}, {4, "n1", "h1:1", ""}});
  EXPECT_NE(MembershipError(r).find("rank 4 reported two agents, node \"n0\" and node \"n1\""), std::string::npos)
      << MembershipError(r);
  r = Membership::FromReports({{0, "n0", "h0:1", ""}, {1, "n1", "h0:1", ""}});
  EXPECT_NE(MembershipError(r).find("address h0:1 is claimed by nodes \"n0\" and \"n1\""), std::string::npos)
      << MembershipError(r);
  r = Membership::FromReports({{7, "n0", "h0", ""}});
  EXPECT_NE(MembershipError(r).find("rank 7's agent report (node \"n0\"): address \"h0\" has no :port"),
            std::string::npos)
      << MembershipError(r);
  r = Membership::FromReports({{7, "", "h0:1", ""}});
  EXPECT_NE(MembershipError(r).find("rank 7's agent report: node id is empty"), std::string::npos) << MembershipError(r);
  r = Membership::FromReports({{0, "n0", "h0:1", "r0"}, {1, "n1", "h1:1", ""}});
  EXPECT_NE(MembershipError(r).find("give every member a failure domain or none"), std::string::npos) << MembershipError(r);
}

}  // namespace
}  // namespace tierckpt::cluster
