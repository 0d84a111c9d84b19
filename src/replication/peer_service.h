// peer_service.h — the agent's side of the peer protocol as a server: it
// accepts authenticated connections from other agents (peer/transport.h) and
// answers the requests of peer_messages.h, one thread per connection.
//
//   GetManifest / ListSteps / GetObject  read the agent's own tier (origin =
//       its node id) or the replicas it holds for the origin (ReplicaTiers);
//       objects are streamed from a read-only mapping of the committed file.
//   Replicate {ns, step}  the caller (an origin, by its authenticated node
//       id) asks this agent to hold a replica of its committed step: the
//       service pulls the step from the caller (PeerObjectStore at the
//       caller's address from address_of) into the caller's replica tier with
//       MemoryTier::Restore (every object verified, published last: a replica
//       is visible only when whole) and answers kDone or the error.
//   CommitSubtree {fan-out, root, CommitStep request}  this node's parent in
//       the commit tree of a step spanning nodes (commit_tree.h; the
//       coordinator's agent or an interior member, checked against the
//       caller's authenticated node id) asks it to commit its subtree:
//       commit_children (its children, in parallel) while commit_part
//       commits its own part; answered with the subtree's sums once all of
//       it committed, or with every failure, each naming its member.
//   CommitRingSubtree {fan-out, root, ring, member runs, CommitStep request}
//       the same with the members as runs of positions in the agents'
//       common ring (member_runs.h, decision 108), what agents send since:
//       refused, naming both rings, when the caller's ring is not this
//       agent's (deps.ring); then expanded and committed as CommitSubtree.
//   CommitPart {CommitStep request}  a coordinator from before the commit
//       tree asks this agent to commit its part: commit_part, answered with
//       the part manifest.
//   PersistPart {origin, ns, step}  upload origin's part to the durable tier
//       with its part record (persist_part): this node's own part, or the
//       replica it holds for an origin that cannot (docs/multinode.md).
//   DropReplica {ns, step}  the caller (an origin) deleted its step: this
//       agent deletes its replica of it, answering whether it held one.
//   FoldParity / DropParity  the erasure-coded tier's member requests
//       (parity_service.cc, decisions 126 and 131).
//   GetParityRecord / GetParityPiece {ns, step, group, piece}  a sealed
//       group's record, or one parity piece this agent holds streamed whole,
//       for a node rebuilding its part from its group's survivors
//       (parity_service.cc, decision 138).
//
// Caps: with deps.replicate_rate, the objects of this agent's own tier are
// streamed chunk by chunk, each chunk paid for first (RateLimiter::Acquire,
// shared by every connection): the pulls of replica holders, and other
// members' reads of this node's parts of steps spanning nodes. Replicas this
// agent holds for others go back uncapped (a restore waits on them).
//
// A request for a step this agent does not hold is kNotFound. A malformed
// request closes that connection (logged); others are unaffected.
// Thread-safe; Stop() closes the listener and every connection and joins.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/rate_limiter.h"
#include "ops/metrics.h"
#include "peer/transport.h"
#include "replication/commit_tree.h"
#include "cluster/parity_groups.h"
#include "common/buffer_cache.h"
#include "replication/member_runs.h"
#include "replication/parity_holder.h"
#include "replication/peer_messages.h"
#include "replication/replica_tiers.h"
#include "tier/memory_tier.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

struct PeerServiceDeps {
  std::string node_id;          // this agent's
  peer::Transport* transport;   // for listening and for pulling replicas
  MemoryTier* tier;             // the agent's own tier
  ReplicaTiers* replicas;       // the replicas it holds
  Metrics* metrics;             // where replicas pulled are counted (the agent's)
  // The peer address of a node (the hostfile's); nullopt when unknown.
  std::function<std::optional<std::string>(std::string_view node_id)> address_of;
  peer::Millis timeout{30000};  // per request to a peer when pulling
  // Caps the bytes per second of this agent's own objects streamed to peers
  // (--replicate-rate); null or unlimited: no cap. Must outlive the service.
  RateLimiter* replicate_rate = nullptr;
  // This node's part of a step spanning nodes whose coordinator is the
  // second argument (replication/commit.h CommitOnNode).
  std::function<Result<Manifest>(const wire::CommitStepRequest&, const std::string&)> commit_part;
  // This node's children's subtrees of a commit tree
  // (Replicator::CommitChildren).
  std::function<Result<SubtreeSum>(const wire::CommitStepRequest&, const CommitTree&)> commit_children;
  // The agents' common ring (Replicator::membership()), which the member
  // runs of kCommitRingSubtree refer to; must outlive the service. nullptr:
  // such requests are refused (this agent has no peers).
  const cluster::Membership* ring = nullptr;
  // Uploads origin's part of (ns, step) from tier with its part record;
  // nullptr without a durable tier.
  std::function<Status(MemoryTier* tier, const std::string& ns, uint64_t step)> persist_part;
  // The erasure-coded tier (issue 23): the parity pieces this agent holds and
  // the groups of the cluster's rs:K+M layout (cluster/parity_groups.h); both
  // must outlive the service. nullptr: FoldParity is refused (this agent
  // keeps no parity), DropParity answers that it held none.
  ParityHolder* parity = nullptr;
  const cluster::ParityLayout* parity_layout = nullptr;
};

