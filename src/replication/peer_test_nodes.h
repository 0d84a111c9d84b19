// peer_test_nodes.h — several nodes of a cluster in one test process
// (test-only): each Node has its tier, the replicas it holds, a
// fault-injecting transport over an in-memory network, a Replicator, the
// MultiNode cluster over them (as the handlers see it) and a PeerService;
// every part reports into the harness's Metrics (h.metrics). With a shared
// durable store it has a Persister too, and a ParityHolder whose layout a
// test sets (parity_layout) for the erasure-coded tier, wired for steps spanning nodes as
// the agent wires it (agent.cc).
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "ops/recent_errors.h"
#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"
#include "replication/commit.h"
#include "replication/multi_node.h"
#include "replication/parity_holder.h"
#include "replication/peer_service.h"
#include "replication/replica_tiers.h"
#include "replication/replicator.h"
#include "store/object_store.h"
#include "testing/fault_transport.h"
#include "os/files.h"
#include "tier/layout.h"
#include "tier/persister.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent::testing {

inline std::string Address(const std::string& node) { return node + ".test:7100"; }

// One node: its tier, the replicas it holds, its transport and peer service.
struct Node {
  // store: the durable tier every node shares (nullptr: none);
  // replicate_rate: the peer service's cap (--replicate-rate; nullptr: none);
  // takeover_after: the persister's PartsOptions::takeover_after;
  // peer_timeout: the replicator's and the peer service's request deadline.
  Node(const std::string& node_id, std::shared_ptr<peer::InMemoryNetwork> net,
       const cluster::Membership& members, uint32_t replicas = 2, ObjectStore* store = nullptr,
       RateLimiter* replicate_rate = nullptr, std::chrono::milliseconds takeover_after = std::chrono::milliseconds(200),
       peer::Millis peer_timeout = peer::Millis(3000))
      : id(node_id) {
    h.options.node_id = id;
    h.options.has_durable = store != nullptr;
    EXPECT_TRUE(h.Reopen().ok());
    auto base = peer::InMemoryTransport::Create(std::move(net), peer::testing_util::Options(id));
    EXPECT_TRUE(base.ok()) << base.status().ToString();
    faults = std::make_shared<peer::FaultInjectingTransport>(std::shared_ptr<peer::Transport>(std::move(*base)));
    replica_tiers = std::make_unique<ReplicaTiers>(h.options, h.verifier.get());
    auto r = Replicator::Create(faults.get(), members, cluster::PlacementPolicy{replicas, 1}, id, peer_timeout);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    replicator = std::move(*r);
    replication_queue = std::make_unique<WorkQueue>("replicate", 1);
    MultiNodeDeps md;
    md.node_id = id;
    md.replicator = replicator.get();
    md.replicas = replica_tiers.get();
    md.queue = replication_queue.get();
    md.ack = ReplicaAck::kAll;
    md.replica_count = replicas;
    md.listen = [a = Address(id)] { return a; };
    cluster = std::make_unique<MultiNode>(std::move(md));
    PeerServiceDeps d;
    d.node_id = id;
    d.transport = faults.get();
    d.tier = h.tier.get();
    d.replicas = replica_tiers.get();
    d.metrics = &h.metrics;
    Replicator* rep = replicator.get();
    d.address_of = [rep](std::string_view n) { return rep->AddressOf(n); };
    d.ring = &rep->membership();
    d.timeout = peer_timeout;
    d.replicate_rate = replicate_rate;
    const CommitDeps commit{h.tier.get(), cluster.get()};
    d.commit_part = [commit](const wire::CommitStepRequest& req, const std::string& coordinator) {
    return CommitOnNode(commit, req, kAnyWriter, coordinator);
  };
    d.commit_children = [rep](const wire::CommitStepRequest& req, const CommitTree& tree) {
      return rep->CommitChildren(req, tree);
    };
    if (store != nullptr) {
      PersisterOptions po;
      po.metrics = &h.metrics;
      persister = std::make_unique<Persister>(po, h.tier.get(), store, &errors);
      PartsOptions parts;
      parts.node_id = id;
      parts.ask_elsewhere = [rep](const std::string& origin, const std::string& ns, uint64_t step) {
        return rep->PersistPartElsewhere(origin, ns, step);
      };
      parts.takeover_after = takeover_after;
      parts.wait_limit = std::chrono::seconds(20);
      persister->SetParts(std::move(parts));
      Persister* p = persister.get();
      h.tier->SetPersistHook([p](const std::string& ns, uint64_t step) { p->Enqueue(ns, step); });
      d.persist_part = [p](MemoryTier* tier, const std::string& ns, uint64_t step) {
        return p->UploadPart(tier, ns, step);
      };
    }
    ParityHolderOptions parity_options;
    parity_options.root = JoinPath(h.options.root, kParityDirName);
    parity_options.budget_bytes = h.options.budget_bytes;
    parity_options.chunk_bytes = 256u << 10;  // several chunks per part
    parity = std::make_unique<ParityHolder>(parity_options);
    d.parity = parity.get();
    d.parity_layout = &parity_layout;
    service = std::make_unique<PeerService>(std::move(d));
    EXPECT_TRUE(service->Start(Address(id)).ok());
  }
  ~Node() {
    service->Stop();
    if (persister != nullptr) persister->Stop(std::chrono::milliseconds(0));
    replica_tiers->Shutdown();
  }

  std::string id;
  TierHarness h;
  std::shared_ptr<peer::FaultInjectingTransport> faults;
  std::unique_ptr<ReplicaTiers> replica_tiers;
  std::unique_ptr<Replicator> replicator;
  std::unique_ptr<WorkQueue> replication_queue;
  std::unique_ptr<MultiNode> cluster;
  RecentErrors errors{&h.metrics};
  std::unique_ptr<Persister> persister;
  // The rs:K+M layout this node's service checks FoldParity against: empty
  // (no groups) until a test sets it, before any request.
  cluster::ParityLayout parity_layout;
  std::unique_ptr<ParityHolder> parity;
  std::unique_ptr<PeerService> service;
};

inline cluster::Membership Members(int n) {
  std::vector<cluster::Member> ms;
  for (int i = 1; i <= n; ++i) ms.push_back({"n" + std::to_string(i), Address("n" + std::to_string(i)), "", {}});
  auto m = cluster::Membership::Create(std::move(ms));
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

inline std::string Bytes(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 + (i >> 9));
  return s;
}

// Nodes "n1".."n<count>" of one cluster on net, each given the rs:k+m layout placed on their ring
// (what every parity test starts from); returns the layout, for the test to pick its groups.
inline Result<cluster::ParityLayout> StartParityNodes(std::map<std::string, std::unique_ptr<Node>>& nodes,
                                                      const std::shared_ptr<peer::InMemoryNetwork>& net, int count,
                                                      uint32_t k, uint32_t m, uint32_t replicas = 2) {
  const cluster::Membership members = Members(count);
  for (int i = 1; i <= count; ++i) {
    const std::string id = "n" + std::to_string(i);
    nodes[id] = std::make_unique<Node>(id, net, members, replicas);
  }
  Result<cluster::ParityLayout> placed = cluster::PlaceParity(nodes["n1"]->replicator->placement().ring, k, m);
  if (placed.ok()) {
    for (auto& [id, node] : nodes) node->parity_layout = *placed;
  }
  return placed;
}

}  // namespace tierckpt::agent::testing
