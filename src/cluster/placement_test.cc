#include "cluster/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <numeric>
#include <set>

namespace tierckpt::cluster {
namespace {

// n members "n0".."n{n-1}"; domain_of(k) gives node k's domain ("" = none).
Membership MakeMembership(size_t n, const std::function<std::string(size_t)>& domain_of,
                          bool reversed = false) {
  std::vector<Member> members;
  for (size_t k = 0; k < n; ++k) {
    members.push_back({"n" + std::to_string(k), "h" + std::to_string(k) + ":7000", domain_of(k), {}});
  }
  if (reversed) std::reverse(members.begin(), members.end());
  Result<Membership> m = Membership::Create(std::move(members));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : Membership();
}

std::string NoDomain(size_t) { return ""; }

// Independent statement of validity: replica i never lands on its primary.
bool Fits(size_t n, uint32_t r, uint32_t s) {
  if (r < 1 || r > n || s < 1) return false;
  for (uint64_t i = 1; i < r; ++i) {
    if ((uint64_t{s} * i) % n == 0) return false;
  }
  return true;
}

std::string DomainOf(const Membership& m, const std::string& id) { return m.Find(id)->failure_domain; }

// Checks everything that must hold for any valid placement.
void CheckInvariants(const Membership& m, const Placement& p, const std::string& label) {
  SCOPED_TRACE(label);
  const size_t n = m.size();
  const uint32_t r = p.policy.replicas;
  ASSERT_TRUE(p.Validate().ok()) << p.Validate().ToString();
  std::vector<std::string> ring = p.ring;
  std::sort(ring.begin(), ring.end());
  std::vector<std::string> ids;
  for (const Member& mem : m.members()) ids.push_back(mem.node_id);
  ASSERT_EQ(ring, ids);
  ASSERT_EQ(p.nodes.size(), n);
  std::map<std::string, int> held;
  for (size_t pos = 0; pos < n; ++pos) {
    const PlacedNode* node = p.Find(p.ring[pos]);
    ASSERT_NE(node, nullptr);
    EXPECT_EQ(node->failure_domain, DomainOf(m, node->node_id));
    ASSERT_EQ(node->replica_holders.size(), r - 1);
    std::set<std::string> distinct(node->replica_holders.begin(), node->replica_holders.end());
    EXPECT_EQ(distinct.size(), r - 1) << "a holder repeats for " << node->node_id;
    EXPECT_EQ(distinct.count(node->node_id), 0u) << node->node_id << " holds its own replica";
    for (uint32_t i = 1; i < r; ++i) {
      EXPECT_EQ(node->replica_holders[i - 1], p.ring[(pos + uint64_t{p.policy.spacing} * i) % n]);
      ++held[node->replica_holders[i - 1]];
    }
    std::vector<std::string> holders = p.HoldersOf(node->node_id);
    ASSERT_EQ(holders.size(), r);
    EXPECT_EQ(holders[0], node->node_id);
    std::vector<std::string> sets = p.ReplicaSetsHeldBy(node->node_id);
    ASSERT_EQ(sets.size(), r - 1);
    for (const std::string& primary : sets) {
      const auto& h = p.Find(primary)->replica_holders;
      EXPECT_NE(std::find(h.begin(), h.end(), node->node_id), h.end()) << primary << " / " << node->node_id;
    }
  }
  for (const std::string& id : ids) EXPECT_EQ(held[id], static_cast<int>(r - 1)) << "load of " << id;
}

TEST(PlacementTest, RingWithoutDomainsIsNodeIdOrderWithSpacing) {
  Membership m = MakeMembership(5, NoDomain);
  Result<Placement> p = PlacePrimary(m, {3, 2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ring, (std::vector<std::string>{"n0", "n1", "n2", "n3", "n4"}));
  EXPECT_EQ(p->Find("n0")->replica_holders, (std::vector<std::string>{"n2", "n4"}));
  EXPECT_EQ(p->Find("n3")->replica_holders, (std::vector<std::string>{"n0", "n2"}));
  EXPECT_EQ(p->HoldersOf("n3"), (std::vector<std::string>{"n3", "n0", "n2"}));
  EXPECT_EQ(p->ReplicaSetsHeldBy("n0"), (std::vector<std::string>{"n3", "n1"}));
  EXPECT_TRUE(p->HoldersOf("zz").empty());
  EXPECT_EQ(p->Find("zz"), nullptr);

  Result<Placement> single = PlacePrimary(MakeMembership(1, NoDomain), {1, 1});
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_TRUE(single->Find("n0")->replica_holders.empty());
}

TEST(PlacementTest, DomainsAlternateOnTheRing) {
  // Racks as blocks of consecutive node ids: a node-id ring would keep
  // replicas in the rack.
  Membership m = MakeMembership(4, [](size_t k) { return k < 2 ? "rackA" : "rackB"; });
  Result<Placement> p = PlacePrimary(m, {2, 1});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ring, (std::vector<std::string>{"n0", "n2", "n1", "n3"}));
  EXPECT_EQ(p->Find("n0")->replica_holders, (std::vector<std::string>{"n2"}));
  EXPECT_EQ(p->Find("n3")->replica_holders, (std::vector<std::string>{"n0"}));
  // With spacing 2 the walk p, p+2 alternates instead.
  p = PlacePrimary(m, {2, 2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ring, (std::vector<std::string>{"n0", "n1", "n2", "n3"}));
  for (const PlacedNode& node : p->nodes) {
    EXPECT_NE(DomainOf(m, node.replica_holders[0]), node.failure_domain) << node.node_id;
  }
  // One domain in all behaves like no domains.
  Membership one = MakeMembership(4, [](size_t) { return "rackA"; });
  p = PlacePrimary(one, {2, 2});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->ring, (std::vector<std::string>{"n0", "n1", "n2", "n3"}));
  EXPECT_EQ(p->Find("n1")->replica_holders, (std::vector<std::string>{"n3"}));
}

TEST(PlacementTest, EveryShapeUpToEightNodes) {
  for (size_t n = 1; n <= 8; ++n) {
    // Domain layouts: none; even domains, both interleaved and in blocks; uneven.
    std::vector<std::pair<std::string, std::function<std::string(size_t)>>> layouts = {{"none", NoDomain}};
    for (size_t d = 2; d <= n; ++d) {
      if (n % d != 0) continue;
      size_t block = n / d;
      layouts.push_back(
          {"even-mod" + std::to_string(d), [d](size_t k) { return "d" + std::to_string(k % d); }});
      layouts.push_back(
          {"even-block" + std::to_string(d), [block](size_t k) { return "d" + std::to_string(k / block); }});
    }
    if (n >= 3) layouts.push_back({"uneven", [n](size_t k) { return k + 1 < n ? "big" : "small"; }});
    for (const auto& [name, domain_of] : layouts) {
      Membership m = MakeMembership(n, domain_of);
      std::map<std::string, size_t> sizes;
      for (const Member& mem : m.members()) ++sizes[mem.failure_domain];
      const size_t domains = m.has_domains() ? sizes.size() : 1;
      bool even = domains >= 2;
      for (const auto& [d, c] : sizes) even = even && c == n / domains;
      for (uint32_t r = 1; r <= 3; ++r) {
        for (uint32_t s = 1; s <= 3; ++s) {
          std::string label = "n=" + std::to_string(n) + " R=" + std::to_string(r) +
                              " spacing=" + std::to_string(s) + " domains=" + name;
          Result<Placement> p = PlacePrimary(m, {r, s});
          if (!Fits(n, r, s)) {
            EXPECT_EQ(p.status().code(), Code::kInvalidArgument) << label;
            continue;
          }
          ASSERT_TRUE(p.ok()) << label << ": " << p.status().ToString();
          CheckInvariants(m, *p, label);
          // Deterministic, whatever order the members came in.
          Result<Placement> again = PlacePrimary(MakeMembership(n, domain_of, /*reversed=*/true), {r, s});
          ASSERT_TRUE(again.ok());
          EXPECT_EQ(*p, *again) << label;
          if (!even) continue;
          // Each walk has L nodes; with L a multiple of the domain count, or
          // at most one node per domain, every replica set spans
          // min(R, domains) domains.
          const size_t walk = n / std::gcd(static_cast<size_t>(s % n), n);
          if (walk % domains != 0 && walk > domains) continue;
          for (const PlacedNode& node : p->nodes) {
            std::set<std::string> spanned{node.failure_domain};
            for (const std::string& h : node.replica_holders) spanned.insert(DomainOf(m, h));
            EXPECT_EQ(spanned.size(), std::min<size_t>(r, domains)) << label << " node " << node.node_id;
          }
        }
      }
    }
  }
}

// Every way to split up to 8 nodes into domains: with spacing 1, a node's
// first replica is in another domain whenever the largest domain holds at
// most half of the nodes (otherwise some pair of neighbours must share one).
TEST(PlacementTest, UnevenDomainsSeparateNeighboursWheneverPossible) {
  std::function<void(size_t, size_t, std::vector<size_t>&)> each_split;
  size_t checked = 0;
  auto check = [&](const std::vector<size_t>& split) {
    size_t n = std::accumulate(split.begin(), split.end(), size_t{0});
    std::vector<std::string> domain_of;
    for (size_t d = 0; d < split.size(); ++d) {
      for (size_t i = 0; i < split[d]; ++i) domain_of.push_back("d" + std::to_string(d));
    }
    Membership m = MakeMembership(n, [&](size_t k) { return domain_of[k]; });
    for (uint32_t r = 2; r <= 3 && r <= n; ++r) {
      Result<Placement> p = PlacePrimary(m, {r, 1});
      ASSERT_TRUE(p.ok()) << p.status().ToString();
      CheckInvariants(m, *p, "split " + std::to_string(split.size()));
      if (split.front() * 2 > n) continue;
      for (const PlacedNode& node : p->nodes) {
        EXPECT_NE(DomainOf(m, node.replica_holders[0]), node.failure_domain)
            << "n=" << n << " largest=" << split.front() << " R=" << r << " node " << node.node_id;
      }
      ++checked;
    }
  };
  // Non-increasing domain sizes, at least two domains.
  each_split = [&](size_t left, size_t max_part, std::vector<size_t>& split) {
    if (left == 0) {
      if (split.size() >= 2) check(split);
      return;
    }
    for (size_t part = std::min(left, max_part); part >= 1; --part) {
      split.push_back(part);
      each_split(left - part, part, split);
      split.pop_back();
    }
  };
  for (size_t n = 2; n <= 8; ++n) {
    std::vector<size_t> split;
    each_split(n, n, split);
  }
  EXPECT_GT(checked, 40u);
}

TEST(PlacementTest, InvalidPoliciesSayWhatWouldWork) {
  Membership two = MakeMembership(2, NoDomain);
  Result<Placement> p = PlacePrimary(two, {3, 1});
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_NE(p.status().message().find("replicas 3 does not fit a membership of 2 nodes; use replicas 1..2 "
                                      "(1 = no replication) or add nodes"),
            std::string::npos)
      << p.status().message();
  EXPECT_NE(p.status().message().find("placing replicas on n0, n1"), std::string::npos)
      << p.status().message();
  p = PlacePrimary(two, {0, 1});
  EXPECT_NE(p.status().message().find("replicas 0 does not fit"), std::string::npos) << p.status().message();
  p = PlacePrimary(two, {2, 0});
  EXPECT_NE(p.status().message().find("spacing 0 would put every replica on its primary; use spacing 1"),
            std::string::npos)
      << p.status().message();
  p = PlacePrimary(two, {2, 2});
  EXPECT_NE(p.status().message().find("spacing 2 with 2 nodes puts replica 1 back on its primary"),
            std::string::npos)
      << p.status().message();

  Membership four = MakeMembership(4, NoDomain);
  p = PlacePrimary(four, {3, 2});
  EXPECT_NE(
      p.status().message().find("spacing 2 with 4 nodes puts replica 2 back on its primary (2 x 2 is a "
                                "multiple of 4); with replicas 3 use a spacing s where 4/gcd(s, 4) >= 3, "
                                "e.g. 1, 3, or keep spacing 2 with replicas 1..2"),
      std::string::npos)
      << p.status().message();
  EXPECT_TRUE(PlacePrimary(four, {2, 2}).ok());
  EXPECT_TRUE(PlacePrimary(four, {1, 4}).ok());  // no replicas: spacing is irrelevant
  p = PlacePrimary(MakeMembership(6, NoDomain), {3, 3});
  EXPECT_NE(p.status().message().find("e.g. 1, 2, 4, 5,"), std::string::npos) << p.status().message();
  p = PlacePrimary(four, {2, 4000000000u});  // a multiple of 4, computed without overflow
  EXPECT_NE(p.status().message().find("puts replica 1 back on its primary"), std::string::npos)
      << p.status().message();
  EXPECT_TRUE(PlacePrimary(four, {4, 4000000001u}).ok());
  p = PlacePrimary(Membership(), {1, 1});
  EXPECT_NE(p.status().message().find("empty membership"), std::string::npos) << p.status().message();
}

TEST(PlacementTest, ValidateCatchesTampering) {
  Membership m = MakeMembership(4, NoDomain);
  Placement good = *PlacePrimary(m, {2, 1});
  ASSERT_TRUE(good.Validate().ok());
  Placement bad = good;
  bad.nodes[0].replica_holders = {"n2"};
  EXPECT_NE(bad.Validate().message().find("node \"n0\" lists replica holders that do not follow"),
            std::string::npos)
      << bad.Validate().message();
  bad = good;
  bad.ring[1] = "n0";
  EXPECT_NE(bad.Validate().message().find("lists node \"n0\" twice in its ring"), std::string::npos);
  bad = good;
  std::swap(bad.nodes[0], bad.nodes[1]);
  EXPECT_NE(bad.Validate().message().find("not sorted"), std::string::npos);
  bad = good;
  bad.policy.replicas = 5;
  EXPECT_NE(bad.Validate().message().find("records a policy that does not fit its ring"), std::string::npos);
  bad = good;
  bad.nodes.pop_back();
  EXPECT_NE(bad.Validate().message().find("has 3 nodes but 4 ring positions"), std::string::npos);
  bad = good;
  bad.nodes[3].node_id = "n9";
  EXPECT_NE(bad.Validate().message().find("node \"n9\" is not on the ring"), std::string::npos);
  EXPECT_EQ(bad.Validate().code(), Code::kCorruption);
  bad = Placement{};
  EXPECT_NE(bad.Validate().message().find("empty ring"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::cluster
