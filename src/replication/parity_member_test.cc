// ParityMember (decisions 135–136): a data member's side of the erasure-coded
// tier in the agent, over the in-process nodes of peer_test_nodes.h: its
// state per step, the drop of a deleted step and of the steps retention
// evicted.
#include "replication/parity_member.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

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
    MakeMembers(300ms);
  }
  // Each data member of group 0 a ParityMember whose sends wait `wait` for the group.
  void MakeMembers(std::chrono::milliseconds wait) {
    for (const std::string& id : group.data) {
      Result<ParitySender> sender = ParitySender::Create(nodes[id]->replicator.get(), layout, id);
      ASSERT_TRUE(sender.ok()) << sender.status().ToString();
      if (queues[id] != nullptr) queues[id]->Stop();
      parity[id].reset();
      queues[id] = std::make_unique<WorkQueue>("parity", 2);
      MemoryTier* tier = nodes[id]->h.tier.get();
      parity[id] = std::make_unique<ParityMember>(std::move(*sender), tier, queues[id].get(), wait);
    }
  }
  void WritePart(size_t i, uint64_t step) {
    const std::string& id = group.data[i];
    const std::map<std::string, std::string> part = {
        {"a", Bytes(100000 + 1000 * i, static_cast<char>('a' + i))}, {"b", Bytes(3000, 'z')}};
    ASSERT_TRUE(WriteStep(*nodes[id]->h.tier, "job", step, part).ok());
  }
  void Commit(size_t i, uint64_t step) {
    WritePart(i, step);
    parity[group.data[i]]->Committed("job", step);
  }
  // The cluster a member's commit goes through (commit.h), with its ParityMember and --parity-ack.
  std::unique_ptr<MultiNode> ClusterOf(const std::string& id, ReplicaAck parity_ack) {
    return ClusterWith(id, parity_ack, parity[id].get());
  }
  // The same with another member (nullptr: a node that is no data member here, a holder).
  std::unique_ptr<MultiNode> ClusterWith(const std::string& id, ReplicaAck parity_ack, ParityMember* member) {
    Node& n = *nodes[id];
    MultiNodeDeps md;
    md.node_id = id;
    md.replicator = n.replicator.get();
    md.replicas = n.replica_tiers.get();
    md.queue = n.replication_queue.get();
    md.ack = ReplicaAck::kNone;  // the replicas are not what these tests wait for
    md.parity_ack = parity_ack;
    md.parity_member = member;
    md.parity_holder = n.parity.get();
    return std::make_unique<MultiNode>(std::move(md));
  }
  // Member i writes its part of step and commits it through its cluster (as CommitOnNode does after the
  // tier's commit); returns the commit's answer and how long the cluster took.
  std::pair<Status, std::chrono::milliseconds> CommitThrough(MultiNode& cluster, size_t i, uint64_t step,
                                                             bool down_tree = false) {
    WritePart(i, step);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = cluster.ReplicateCommitted("job", step, down_tree);
    return {st, std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)};
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
  // Member 0's send waits for the other three members' folds and the seal: 300 ms was too short on
  // two loaded cores under ASan (its step then read incomplete); a wait ends at the seal anyway.
  MakeMembers(10s);
  CommitWholeGroup(kMemberStep);
  auto gauge = [](const std::vector<Gauge>& gauges, const std::string& name, const std::string& state) {
    for (const Gauge& g : gauges) {
      const bool labelled = !g.labels.empty() && g.labels[0].second == state;
      if (g.name == name && (state.empty() || labelled)) return g.value;
    }
    return -1.0;
  };
  const std::string& id = group.data[0];
  std::unique_ptr<MultiNode> member = ClusterOf(id, ReplicaAck::kNone);
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
  std::unique_ptr<MultiNode> holder = ClusterWith(group.parity[0], ReplicaAck::kNone, nullptr);
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

