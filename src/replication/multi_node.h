// multi_node.h — the Cluster (cluster.h) of an agent with peers (--peers):
// replication after a commit through the Replicator under the ack policy
// (kNone replications run on the replication queue), this node's steps on
// its holders, the other members' parts of steps spanning nodes (the copies
// kept in ReplicaTiers, fetched through the Replicator), and the multi-node
// Stats and gauges (docs/replication.md, docs/multinode.md); with
// --redundancy rs:K+M also this node's parity (docs/erasure-coding.md).
//
// Thread-safe as its collaborators are (its own state, the steps being
// rebuilt from parity, is under parity_mu_). It owns none of them: the agent
// (or a test) does, and they must outlive it.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "common/mutex.h"
#include "common/work_queue.h"
#include "replication/cluster.h"
#include "replication/parity_holder.h"
#include "replication/parity_member.h"
#include "replication/replica_tiers.h"
#include "replication/replicator.h"

namespace tierckpt::agent {

struct MultiNodeDeps {
  std::string node_id;
  Replicator* replicator = nullptr;   // required
  ReplicaTiers* replicas = nullptr;   // required: the replicas (and other parts) this node keeps
  WorkQueue* queue = nullptr;         // required: runs the kNone replications
  ReplicaAck ack = ReplicaAck::kAll;  // --replica-ack
  // --parity-ack (decision 146): with kAll a commit of this node's part
  // waits for its group's parity (ParityMember::AwaitSent) beside its
  // replicas; kNone (decision 136) queues the parity only.
  ReplicaAck parity_ack = ReplicaAck::kNone;
  uint32_t replica_count = 1;         // R (Stats)
  // The fan-out of the commit trees this node roots (--commit-fan-out).
  uint32_t commit_fan_out = kDefaultCommitFanOut;
  // The peer service's bound address (Stats), asked at each Stats.
  std::function<std::string()> listen;
  // The erasure-coded tier (--redundancy rs:K+M, decision 135); both nullptr
  // without it. After each commit the member sends this node's part to its
  // group's parity holders; a delete drops the step's parity too; a part
  // lost with this node's memory is rebuilt from the group's survivors
  // (RestoreFromParity, decision 139).
  ParityMember* parity_member = nullptr;
  const ParityHolder* parity_holder = nullptr;
};

class MultiNode final : public Cluster {
 public:
  explicit MultiNode(MultiNodeDeps deps) : d_(std::move(deps)) {}
  MultiNode(const MultiNode&) = delete;
  MultiNode& operator=(const MultiNode&) = delete;

  const std::vector<std::string>& holders() const override { return d_.replicator->holders(); }
  std::string PlacementJson() const override;
  Status ReplicateCommitted(std::string_view ns, uint64_t step, bool down_tree) override;
  Result<SubtreeSum> CommitOtherParts(const wire::CommitStepRequest& req) override;
  Result<PartObject> OpenFromOtherParts(const Manifest& own, const std::string& name) override;
  Status FetchPart(MemoryTier* copy, std::string_view member, std::string_view ns, uint64_t step) override {
    return d_.replicator->FetchPart(copy, member, ns, step);
  }
  Result<MemoryTier*> PartCopy(std::string_view member) override { return d_.replicas->Get(member, /*create=*/true); }
  Result<std::string> RestoreFromHolders(MemoryTier* tier, std::string_view ns, uint64_t step) override {
    return d_.replicator->RestoreFromPeers(tier, ns, step);
  }
  Result<Manifest> ManifestFromHolders(std::string_view ns, uint64_t step) override {
    return d_.replicator->ManifestFromPeers(ns, step);
  }
  std::map<uint64_t, std::string> StepsOnHolders(std::string_view ns) override {
    return d_.replicator->StepsOnPeers(ns);
  }
  Result<std::vector<std::string>> DropReplicas(std::string_view ns, uint64_t step) override;
  bool HasParity() const override { return d_.parity_member != nullptr; }
  std::string ParityStateOf(std::string_view ns, uint64_t step) const override;
  Result<std::string> RestoreFromParity(MemoryTier* tier, std::string_view ns, uint64_t step) override;
  Result<std::string> RebuildPartOf(MemoryTier* copy, std::string_view member, std::string_view ns,
                                    uint64_t step) override;
  Status AwaitMembersParity(std::string_view ns, uint64_t step, const std::vector<std::string>& members) override;
  Result<Manifest> ManifestFromParity(std::string_view ns, uint64_t step) override;
  std::optional<PeerStatsInput> Stats() const override;
  void AddGauges(std::vector<Gauge>* out) const override;
  void Shutdown() override { d_.replicas->Shutdown(); }
  void Stop() override { d_.queue->Stop(); }

 private:
  // The coordinator's part of own's step (own naming the members by
  // member_ref, decision 116): this node's replica of it, else asked of the
  // coordinator, then its holders. kCorruption when its list is not own's
  // (count and digest); the fetch's error, with context, when none serves it.
  Result<Manifest> CoordinatorPart(const Manifest& own);
  // Member's part of (ns, step) rebuilt from its group's parity into copy
  // (this node's copy of member's parts) when it holds object name
  // (RestoreMemberFromParity); one rebuild of a part at a time.
  Result<std::string> RebuildMemberPart(MemoryTier* copy, const std::string& member, std::string_view ns,
                                        uint64_t step, const std::string& name);
  // Runs rebuild unless another rebuild of key runs (then waits for it), or
  // (ns, step) is committed in `into` by then (a concurrent rebuild's).
  Result<std::string> OneRebuildAtATime(const std::pair<std::string, uint64_t>& key, MemoryTier* into,
                                        std::string_view ns, uint64_t step,
                                        const std::function<Result<std::string>()>& rebuild) EXCLUDES(parity_mu_);
  // Const after construction.
  const MultiNodeDeps d_;

  // The steps (and, keyed "member/ns", other members' parts) being rebuilt
  // from parity now: a reader of a step another
  // reader is rebuilding waits for that rebuild rather than run its own
  // (a restore opens a step's objects in parallel).
  Mutex parity_mu_;
  CondVar parity_cv_{&parity_mu_};
  std::set<std::pair<std::string, uint64_t>> rebuilding_ GUARDED_BY(parity_mu_);
};

}  // namespace tierckpt::agent
