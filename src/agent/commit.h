// commit.h — what a memory commit is on this node, shared by the local
// service (CommitStep) and the peer service (kCommitPart), and how the parts
// of a step spanning nodes add up to one manifest (docs/multinode.md).
//
// CommitOnNode: MemoryTier::CommitStep, then replication of the step (or of
// this node's part) to its holders under the ack policy: with kAll the call
// returns after every holder verified its replica, and a failed replication
// is the returned error while the step stays committed here; with kNone the
// replication is queued and the manifest returned at once.
//
// MergeParts: one manifest listing the objects of every part, each with its
// writer node. Every part must be of the same step with the same members,
// and there must be one part per member; the same object name in two parts
// is kCorruption (two nodes wrote it).
//
// Pure functions over their arguments; thread-safe as the tier is.
#pragma once

#include <string_view>
#include <vector>

#include "agent/memory_tier.h"
#include "agent/replicator.h"
#include "agent/work_queue.h"
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

// node: the node id the merged manifest names as its writer.
Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node);

// Whether `whole` (a merged manifest) lists every object of `part` with the
// same size and checksum.
bool ContainsPart(const Manifest& whole, const Manifest& part);

}  // namespace tierckpt::agent
