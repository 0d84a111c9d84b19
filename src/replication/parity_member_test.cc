// ParityMember (decisions 135–136): a data member's side of the erasure-coded
// tier in the agent, over the in-process nodes of peer_test_nodes.h: its
// state per step, the drop of a deleted step and of the steps retention
// evicted.
#include "replication/parity_member.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "cluster/parity_groups.h"
#include "ec/ec_test_parts.h"
#include "replication/multi_node.h"
#include "replication/peer_test_nodes.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::WriteStep;
using namespace std::chrono_literals;

constexpr uint64_t kMemberStep = 7;

class ParityMemberTest : public ::testing::Test {
 protected:
  void SetUp() override {
    members = Members(6);
    Result<cluster::ParityLayout> placed = testing::StartParityNodes(nodes, net, 6, 4, 2);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    layout = *placed;
    group = layout.groups[0];
    for (const std::string& id : group.data) {
      Result<ParitySender> sender = ParitySender::Create(nodes[id]->replicator.get(), layout, id);
      ASSERT_TRUE(sender.ok()) << sender.status().ToString();
      queues[id] = std::make_unique<WorkQueue>("parity", 2);
      MemoryTier* tier = nodes[id]->h.tier.get();
      parity[id] = std::make_unique<ParityMember>(std::move(*sender), tier, queues[id].get(), 300ms);
    }
  }
  void Commit(size_t i, uint64_t step) {
    const std::string& id = group.data[i];
    const std::map<std::string, std::string> part = {
        {"a", Bytes(100000 + 1000 * i, static_cast<char>('a' + i))}, {"b", Bytes(3000, 'z')}};
    ASSERT_TRUE(WriteStep(*nodes[id]->h.tier, "job", step, part).ok());
    parity[id]->Committed("job", step);
  }
  ParityStepState::Kind KindOf(size_t i, uint64_t step) {
    Result<ParityStepState> s = parity[group.data[i]]->State("job", step);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? s->kind : ParityStepState::Kind::kUnknown;
  }
  bool HoldersHave(uint64_t step) {
    for (const std::string& h : group.parity) {
      if (!nodes[h]->parity->Record("job", step, 0).ok()) return false;
    }
    return true;
  }
  bool HoldersHaveNothingOf(uint64_t step) {
    for (const std::string& h : group.parity) {
      if (nodes[h]->parity->Record("job", step, 0).status().code() != Code::kNotFound) return false;
    }
    return true;
  }
  void CommitWholeGroup(uint64_t step) {
    for (size_t i = 0; i < group.data.size(); ++i) Commit(i, step);
    for (const std::string& id : group.data) parity[id]->Drain();
  }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  cluster::Membership members;
  std::map<std::string, std::unique_ptr<Node>> nodes;
  cluster::ParityLayout layout;
  cluster::ParityGroup group;
  std::map<std::string, std::unique_ptr<ParityMember>> parity;  // destroyed after the queues stop
  std::map<std::string, std::unique_ptr<WorkQueue>> queues;
};

TEST_F(ParityMemberTest, AStepIsRedundantOnlyWhenEveryHolderSealedTheWholeGroup) {
  for (size_t i = 0; i < 3; ++i) Commit(i, kMemberStep);
  for (size_t i = 0; i < 3; ++i) {
    parity[group.data[i]]->Drain();
    EXPECT_EQ(KindOf(i, kMemberStep), ParityStepState::Kind::kIncomplete);
    EXPECT_NE(parity[group.data[i]]->State("job", kMemberStep)->detail.find("of 4 folded"), std::string::npos)
        << parity[group.data[i]]->State("job", kMemberStep)->detail;
  }
  EXPECT_TRUE(HoldersHaveNothingOf(kMemberStep));  // three of four parts: nothing published
  Commit(3, kMemberStep);
  parity[group.data[3]]->Drain();
  EXPECT_EQ(KindOf(3, kMemberStep), ParityStepState::Kind::kRedundant);
  EXPECT_TRUE(HoldersHave(kMemberStep));
  // Not retried: the first three learned of no seal (decision 136).
  EXPECT_EQ(KindOf(0, kMemberStep), ParityStepState::Kind::kIncomplete);
  const ParityStatsInput stats = parity[group.data[3]]->Stats();
  EXPECT_EQ(stats.scheme, "rs:4+2");
  EXPECT_EQ(stats.holders, group.parity);
  ASSERT_EQ(stats.steps.size(), 1u);
  EXPECT_TRUE(stats.steps[0].redundant());
}

