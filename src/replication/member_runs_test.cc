// The members of a step as runs of places in the agents' common ring
// (member_runs.h, decision 108): one run for a step on a contiguous range of
// the ring whatever its size, a unique encoding, refusals that name what is
// wrong, and a ring id that changes with the ids but not with the addresses.
#include "replication/member_runs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace tierckpt::agent {
namespace {

cluster::Membership Ring(const std::vector<std::string>& ids, const std::string& port = "7100") {
  std::vector<cluster::Member> ms;
  for (const std::string& id : ids) ms.push_back({id, id + ".test:" + port, "", {}});
  Result<cluster::Membership> m = cluster::Membership::Create(std::move(ms));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

std::vector<std::string> RunIds(int n, int from = 0) {
  std::vector<std::string> ids;
  char id[16];
  for (int i = from; i < from + n; ++i) {
    std::snprintf(id, sizeof id, "node%04d", i);  // zero-padded: ring order is number order
    ids.push_back(id);
  }
  return ids;
}

TEST(MemberRunsTest, AStepOnTheWholeRingIsOneRunWhateverItsSize) {
  for (int n : {1, 2, 64, 5000}) {
    const cluster::Membership ring = Ring(RunIds(n));
    Result<std::vector<uint64_t>> runs = MemberRuns(ring, RunIds(n));
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    EXPECT_EQ(*runs, (std::vector<uint64_t>{0, static_cast<uint64_t>(n)})) << n;
    Result<std::vector<std::string>> back = MembersOfRuns(ring, *runs);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, RunIds(n));
  }
}

TEST(MemberRunsTest, ASubsetIsItsMaximalRunsAndExpandsBack) {
  const cluster::Membership ring = Ring(RunIds(10));
  const std::vector<std::string> members = {"node0001", "node0002", "node0003",
                                            "node0005", "node0008", "node0009"};
  Result<std::vector<uint64_t>> runs = MemberRuns(ring, members);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ(*runs, (std::vector<uint64_t>{1, 3, 5, 1, 8, 2}));
  Result<std::vector<std::string>> back = MembersOfRuns(ring, *runs);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, members);
}

TEST(MemberRunsTest, AMemberOutsideTheRingOrAnUnsortedListIsRefusedNamingIt) {
  const cluster::Membership ring = Ring(RunIds(4));
  Result<std::vector<uint64_t>> runs = MemberRuns(ring, {"node0001", "node0009"});
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("node node0009, a member of the step, is not in this agent's peer"),
            std::string::npos)
      << runs.status().ToString();
  EXPECT_NE(runs.status().message().find("--peers"), std::string::npos);
  runs = MemberRuns(ring, {"node0002", "node0001"});
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("sorted and unique"), std::string::npos) << runs.status().ToString();
  EXPECT_FALSE(MemberRuns(ring, {"node0001", "node0001"}).ok());
}

TEST(MemberRunsTest, RunsThatAreNotTheEncodingAreRefused) {
  const cluster::Membership ring = Ring(RunIds(8));
  const std::vector<std::vector<uint64_t>> bad = {
      {0},              // odd
      {2, 0},           // empty run
      {6, 3},           // past the end
      {9, 1},           // starts past the end
      {1, 2, 2, 1},     // overlaps
      {1, 2, 3, 1},     // touches: one run, written as two
      {5, 1, 1, 1},     // out of order
      {0, UINT64_MAX},  // a count that would wrap
  };
  for (const std::vector<uint64_t>& runs : bad) {
    Result<std::vector<std::string>> m = MembersOfRuns(ring, runs);
    EXPECT_FALSE(m.ok()) << ::testing::PrintToString(runs);
    if (!m.ok()) {
      EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
    }
  }
  Result<std::vector<std::string>> none = MembersOfRuns(ring, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(MemberRunsTest, TheRingIdChangesWithTheIdsButNotWithTheAddresses) {
  const RingId a = RingIdOf(Ring(RunIds(4)));
  EXPECT_EQ(a.size, 4u);
  EXPECT_EQ(a, RingIdOf(Ring(RunIds(4), "7200")));   // addresses move (decision 95); ids are the ring
  EXPECT_NE(a, RingIdOf(Ring(RunIds(5))));           // an agent more
  EXPECT_NE(a, RingIdOf(Ring(RunIds(4, 1))));        // the same size, other ids
  EXPECT_NE(RingIdOf(Ring({"ab", "c"})), RingIdOf(Ring({"a", "bc"})));  // ids are delimited
  EXPECT_EQ(a.ToString().rfind("4 agents, digest ", 0), 0u) << a.ToString();
}

}  // namespace
}  // namespace tierckpt::agent
