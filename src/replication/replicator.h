// replicator.h — this agent's side of replication as a client: after a
// memory commit it asks the step's replica holders to pull it, and after a
// node replacement it restores this node's steps from them.
//
// The holders come from the placement (cluster/placement.h) of the static
// membership (--peers hostfile) under the policy (--replicas R,
// --replica-spacing): the R-1 ring successors of this node. Replicate()
// sends each holder kReplicate {ns, step} in parallel and waits for every
// answer; the holder pulls the objects from this agent's peer service
// (peer_service.h). RestoreFromPeers() asks the holders in order for this
// node's step (origin = this node) and restores it with MemoryTier::Restore
// from the first that has it.
//
// Steps spanning nodes (docs/multinode.md): CommitChildren() has this node's
// children in the step's commit tree (commit_tree.h) commit their subtrees
// (kCommitSubtree), the coordinator's first hop and every interior node's
// (decision 102); PersistPartElsewhere() has a member,
// or failing that one of its holders, upload the member's part
// (kPersistPart); PartManifest()/FetchPart() read another member's part from
// it or its holders, for reads of objects another node wrote.
//
// Thread-safe; connections are made per call (the peer transport's
// handshake costs one round trip plus an HMAC, small next to a step).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/membership.h"
#include "cluster/placement.h"
#include "common/mutex.h"
#include "peer/transport.h"
#include "replication/commit_tree.h"
#include "replication/member_runs.h"
#include "replication/peer_store.h"
#include "tier/memory_tier.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

// When a memory commit returns: kNone at once (replication runs after it),
// kAll once every holder has verified its replica (docs/replication.md).
enum class ReplicaAck { kNone, kAll };
Result<ReplicaAck> ParseReplicaAck(std::string_view text);  // "none" | "all"
std::string_view ReplicaAckName(ReplicaAck ack);

class Replicator {
 public:
  // transport must outlive the replicator. Fails when node_id is not a
  // member or the policy does not fit the membership.
  static Result<std::unique_ptr<Replicator>> Create(peer::Transport* transport, cluster::Membership membership,
                                                    cluster::PlacementPolicy policy, std::string node_id,
                                                    peer::Millis timeout);

  // The holders of this node's replicas, replica 1 first (empty with R = 1).
  const std::vector<std::string>& holders() const { return holders_; }
  const cluster::Membership& membership() const { return membership_; }
  const cluster::Placement& placement() const { return placement_; }
  // The peer address of node_id; nullopt if not a member. The membership's
  // address until MoveNode gives another.
  std::optional<std::string> AddressOf(std::string_view node_id) const;
  // node_id is now found at address (--peers dns: a replaced node that came
  // back on another machine, decision 95). The ring does not change: node
  // ids are the ring. kNotFound when node_id is not a member;
  // kInvalidArgument for an address that does not parse.
  Status MoveNode(std::string_view node_id, std::string_view address);
  // Every member's current address (node id → address).
  std::map<std::string, std::string> Addresses() const;

  // Every holder holds a verified replica of (ns, step) when this returns
  // Ok; otherwise the error names each holder that failed and why.
  Status Replicate(std::string_view ns, uint64_t step);
  // Asks every holder to delete its replica of (ns, step) (after a delete
  // here); returns the holders that held one. The error names each holder
  // that could not be asked or failed (its copy stays; ask again).
  Result<std::vector<std::string>> DropReplicas(std::string_view ns, uint64_t step);
  // Restores this node's (ns, step) into tier from the first holder that
  // has it and returns that holder; kNotFound naming every holder tried (and
  // why) when none does. Which tier a read uses is agent/read_path.h's call.
  Result<std::string> RestoreFromPeers(MemoryTier* tier, std::string_view ns, uint64_t step);
  // This node's steps of ns that some holder keeps (step → the first holder
  // listing it); holders that do not answer are skipped (logged at debug).
  std::map<uint64_t, std::string> StepsOnPeers(std::string_view ns);
  // The manifest of this node's (ns, step) from the first holder that has it.
  Result<Manifest> ManifestFromPeers(std::string_view ns, uint64_t step);

