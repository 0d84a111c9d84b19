// Redundancy parsing and the groups of an rs:K+M code (parity_groups.h): every
// group has its M parity holders outside it, parity is spread evenly, and
// losing any M nodes leaves every group with at least K pieces.
#include "cluster/parity_groups.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace tierckpt::cluster {
namespace {

std::vector<std::string> Ring(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) out.push_back("n" + std::to_string(i + 1));
  return out;
}

TEST(RedundancyTest, ParsesBothSchemesAndXorAsRsWithOneParity) {
  Result<Redundancy> r = ParseRedundancy("replicas:2");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, Redundancy::Kind::kReplicas);
  EXPECT_EQ(r->replicas, 2u);
  EXPECT_EQ(r->MemoryFactor(), 2.0);
  r = ParseRedundancy("rs:4+2");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Redundancy::Kind::kReedSolomon);
  EXPECT_EQ(r->k, 4u);
  EXPECT_EQ(r->m, 2u);
  EXPECT_EQ(r->ToString(), "rs:4+2");
  EXPECT_DOUBLE_EQ(r->MemoryFactor(), 1.5);
  r = ParseRedundancy("xor:3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ToString(), "rs:3+1");
}

TEST(RedundancyTest, BadTextIsAnErrorNamingItAndTheAcceptedForms) {
  for (const char* bad : {"", "rs", "rs:4", "rs:4+", "rs:+2", "rs:0+2", "rs:4+0", "rs:200+57", "rs:4+2x", "raid:5",
                          "replicas:0", "replicas:65", "replicas:two", "xor:0", "rs:-1+2"}) {
    Result<Redundancy> r = ParseRedundancy(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(std::string("--redundancy ") + bad), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("rs:K+M"), std::string::npos) << r.status().ToString();
  }
}

TEST(ParityGroupsTest, GroupsAreConsecutiveRingRunsWithParityOutsideThem) {
  Result<ParityLayout> l = PlaceParity(Ring(6), 4, 2);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->groups.size(), 2u);
  EXPECT_EQ(l->groups[0].data, (std::vector<std::string>{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(l->groups[0].parity, (std::vector<std::string>{"n5", "n6"}));
  EXPECT_EQ(l->groups[1].data, (std::vector<std::string>{"n5", "n6"}));  // a short last group
  // Its parity goes to the least loaded nodes outside it, nearest first: n1 and n2.
  EXPECT_EQ(l->groups[1].parity, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(l->GroupOf("n6"), &l->groups[1]);
  EXPECT_EQ(l->GroupOf("n9"), nullptr);
  EXPECT_EQ(l->ParityHeldBy("n5"), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 0}}));
}

TEST(ParityGroupsTest, AnyMLostNodesLeaveEveryGroupKPiecesAndParityIsSpreadEvenly) {
  for (size_t n = 3; n <= 13; ++n) {
    for (uint32_t k = 1; k <= 6; ++k) {
      for (uint32_t m = 1; m <= 3; ++m) {
        if (n < k + m) continue;
        Result<ParityLayout> l = PlaceParity(Ring(n), k, m);
        ASSERT_TRUE(l.ok()) << n << " " << k << "+" << m << ": " << l.status().ToString();
        std::map<std::string, int> held;
        std::set<std::string> placed;
        for (const ParityGroup& g : l->groups) {
          std::set<std::string> pieces(g.data.begin(), g.data.end());
          ASSERT_EQ(g.parity.size(), m);
          for (const std::string& p : g.parity) {
            ASSERT_TRUE(pieces.insert(p).second) << "node " << p << " holds two pieces of group " << g.index;
            ++held[p];
          }
          for (const std::string& d : g.data) ASSERT_TRUE(placed.insert(d).second) << d << " in two groups";
        }
        ASSERT_EQ(placed.size(), n);
        int lo = INT32_MAX, hi = 0;
        for (const std::string& node : Ring(n)) {
          lo = std::min(lo, held[node]);
          hi = std::max(hi, held[node]);
        }
        EXPECT_LE(hi - lo, 1) << "parity load " << lo << ".." << hi << " at n = " << n << ", " << k << "+" << m;
        // Every set of m lost nodes (all of them for small n, by bitmask).
        for (uint32_t lost = 0; lost < (1u << n); ++lost) {
          if (static_cast<uint32_t>(__builtin_popcount(lost)) != m) continue;
          auto gone = [&](const std::string& node) {
            const size_t i = std::stoul(node.substr(1)) - 1;
            return (lost >> i) & 1u;
          };
          for (const ParityGroup& g : l->groups) {
            uint32_t left = k - static_cast<uint32_t>(g.data.size());  // zero pieces never get lost
            for (const std::string& d : g.data) left += !gone(d);
            for (const std::string& p : g.parity) left += !gone(p);
            ASSERT_GE(left, k) << "group " << g.index << " at n = " << n << ", " << k << "+" << m;
          }
        }
      }
    }
  }
}

TEST(ParityGroupsTest, TooFewNodesOrADuplicateIsAnErrorNamingTheCounts) {
  Result<ParityLayout> l = PlaceParity(Ring(5), 4, 2);
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("needs at least 6 nodes"), std::string::npos) << l.status().ToString();
  EXPECT_NE(l.status().message().find("the cluster has 5"), std::string::npos);
  EXPECT_FALSE(PlaceParity({"a", "b", "a"}, 1, 1).ok());
  EXPECT_FALSE(PlaceParity(Ring(4), 0, 1).ok());
}

TEST(ParityGroupsTest, TheSameRingGivesTheSameGroups) {
  Result<ParityLayout> a = PlaceParity(Ring(11), 4, 2), b = PlaceParity(Ring(11), 4, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
}

}  // namespace
}  // namespace tierckpt::cluster
