// commit.h — what a memory commit is on this node, shared by the local
// service (CommitStep) and the peer service (kCommitPart) (docs/multinode.md).
//
// CommitOnNode: MemoryTier::CommitStep (recording the cluster's placement),
// then Cluster::ReplicateCommitted: replication of the step (or of this
// node's part) to its holders under the ack policy. With kAll the call
// returns after every holder verified its replica, and a failed replication
// is the returned error while the step stays committed here; with kNone the
// replication is queued and the manifest returned at once; on a single node
// (or without holders) nothing is replicated. With --parity-ack all the
// call also waits for this node's group's parity, except for a part
// committed down a commit tree (coordinator set; decision 146). A failed commit is counted in
// the tier's metrics (MemoryTierOptions::metrics), beside the successes the
// tier counts.
//
// How the parts of a step spanning nodes add up to one manifest is
// tier/parts.h (the persister needs it too).
//
// Pure functions over their arguments; thread-safe as the tier is.
#pragma once

#include <string_view>

#include "replication/cluster.h"
#include "tier/memory_tier.h"
#include "tier/parts.h"
#include "tierckpt/manifest.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

struct CommitDeps {
  MemoryTier* tier = nullptr;              // required
  Cluster* cluster = SingleNodeCluster();  // who replicates the commit
};

// writer: the committing client's writer id (MemoryTier, "one writer per
// step"); kAnyWriter for a part committed on a peer's behalf. coordinator:
// the step's coordinator when it is another node (a part committed down the
// tree): the part then names the members by count and digest and records no
// placement (StepSpan::coordinator, decision 116); "" on the coordinator.
Result<Manifest> CommitOnNode(const CommitDeps& deps, const wire::CommitStepRequest& req,
                              std::string_view writer = kAnyWriter, std::string_view coordinator = "");

}  // namespace tierckpt::agent