// Decision 146: with --parity-ack all a member's commit returns only once its group is sealed on every
// holder, so the step is already redundant when the writer learns it is committed.
TEST_F(ParityMemberTest, AckAllACommitReturnsOnlyOnceItsGroupIsSealedOnEveryHolder) {
  MakeMembers(10s);
  std::map<std::string, std::unique_ptr<MultiNode>> clusters;
  for (const std::string& id : group.data) clusters[id] = ClusterOf(id, ReplicaAck::kAll);
  std::atomic<int> returned{0};
  std::vector<Status> answers(group.data.size(), Internal("not committed"));
  std::vector<std::thread> first_three;
  for (size_t i = 0; i < 3; ++i) {
    first_three.emplace_back([&, i] {
      answers[i] = CommitThrough(*clusters[group.data[i]], i, kMemberStep).first;
      ++returned;
    });
  }
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(returned.load(), 0) << "a commit returned before its group's fourth part was committed";
  EXPECT_EQ(KindOf(0, kMemberStep), ParityStepState::Kind::kPending);
  answers[3] = CommitThrough(*clusters[group.data[3]], 3, kMemberStep).first;
  for (std::thread& t : first_three) t.join();
  for (size_t i = 0; i < group.data.size(); ++i) {
    EXPECT_TRUE(answers[i].ok()) << group.data[i] << ": " << answers[i].ToString();
    // No Drain: redundant as the commit returns.
    EXPECT_EQ(KindOf(i, kMemberStep), ParityStepState::Kind::kRedundant) << group.data[i];
  }
  EXPECT_TRUE(HoldersHave(kMemberStep));
  EXPECT_EQ(clusters[group.data[0]]->Stats()->parity->ack, "all");
}

// A holder that does not answer: the commit gives up after the peer timeout plus one slice with kTimeout
// naming the holders (as --replica-ack all answers for a replica that does not answer), the step stays
// committed and pending, and the send, still running, records what the holders answer at last.
TEST_F(ParityMemberTest, AckAllWithAHolderThatNeverAnswersReturnsTheTimeoutAnswerAndTheStepStaysCommitted) {
  MakeMembers(300ms);  // the commit waits 300 ms + kParityWaitSlice
  std::map<std::string, std::unique_ptr<MultiNode>> clusters;
  for (const std::string& id : group.data) clusters[id] = ClusterOf(id, ReplicaAck::kAll);
  const std::string& silent = group.parity[0];
  nodes[silent]->faults->DelayEverySend(peer::Millis(3000));
  std::vector<std::pair<Status, std::chrono::milliseconds>> answers(group.data.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < group.data.size(); ++i) {
    threads.emplace_back([&, i] { answers[i] = CommitThrough(*clusters[group.data[i]], i, kMemberStep); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < group.data.size(); ++i) {
    const auto& [st, took] = answers[i];
    EXPECT_EQ(st.code(), Code::kTimeout) << group.data[i] << ": " << st.ToString();
    EXPECT_NE(st.message().find("was not sealed by its holders " + group.parity[0] + ", " + group.parity[1] +
                                " within 1300 ms"),
              std::string::npos)
        << st.ToString();
    EXPECT_NE(st.message().find("the step is committed in this node's memory"), std::string::npos);
    EXPECT_GE(took, 1300ms);
    EXPECT_LT(took, 2800ms) << "the commit waited for the silent holder";
    EXPECT_TRUE(nodes[group.data[i]]->h.tier->HasCommitted("job", kMemberStep));
    Result<ParityStepState> state = parity[group.data[i]]->State("job", kMemberStep);
    ASSERT_TRUE(state.ok());
    EXPECT_EQ(state->kind, ParityStepState::Kind::kPending);
    EXPECT_NE(state->detail.find("the commit stopped waiting"), std::string::npos) << state->detail;
  }
  nodes[silent]->faults->ClearFaults();
  for (const std::string& id : group.data) parity[id]->Drain();
  EXPECT_NE(KindOf(0, kMemberStep), ParityStepState::Kind::kPending);  // the send ended, whatever it learned
}

// --parity-ack none (decision 136, unchanged), and a part committed down a commit tree under all: the commit
// returns at once, the step pending, though its group never completes.
TEST_F(ParityMemberTest, AckNoneAndAPartDownACommitTreeReturnAtOnce) {
  MakeMembers(2s);
  std::unique_ptr<MultiNode> none = ClusterOf(group.data[0], ReplicaAck::kNone);
  const auto [st, took] = CommitThrough(*none, 0, kMemberStep);
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_LT(took, 1000ms);
  EXPECT_EQ(KindOf(0, kMemberStep), ParityStepState::Kind::kPending);
  EXPECT_EQ(none->Stats()->parity->ack, "none");
  std::unique_ptr<MultiNode> all = ClusterOf(group.data[1], ReplicaAck::kAll);
  const auto [part, part_took] = CommitThrough(*all, 1, kMemberStep, /*down_tree=*/true);
  EXPECT_TRUE(part.ok()) << part.ToString();
  EXPECT_LT(part_took, 1000ms);
  EXPECT_EQ(KindOf(1, kMemberStep), ParityStepState::Kind::kPending);
  for (const std::string& id : group.data) parity[id]->Drain();
  EXPECT_EQ(KindOf(0, kMemberStep), ParityStepState::Kind::kIncomplete);  // two of four parts: not sealed
}

}  // namespace
}  // namespace tierckpt::agent
