// cluster.h — this node's place in a cluster: everything the handlers, the
// read path and the commit ask of multi-node, behind one interface, so that
// no caller asks whether the agent has peers (as tensorpipe registers its
// transports behind one interface).
//
// Two implementations:
//   SingleNode (below; no --peers): no replica holders, no other members'
//     parts; replicating a commit is a no-op success; a step spanning nodes
//     is refused (kFailedPrecondition); Stats say single node (nullopt).
//   MultiNode (multi_node.h; --peers): over the Replicator, the ReplicaTiers
//     and the replication queue of the agent.
// The agent builds one of them (agent.cc); ReadPath still decides which tier
// serves a read (read_path.h), asking the cluster for the holders' and the
// other members' copies in its fixed order.
//
// Thread safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ops/metrics.h"
#include "replication/commit_tree.h"
#include "replication/parity_state.h"
#include "tier/memory_tier.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

// Multi-node state for Stats (--peers), reports.h's "peers" object.
struct PeerStatsInput {
  std::string listen;                // the peer service's bound address
  uint32_t replicas = 0;             // R
  std::string replica_ack;           // "all" | "none"
  std::vector<std::string> holders;  // this node's replica holders
  struct Held {
    std::string origin;
    size_t steps = 0;
    uint64_t bytes = 0;
  };
  std::vector<Held> held;  // replicas this node holds, per origin
  // The erasure-coded tier (--redundancy rs:K+M, decision 135); nullopt without.
  std::optional<ParityStatsInput> parity;
};

// An object of another member's part of a step spanning nodes, from the copy
// of that part this node keeps (a ReplicaTiers tier).
struct PartObject {
  OpenedObject object;
  MemoryTier* copy = nullptr;  // the tier holding the copy of member's part
  std::string member;
  bool fetched = false;  // brought in (and verified) by this call
};

// kNotFound "object <name> is not in <ns>/<step>".
Status ObjectNotInStep(std::string_view ns, uint64_t step, std::string_view name);

class Cluster {
 public:
  virtual ~Cluster() = default;

  // ---- A commit on this node (replication/commit.h) ----
  // The holders of this node's replicas, replica 1 first; empty on a single
  // node and with --replicas 1.
  virtual const std::vector<std::string>& holders() const = 0;
  // The placement a committed step records (placement JSON); "" without
  // holders.
  virtual std::string PlacementJson() const = 0;
  // Replicates this node's committed (ns, step) to its holders under the ack
  // policy: with kAll, returns once every holder verified its replica (the
  // error names each holder that failed; the step stays committed here);
  // with kNone, queues the replication and returns Ok. Ok at once without
  // holders. With --redundancy rs:K+M the part's parity is sent too, and
  // with --parity-ack all the call also returns only once this node's group
  // is sealed on every parity holder (ParityMember::AwaitSent: its error
  // when not, the step still committed here), unless down_tree: a part
  // committed down a commit tree on its coordinator's behalf (decision
  // 146: the coordinator's part, committed after this one answers, may be
  // in its group), whose parity is sent without waiting.
  virtual Status ReplicateCommitted(std::string_view ns, uint64_t step, bool down_tree) = 0;

  // ---- Steps spanning nodes (docs/multinode.md) ----
  // Has every member of req.members (sorted, unique, more than one) but this
  // node commit its part, down the step's commit tree rooted at this node
  // (commit_tree.h, decision 102), and returns the sums of their parts
  // (what they hold together, never their manifests). Errors:
  // kFailedPrecondition on a single node (start every agent with --peers);
  // kInvalidArgument when req.members lacks this node; else each member that
  // failed and why.
  virtual Result<SubtreeSum> CommitOtherParts(const wire::CommitStepRequest& req) = 0;
  // Object `name` of step `own` (this node's part manifest of a step spanning
  // nodes) from the copy this node keeps of another member's part, fetched
  // first from the member or its holders when absent (members tried in the
  // manifest's order). kNotFound when no part has it (a single node:
  // ObjectNotInStep).
  virtual Result<PartObject> OpenFromOtherParts(const Manifest& own, const std::string& name) = 0;
  // Restores member's part of (ns, step) into copy again (after a corrupt
  // copy was dropped), from the member or its holders, verifying every object.
  virtual Status FetchPart(MemoryTier* copy, std::string_view member, std::string_view ns, uint64_t step) = 0;
  // The tier holding this node's copies of member's parts (made when absent),
  // for a part brought in from elsewhere (the durable tier: read_path.h).
  // kFailedPrecondition on a single node.
  virtual Result<MemoryTier*> PartCopy(std::string_view member) = 0;

  // ---- This node's steps on its holders (callers ask only with holders) ----
  // Restores (ns, step) into tier from the first holder that has it and
  // returns that holder; kNotFound naming every holder tried.
  virtual Result<std::string> RestoreFromHolders(MemoryTier* tier, std::string_view ns, uint64_t step) = 0;
  // The manifest of (ns, step) from the first holder that has it.
  virtual Result<Manifest> ManifestFromHolders(std::string_view ns, uint64_t step) = 0;
  // The steps of ns some holder keeps (step → the first holder listing it).
  virtual std::map<uint64_t, std::string> StepsOnHolders(std::string_view ns) = 0;
  // Asks every holder to delete its replica of (ns, step); returns those that
  // held one (none on a single node). With --redundancy rs:K+M the group's
  // parity holders are asked to drop the step's parity too (not listed in
  // the result). The error names each holder that could not be asked or
  // failed (its copy stays; ask again).
  virtual Result<std::vector<std::string>> DropReplicas(std::string_view ns, uint64_t step) = 0;

