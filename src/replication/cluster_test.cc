// Cluster (cluster.h): the contract of its two implementations. SingleNode:
// no holders, no other parts, replication a no-op success, steps spanning
// nodes refused. MultiNode over nodes in one process (peer_test_nodes.h):
// a commit replicated under either ack policy, the holders' copies, Stats and
// gauges, each part counting into the Metrics it was given.
#include "replication/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>

#include "replication/commit.h"
#include "replication/multi_node.h"
#include "replication/peer_test_nodes.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::TierHarness;
using testing::WriteObject;

bool HasGauge(const std::vector<Gauge>& gauges, const std::string& name) {
  return std::any_of(gauges.begin(), gauges.end(), [&](const Gauge& g) { return g.name == name; });
}

TEST(SingleNodeTest, HasNoPeersReplicatesNothingAndRefusesStepsSpanningNodes) {
  SingleNode single;
  EXPECT_TRUE(single.holders().empty());
  EXPECT_EQ(single.PlacementJson(), "");
  EXPECT_TRUE(single.ReplicateCommitted("job", 1, /*down_tree=*/false).ok());
  Result<SubtreeSum> parts =
      single.CommitOtherParts(wire::CommitStepRequest{"job", 3, 2, false, {}, {"n1", "n2"}});
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(parts.status().message().find("spans 2 nodes, but this agent runs without peers"),
            std::string::npos)
      << parts.status().ToString();
  Manifest own;
  own.ns = "job";
  own.step = 3;
  own.members = {"n1", "n2"};
  Result<PartObject> part = single.OpenFromOtherParts(own, "a");
  EXPECT_EQ(part.status().code(), Code::kNotFound);
  EXPECT_EQ(part.status().message(), ObjectNotInStep("job", 3, "a").message());
  Result<std::vector<std::string>> dropped = single.DropReplicas("job", 3);
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->empty());
  EXPECT_TRUE(single.StepsOnHolders("job").empty());
  EXPECT_FALSE(single.Stats().has_value());
  std::vector<Gauge> gauges;
  single.AddGauges(&gauges);
  EXPECT_TRUE(gauges.empty());
}

TEST(SingleNodeTest, ACommitOnASingleNodeIsCountedInTheTiersMetricsAndRecordsNoPlacement) {
  TierHarness h;
  ASSERT_TRUE(WriteObject(*h.tier, "job", 1, "a", "data").ok());
  Result<Manifest> m = CommitOnNode({h.tier.get()}, wire::CommitStepRequest{"job", 1, 1, false, {}, {}});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(h.metrics.commit.ok.load(), 1u);
  Result<Manifest> again = CommitOnNode({h.tier.get()}, wire::CommitStepRequest{"job", 2, 1, false, {}, {}});
  EXPECT_FALSE(again.ok());  // nothing written in step 2
  EXPECT_EQ(h.metrics.commit.failed.load(), 1u);
}

class MultiNodeClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const cluster::Membership members = Members(2);
    for (const std::string id : {"n1", "n2"}) nodes[id] = std::make_unique<Node>(id, net, members, 2);
  }
  Status Write(Node& n, uint64_t step) { return WriteObject(*n.h.tier, "job", step, "a", Bytes(70000, 'a')); }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  std::map<std::string, std::unique_ptr<Node>> nodes;
};

TEST_F(MultiNodeClusterTest, ACommitIsReplicatedToTheHoldersAndCountedWhereEachPartRuns) {
  Node& n1 = *nodes["n1"];
  Node& n2 = *nodes["n2"];
  EXPECT_EQ(n1.cluster->holders(), std::vector<std::string>{"n2"});
  EXPECT_FALSE(n1.cluster->PlacementJson().empty());
  ASSERT_TRUE(Write(n1, 4).ok());
  Result<Manifest> m =
      CommitOnNode({n1.h.tier.get(), n1.cluster.get()}, wire::CommitStepRequest{"job", 4, 1, false, {}, {}});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  // kAll: the replica is there when the commit returns.
  Result<MemoryTier*> held = n2.replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE((*held)->HasCommitted("job", 4));
  EXPECT_EQ(n1.h.metrics.commit.ok.load(), 1u);
  EXPECT_EQ(n2.h.metrics.replicate.ok.load(), 1u);  // counted by the holder's peer service
  EXPECT_EQ(n1.h.metrics.replicate.ok.load(), 0u);
  EXPECT_EQ(n1.cluster->StepsOnHolders("job"), (std::map<uint64_t, std::string>{{4, "n2"}}));
  EXPECT_TRUE(n1.cluster->ManifestFromHolders("job", 4).ok());

  std::optional<PeerStatsInput> stats = n2.cluster->Stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->listen, testing::Address("n2"));
  EXPECT_EQ(stats->replicas, 2u);
  EXPECT_EQ(stats->replica_ack, "all");
  EXPECT_EQ(stats->holders, std::vector<std::string>{"n1"});
  ASSERT_EQ(stats->held.size(), 1u);
  EXPECT_EQ(stats->held[0].origin, "n1");
  EXPECT_EQ(stats->held[0].steps, 1u);
  std::vector<Gauge> gauges;
  n2.cluster->AddGauges(&gauges);
  EXPECT_TRUE(HasGauge(gauges, "tierckpt_replication_queue"));
  EXPECT_TRUE(HasGauge(gauges, "tierckpt_replica_bytes"));

  Result<std::vector<std::string>> dropped = n1.cluster->DropReplicas("job", 4);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, std::vector<std::string>{"n2"});
  EXPECT_FALSE((*held)->HasCommitted("job", 4));
}

TEST_F(MultiNodeClusterTest, WithAckNoneTheReplicationRunsOnTheQueueAfterTheCommitReturns) {
  Node& n1 = *nodes["n1"];
  WorkQueue queue("replicate-none", 1);
  MultiNodeDeps d;
  d.node_id = "n1";
  d.replicator = n1.replicator.get();
  d.replicas = n1.replica_tiers.get();
  d.queue = &queue;
  d.ack = ReplicaAck::kNone;
  MultiNode none(std::move(d));
  EXPECT_EQ(none.Stats()->replica_ack, "none");
  ASSERT_TRUE(Write(n1, 5).ok());
  ASSERT_TRUE(
      CommitOnNode({n1.h.tier.get(), &none}, wire::CommitStepRequest{"job", 5, 1, false, {}, {}}).ok());
  queue.Drain();
  Result<MemoryTier*> held = nodes["n2"]->replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE((*held)->HasCommitted("job", 5));
}

TEST_F(MultiNodeClusterTest, AStepSpanningNodesMustNameThisNode) {
  Result<SubtreeSum> parts =
      nodes["n1"]->cluster->CommitOtherParts(wire::CommitStepRequest{"job", 6, 2, false, {}, {"n2", "n3"}});
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), Code::kInvalidArgument);
  EXPECT_NE(parts.status().message().find("names members without this node (n1)"), std::string::npos)
      << parts.status().ToString();
}

}  // namespace
}  // namespace tierckpt::agent
