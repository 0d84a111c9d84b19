// commit.h — what a memory commit is on this node, shared by the local
// service (CommitStep) and the peer service (kCommitPart) (docs/multinode.md).
//
// CommitOnNode: MemoryTier::CommitStep, then replication of the step (or of
// this node's part) to its holders under the ack policy: with kAll the call
// returns after every holder verified its replica, and a failed replication
// is the returned error while the step stays committed here; with kNone the
// replication is queued and the manifest returned at once.
//
// How the parts of a step spanning nodes add up to one manifest is
// tier/parts.h (the persister needs it too).
//
// Pure functions over their arguments; thread-safe as the tier is.
#pragma once

#include <string_view>

#include "common/work_queue.h"
#include "replication/replicator.h"
#include "tier/memory_tier.h"
#include "tier/parts.h"
#include "tierckpt/manifest.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

struct CommitDeps {
  MemoryTier* tier = nullptr;
  Replicator* replicator = nullptr;  // nullptr on a single node
  ReplicaAck ack = ReplicaAck::kAll;
  WorkQueue* replication_queue = nullptr;  // runs kNone replications
};

// writer: the committing client's writer id (MemoryTier, "one writer per
// step"); kAnyWriter for a part committed on a peer's behalf.
Result<Manifest> CommitOnNode(const CommitDeps& deps, const wire::CommitStepRequest& req,
                              std::string_view writer = kAnyWriter);

}  // namespace tierckpt::agent