class PeerService {
 public:
  explicit PeerService(PeerServiceDeps deps);
  ~PeerService();  // Stop()
  PeerService(const PeerService&) = delete;
  PeerService& operator=(const PeerService&) = delete;

  // Listens at address and starts accepting. Errors name the address.
  Status Start(const std::string& address);
  // Starts accepting on a listener made earlier (--peers dns: listens before
  // it knows its peers, so that they can learn its node id; agent.cc).
  // Connections it queued meanwhile are served.
  void Start(std::unique_ptr<peer::Listener> listener);
  // The bound address (port 0 resolved).
  std::string address() const;
  void Stop();

 private:
  void AcceptLoop();
  void Serve(peer::Connection* conn);
  // Answers one control request; false when the connection must close.
  bool Answer(peer::Connection* conn, const peer::Frame& request);
  Result<MemoryTier*> TierOf(std::string_view origin);
  // Streams the object; with `rate`, chunk by chunk, each paid for first.
  Status SendObject(peer::Connection* conn, uint32_t request_id, const std::string& name,
                    const PinnedObject& object, RateLimiter* rate);
  Status SendPaced(peer::Connection* conn, const peer::StreamHeader& h, const PinnedObject& object,
                   const Result<Checksum>& known, RateLimiter* rate);
  Status PullReplica(const std::string& origin, const PeerRequest& r);
  Result<Manifest> CommitPart(const std::string& coordinator, std::string_view payload);
  // by: the node that asked; coordinator: the step's (the tree's root).
  Result<Manifest> CommitOwnPart(const std::string& by, const std::string& coordinator,
                                 const wire::CommitStepRequest& req);
  // kCommitSubtree (the members listed) and kCommitRingSubtree (the members
  // as ring runs): both decode into CommitTreeOf.
  Result<SubtreeSum> CommitSubtree(const std::string& parent, std::string_view payload);
  Result<SubtreeSum> CommitRingSubtree(const std::string& parent, std::string_view payload);
  // Checks that parent is this node's parent in the tree of (req.members,
  // root, fan_out), then commits this node's subtree.
  Result<SubtreeSum> CommitTreeOf(const std::string& parent, const wire::CommitStepRequest& req,
                                  const std::string& root, uint32_t fan_out, size_t request_bytes);
  Status PersistPart(const PeerRequest& r);
  // kFoldParity from node origin (parity_service.cc).
  Result<peer::ParityFolded> FoldParity(const std::string& origin, std::string_view payload);
  // kDropParity from node origin (parity_service.cc): drops the parity of
  // the group origin is a data member of, nothing else (decision 131);
  // whether any was held.
  Result<bool> DropParity(const std::string& origin, const PeerRequest& r);
  // kGetParityRecord and kGetParityPiece (parity_service.cc): answers or
  // streams; false when the connection must close (a malformed payload, a
  // stream broken mid-way).
  bool AnswerParityRead(peer::Connection* conn, const peer::Frame& request);

  const PeerServiceDeps deps_;
  const RingId ring_id_;  // of deps_.ring (zero without one)
  // The folds' receive buffers (decision 164): up to K folds of a group
  // run at once, each with one buffer as long as its part's largest object;
  // kept idle up to 8 of them and 256 MiB in all.
  BufferCache fold_buffers_{size_t{256} << 20, 8};
  std::unique_ptr<peer::Listener> listener_;
  std::thread acceptor_;

  Mutex mu_;
  bool stopping_ GUARDED_BY(mu_) = false;
  struct Served {
    std::unique_ptr<peer::Connection> conn;
    std::thread thread;
  };
  std::list<Served> served_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