  // Whether the last request to each peer this agent sent got an answer
  // (true) or failed to reach it (false); peers never asked are absent.
  std::map<std::string, bool> PeerHealth() const;

  // One request (on a connection of its own) to node and its control reply (kError decoded into the
  // Status, and *answered_error set when given; any other type than `want`
  // is a protocol error).
  Result<std::string> Call(const std::string& node, PeerMsg type, std::string payload, PeerMsg want,
                           peer::Millis reply_timeout, bool* answered_error = nullptr);
  // The timeout each request's connect uses.
  peer::Millis timeout() const { return timeout_; }
  // The transport every request goes through (parity_restore.h reads pieces with it).
  peer::Transport* transport() const { return transport_; }

  // ---- Steps spanning nodes ----
  // The holders of node's replicas, replica 1 first (node itself excluded).
  std::vector<std::string> HoldersOf(std::string_view node) const;
  // Has each child of this node in `tree` (over req.members) commit its
  // subtree of the step (kCommitRingSubtree: the members as runs of places
  // in this agent's ring, member_runs.h; the children in parallel) and
  // returns the sum of their answers (depth: hops below this node; zero sums
  // for a leaf). The error names each member that failed and why: a child
  // that did not answer by name, one that answered an error with its
  // subtree's error (which names the member; a child whose ring differs
  // refuses, naming both rings); a member not in the peer list fails at
  // once (kInvalidArgument, before any request). Blocks until every child
  // answered.
  Result<SubtreeSum> CommitChildren(const wire::CommitStepRequest& req, const CommitTree& tree);
  // Asks origin, then each of its holders, to upload origin's part of
  // (ns, step) to the durable tier with its part record. Returns the node
  // that did it; the error names every node tried.
  Result<std::string> PersistPartElsewhere(std::string_view origin, std::string_view ns, uint64_t step);
  // origin's part manifest of (ns, step), from origin or else its holders.
  Result<Manifest> PartManifest(std::string_view origin, std::string_view ns, uint64_t step);
  // Restores origin's part of (ns, step) into tier (a ReplicaTiers tier),
  // from origin or else its holders, verifying every object.
  Status FetchPart(MemoryTier* tier, std::string_view origin, std::string_view ns, uint64_t step);

 private:
  Replicator(peer::Transport* transport, cluster::Membership membership, cluster::Placement placement,
             std::string node_id, std::vector<std::string> holders, peer::Millis timeout)
      : transport_(transport),
        membership_(std::move(membership)),
        ring_id_(RingIdOf(membership_)),
        placement_(std::move(placement)),
        node_id_(std::move(node_id)),
        holders_(std::move(holders)),
        timeout_(timeout) {}
  Status AskToHold(const std::string& holder, std::string_view ns, uint64_t step);
  // origin's data on node `on`; nullptr if `on` is not a member.
  std::unique_ptr<PeerObjectStore> StoreOn(const std::string& on, std::string_view origin) const;
  // origin first, then its holders (this node among them only with include_self).
  std::vector<std::string> SourcesOf(std::string_view origin, bool include_self) const;
  // This node's data on holder, as a read-only store; nullptr if holder is not a member.
  std::unique_ptr<PeerObjectStore> HolderStore(const std::string& holder) const;

  peer::Transport* const transport_;
  const cluster::Membership membership_;
  const RingId ring_id_;  // of membership_, sent with every kCommitRingSubtree
  const cluster::Placement placement_;
  const std::string node_id_;
  const std::vector<std::string> holders_;
  const peer::Millis timeout_;
  mutable Mutex health_mu_;
  std::map<std::string, bool> health_ GUARDED_BY(health_mu_);
  mutable Mutex moved_mu_;
  std::map<std::string, std::string, std::less<>> moved_ GUARDED_BY(moved_mu_);  // node id → address
};

}  // namespace tierckpt::agent