  // ---- This node's steps from its group's parity (--redundancy rs:K+M) ----
  // Whether this node's parts can be rebuilt from its group's parity pieces
  // (an rs:K+M cluster); false on a single node and without --redundancy.
  virtual bool HasParity() const = 0;
  // This node's parity state of (ns, step), as `tierckpt agent status`
  // shows it ("pending", "redundant", "incomplete", "unknown"); "" when the
  // node keeps no parity or sent none of that step (decision 166: what
  // `tierckpt ls` shows, carried in the List reply).
  virtual std::string ParityStateOf(std::string_view ns, uint64_t step) const = 0;
  // Rebuilds this node's part of (ns, step) into tier from the survivors of
  // its group (replication/parity_restore.h, decision 139) and returns what
  // it was rebuilt from. kFailedPrecondition when more than M of the
  // group's pieces are gone (naming the group, the count and M) or without
  // parity; the rebuild's and the restore's errors otherwise.
  virtual Result<std::string> RestoreFromParity(MemoryTier* tier, std::string_view ns, uint64_t step) = 0;
  // With --redundancy rs:K+M and --parity-ack all, on the coordinator of a
  // step spanning members, after its own part's group is sealed: waits until
  // every other group holding a member's part is sealed on all its holders
  // (decision 161), at most as long as its own group's wait. Ok at once
  // otherwise. kTimeout naming each group and its holders' answers.
  virtual Status AwaitMembersParity(std::string_view ns, uint64_t step, const std::vector<std::string>& members) = 0;
  // Another member's part of (ns, step) rebuilt from that member's group's
  // survivors into copy (PartCopy(member)), as a degraded read does
  // (decision 158); what it was rebuilt from. For a persist takeover of a
  // member that is gone (decision 159). kFailedPrecondition without parity.
  virtual Result<std::string> RebuildPartOf(MemoryTier* copy, std::string_view member, std::string_view ns,
                                            uint64_t step) = 0;
  // The manifest of this node's part of (ns, step) as its group's parity
  // record describes it (the objects; no members, world size 0): kNotFound
  // when no holder has the group sealed, or without parity.
  virtual Result<Manifest> ManifestFromParity(std::string_view ns, uint64_t step) = 0;

  // ---- Operations ----
  // The "peers" of Stats; nullopt on a single node.
  virtual std::optional<PeerStatsInput> Stats() const = 0;
  // The multi-node gauges of a scrape (replication queue, replica bytes by
  // origin, peer health), appended to out; none on a single node.
  virtual void AddGauges(std::vector<Gauge>* out) const = 0;
  // Wakes what waits on the replicas this node holds (at shutdown).
  virtual void Shutdown() = 0;
  // Stops the replication queue (queued replications are dropped).
  virtual void Stop() = 0;
};

// The cluster of an agent without peers. Stateless.
class SingleNode final : public Cluster {
 public:
  const std::vector<std::string>& holders() const override { return no_holders_; }
  std::string PlacementJson() const override { return ""; }
  Status ReplicateCommitted(std::string_view, uint64_t, bool) override { return Status::Ok(); }
  Result<SubtreeSum> CommitOtherParts(const wire::CommitStepRequest& req) override;
  Result<PartObject> OpenFromOtherParts(const Manifest& own, const std::string& name) override;
  Status FetchPart(MemoryTier* copy, std::string_view member, std::string_view ns, uint64_t step) override;
  Result<MemoryTier*> PartCopy(std::string_view member) override;
  Result<std::string> RestoreFromHolders(MemoryTier* tier, std::string_view ns, uint64_t step) override;
  Result<Manifest> ManifestFromHolders(std::string_view ns, uint64_t step) override;
  std::map<uint64_t, std::string> StepsOnHolders(std::string_view) override { return {}; }
  Result<std::vector<std::string>> DropReplicas(std::string_view, uint64_t) override {
    return std::vector<std::string>{};
  }
  bool HasParity() const override { return false; }
  std::string ParityStateOf(std::string_view, uint64_t) const override { return ""; }
  Result<std::string> RestoreFromParity(MemoryTier*, std::string_view, uint64_t) override {
    return FailedPrecondition("a single node keeps no parity");
  }
  Result<Manifest> ManifestFromParity(std::string_view, uint64_t) override {
    return NotFound("a single node keeps no parity");
  }
  Result<std::string> RebuildPartOf(MemoryTier*, std::string_view, std::string_view, uint64_t) override {
    return FailedPrecondition("a single node keeps no parity");
  }
  Status AwaitMembersParity(std::string_view, uint64_t, const std::vector<std::string>&) override {
    return Status::Ok();
  }
  std::optional<PeerStatsInput> Stats() const override { return std::nullopt; }
  void AddGauges(std::vector<Gauge>*) const override {}
  void Shutdown() override {}
  void Stop() override {}

 private:
  const std::vector<std::string> no_holders_{};
};

// A shared SingleNode: the default of the deps that take a Cluster (as
// leveldb's Options::comparator defaults to the stateless
// BytewiseComparator()). Never destroyed.
Cluster* SingleNodeCluster();

}  // namespace tierckpt::agent