TEST_F(ParityMemberTest, ADropAsksTheHoldersAndForgetsTheStep) {
  CommitWholeGroup(kMemberStep);
  ASSERT_TRUE(HoldersHave(kMemberStep));
  ASSERT_TRUE(parity[group.data[2]]->Drop("job", kMemberStep).ok());
  EXPECT_TRUE(HoldersHaveNothingOf(kMemberStep));
  EXPECT_EQ(parity[group.data[2]]->State("job", kMemberStep).status().code(), Code::kNotFound);
}

TEST_F(ParityMemberTest, TheParityOfAStepTheMemberNoLongerHoldsIsDroppedAfterItsNextSend) {
  CommitWholeGroup(kMemberStep);
  ASSERT_TRUE(HoldersHave(kMemberStep));
  // Retention (or the budget) takes step 7 from member 1's memory.
  ASSERT_TRUE(nodes[group.data[1]]->h.tier->DeleteStep("job", kMemberStep).ok());
  CommitWholeGroup(kMemberStep + 1);
  EXPECT_TRUE(HoldersHave(kMemberStep + 1));
  EXPECT_TRUE(HoldersHaveNothingOf(kMemberStep));
  EXPECT_EQ(parity[group.data[1]]->State("job", kMemberStep).status().code(), Code::kNotFound);
}

// What status and a scrape show (reports.cc "peers.parity", docs/operations.md).
TEST_F(ParityMemberTest, TheClusterReportsEachStepsStateAndTheParityHeld) {
  CommitWholeGroup(kMemberStep);
  auto cluster_of = [&](const std::string& id, ParityMember* member) {
    Node& n = *nodes[id];
    MultiNodeDeps md;
    md.node_id = id;
    md.replicator = n.replicator.get();
    md.replicas = n.replica_tiers.get();
    md.queue = n.replication_queue.get();
    md.parity_member = member;
    md.parity_holder = n.parity.get();
    return std::make_unique<MultiNode>(std::move(md));
  };
  auto gauge = [](const std::vector<Gauge>& gauges, const std::string& name, const std::string& state) {
    for (const Gauge& g : gauges) {
      const bool labelled = !g.labels.empty() && g.labels[0].second == state;
      if (g.name == name && (state.empty() || labelled)) return g.value;
    }
    return -1.0;
  };
  const std::string& id = group.data[0];
  std::unique_ptr<MultiNode> member = cluster_of(id, parity[id].get());
  std::optional<PeerStatsInput> stats = member->Stats();
  ASSERT_TRUE(stats.has_value() && stats->parity.has_value());
  EXPECT_EQ(stats->parity->scheme, "rs:4+2");
  ASSERT_EQ(stats->parity->steps.size(), 1u);
  EXPECT_EQ(stats->parity->steps[0].kind, ParityStepState::Kind::kRedundant);
  std::vector<Gauge> gauges;
  member->AddGauges(&gauges);
  EXPECT_EQ(gauge(gauges, "tierckpt_parity_steps", "redundant"), 1.0);
  EXPECT_EQ(gauge(gauges, "tierckpt_parity_steps", "incomplete"), 0.0);
  // A holder of group 0 (no member here): its pieces' bytes, no parity object in Stats.
  std::unique_ptr<MultiNode> holder = cluster_of(group.parity[0], nullptr);
  std::vector<Gauge> held;
  holder->AddGauges(&held);
  const uint64_t held_bytes = nodes[group.parity[0]]->parity->used_bytes();
  EXPECT_GT(held_bytes, 100000u);
  EXPECT_EQ(gauge(held, "tierckpt_parity_held_bytes", ""), static_cast<double>(held_bytes));
  EXPECT_FALSE(holder->Stats()->parity.has_value());
}

TEST_F(ParityMemberTest, StepsCommittedBeforeAStartAreUnknownNeverRedundant) {
  const std::string& id = group.data[0];
  ASSERT_TRUE(WriteStep(*nodes[id]->h.tier, "job", kMemberStep, {{"a", Bytes(10, 'a')}}).ok());
  parity[id]->AdoptCommitted();
  EXPECT_EQ(KindOf(0, kMemberStep), ParityStepState::Kind::kUnknown);
  EXPECT_FALSE(parity[id]->State("job", kMemberStep)->redundant());
}

}  // namespace
}  // namespace tierckpt::agent
