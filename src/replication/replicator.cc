// replicator.cc — see replicator.h.
#include "replication/replicator.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "cluster/address.h"
#include "common/log.h"
#include "os/parallel.h"
#include "replication/peer_messages.h"
#include "wire/protocol.h"

namespace tierckpt::agent {
namespace {

// ask(node) for every node at once, one thread each; the results in nodes' order.
template <typename Ask>
auto AskEach(const std::vector<std::string>& nodes, Ask ask) {
  using R = decltype(ask(std::string()));
  std::vector<std::optional<R>> slots(nodes.size());
  const int threads = static_cast<int>(std::min<size_t>(nodes.size(), std::numeric_limits<int>::max()));
  (void)ParallelFor(nodes.size(), threads, [&](size_t i) {
    slots[i].emplace(ask(nodes[i]));
    return Status::Ok();  // each answer, failed or not, is in its slot
  });
  std::vector<R> out;
  for (auto& r : slots) out.push_back(std::move(*r));
  return out;
}

}  // namespace

Result<ReplicaAck> ParseReplicaAck(std::string_view text) {
  if (text == "none") return ReplicaAck::kNone;
  if (text == "all") return ReplicaAck::kAll;
  return InvalidArgument("--replica-ack " + std::string(text) +
                         ": use \"all\" (commit waits for every replica) or \"none\" (replicate after commit)");
}

std::string_view ReplicaAckName(ReplicaAck ack) { return ack == ReplicaAck::kAll ? "all" : "none"; }

Result<std::unique_ptr<Replicator>> Replicator::Create(peer::Transport* transport, cluster::Membership membership,
                                                       cluster::PlacementPolicy policy, std::string node_id,
                                                       peer::Millis timeout) {
  if (!membership.Contains(node_id)) {
    return InvalidArgument("this agent's node id " + node_id + " is not in the peer list (" +
                           membership.Describe() + "); add it to the hostfile or fix --node-id");
  }
  TC_ASSIGN_OR_RETURN(cluster::Placement placement, cluster::PlacePrimary(membership, policy));
  std::vector<std::string> holders = placement.HoldersOf(node_id);
  if (!holders.empty()) holders.erase(holders.begin());  // the primary: this node
  return std::unique_ptr<Replicator>(new Replicator(transport, std::move(membership), std::move(placement),
                                                    std::move(node_id), std::move(holders), timeout));
}

std::optional<std::string> Replicator::AddressOf(std::string_view node_id) const {
  const cluster::Member* m = membership_.Find(node_id);
  if (m == nullptr) return std::nullopt;
  {
    MutexLock lock(&moved_mu_);
    if (auto it = moved_.find(node_id); it != moved_.end()) return it->second;
  }
  return m->address;
}

Status Replicator::MoveNode(std::string_view node_id, std::string_view address) {
  if (!membership_.Contains(node_id)) {
    return NotFound("node " + std::string(node_id) + " is not in this agent's ring (" + membership_.Describe() +
                    "); a new node joins when the agents restart");
  }
  TC_ASSIGN_OR_RETURN(cluster::PeerAddress parsed, cluster::ParseAddress(address));
  MutexLock lock(&moved_mu_);
  moved_[std::string(node_id)] = parsed.ToString();
  return Status::Ok();
}

std::map<std::string, std::string> Replicator::Addresses() const {
  std::map<std::string, std::string> out;
  for (const cluster::Member& m : membership_.members()) out[m.node_id] = m.address;
  MutexLock lock(&moved_mu_);
  for (const auto& [id, address] : moved_) out[id] = address;
  return out;
}

std::unique_ptr<PeerObjectStore> Replicator::HolderStore(const std::string& holder) const {
  std::optional<std::string> address = AddressOf(holder);
  if (!address) return nullptr;
  return std::make_unique<PeerObjectStore>(transport_, PeerStoreTarget{holder, *address, node_id_}, timeout_);
}

Result<std::string> Replicator::Call(const std::string& node, PeerMsg type, std::string payload, PeerMsg want,
                                     peer::Millis reply_timeout, bool* answered_error) {
  std::optional<std::string> address = AddressOf(node);
  if (!address) return NotFound("node " + node + " is not in the peer list (--peers); add it to every agent's hostfile");
  Result<std::unique_ptr<peer::Connection>> connected = transport_->Connect(*address, timeout_, node);
  {
    MutexLock lock(&health_mu_);
    health_[node] = connected.ok();
  }
  if (!connected.ok()) return connected.status();
  std::unique_ptr<peer::Connection> conn = std::move(connected).value();
  peer::Frame f;
  f.type = static_cast<uint16_t>(type);
  f.request_id = 1;
  f.payload = std::move(payload);
  TC_RETURN_IF_ERROR(conn->Send(f));
  Result<peer::Message> m = conn->Receive(reply_timeout);
  if (!m.ok()) {
    MutexLock lock(&health_mu_);
    health_[node] = false;
    return m.status();
  }
  if (m->kind != peer::Message::Kind::kControl) return ProtocolError(conn->Describe() + " answered with a stream");
  if (m->frame.type == static_cast<uint16_t>(PeerMsg::kError)) {
    if (answered_error != nullptr) *answered_error = true;
    return DecodePeerError(m->frame.payload);
  }
  if (m->frame.type != static_cast<uint16_t>(want)) {
    return ProtocolError(conn->Describe() + " answered " + std::string(PeerMsgName(static_cast<uint16_t>(type))) +
                         " with " + std::string(PeerMsgName(m->frame.type)));
  }
  return std::move(m->frame.payload);
}

Status Replicator::AskToHold(const std::string& holder, std::string_view ns, uint64_t step) {
  // The holder pulls the whole step before it answers: allow a generous wait
  // (its reads of our objects each have their own progress timeout).
  return Call(holder, PeerMsg::kReplicate, EncodePeerRequest(PeerMsg::kReplicate, {"", std::string(ns), step, ""}),
              PeerMsg::kDone, peer::Millis(3600 * 1000))
      .status();
}

Status Replicator::Replicate(std::string_view ns, uint64_t step) {
  if (holders_.empty()) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> results = AskEach(holders_, [&](const std::string& h) { return AskToHold(h, ns, step); });
  std::string failed;
  Code code = Code::kOk;
  for (size_t i = 0; i < holders_.size(); ++i) {
    if (results[i].ok()) continue;
    if (code == Code::kOk) code = results[i].code();
    failed += (failed.empty() ? "" : "; ") + holders_[i] + ": " + results[i].ToString();
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!failed.empty()) {
    Log(LogLevel::kWarn, "replication_failed").Kv("ns", ns).Kv("step", step).Kv("error", failed);
    return Status(code == Code::kNotFound ? Code::kUnavailable : code,
                  "replicating " + std::string(ns) + " step " + std::to_string(step) + " of node " + node_id_ +
                      " failed on " + failed + "; the step is committed in this node's memory, but a loss of "
                      "this node before it is replicated or persisted loses it");
  }
  Log(LogLevel::kInfo, "replicated")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("holders", static_cast<uint64_t>(holders_.size()))
      .Kv("ms", ms);
  return Status::Ok();
}

Result<std::vector<std::string>> Replicator::DropReplicas(std::string_view ns, uint64_t step) {
  const std::string request = EncodePeerRequest(PeerMsg::kDropReplica, {"", std::string(ns), step, ""});
  std::vector<Result<std::string>> results = AskEach(
      holders_, [&](const std::string& h) { return Call(h, PeerMsg::kDropReplica, request, PeerMsg::kDone, timeout_); });
  std::vector<std::string> dropped;
  std::string failed;
  for (size_t i = 0; i < holders_.size(); ++i) {
    if (!results[i].ok()) {
      failed += (failed.empty() ? "" : "; ") + holders_[i] + ": " + results[i].status().ToString();
      continue;
    }
    Result<DropReplicaAnswer> answer = DropReplicaAnswer::Decode(*results[i]);
    if (!answer.ok()) {
      failed += (failed.empty() ? "" : "; ") + holders_[i] + ": a malformed DropReplica answer";
      continue;
    }
    if (answer->held != 0) dropped.push_back(holders_[i]);
  }
  if (!failed.empty()) {
    Log(LogLevel::kWarn, "replica_delete_failed").Kv("ns", ns).Kv("step", step).Kv("error", failed);
    return Unavailable("the replicas of " + std::string(ns) + " step " + std::to_string(step) + " of node " + node_id_ +
                       " could not all be deleted (" + failed +
                       "); those copies remain and a replacement node could restore them: run the delete again "
                       "once the holder is back");
  }
  return dropped;
}

Result<std::string> Replicator::RestoreFromPeers(MemoryTier* tier, std::string_view ns, uint64_t step) {
  std::string tried;
  for (const std::string& holder : holders_) {
    std::unique_ptr<PeerObjectStore> from = HolderStore(holder);
    if (from == nullptr) continue;
    Status s = tier->Restore(*from, ns, step);
    if (s.ok()) {
      Log(LogLevel::kInfo, "restored_from_peer").Kv("ns", ns).Kv("step", step).Kv("peer", holder);
      return holder;
    }
    Log(LogLevel::kInfo, "peer_restore_skipped").Kv("ns", ns).Kv("step", step).Kv("peer", holder).Err(s);
    tried += (tried.empty() ? "" : "; ") + holder + ": " + s.ToString();
  }
  return NotFound("no replica holder of node " + node_id_ + " has " + std::string(ns) + " step " +
                  std::to_string(step) + (tried.empty() ? std::string(" (no holders: --replicas 1)") : " (" + tried + ")"));
}

std::map<uint64_t, std::string> Replicator::StepsOnPeers(std::string_view ns) {
  std::map<uint64_t, std::string> out;
  for (const std::string& holder : holders_) {
    std::unique_ptr<PeerObjectStore> from = HolderStore(holder);
    if (from == nullptr) continue;
    Result<std::vector<uint64_t>> steps = from->ListCommittedSteps(ns);
    if (!steps.ok()) {
      Log(LogLevel::kDebug, "peer_list_failed").Kv("ns", ns).Kv("peer", holder).Err(steps.status());
      continue;
    }
    for (uint64_t s : *steps) out.emplace(s, holder);
  }
  return out;
}

Result<Manifest> Replicator::ManifestFromPeers(std::string_view ns, uint64_t step) {
  std::string tried;
  for (const std::string& holder : holders_) {
    std::unique_ptr<PeerObjectStore> from = HolderStore(holder);
    if (from == nullptr) continue;
    Result<Manifest> m = from->ReadManifest(ns, step);
    if (m.ok()) return m;
    tried += (tried.empty() ? "" : "; ") + holder + ": " + m.status().ToString();
  }
  return NotFound("no replica holder of node " + node_id_ + " has " + std::string(ns) + " step " +
                  std::to_string(step) + (tried.empty() ? std::string() : " (" + tried + ")"));
}

std::map<std::string, bool> Replicator::PeerHealth() const {
  MutexLock lock(&health_mu_);
  return health_;
}

// ---- Steps spanning nodes ----

std::vector<std::string> Replicator::HoldersOf(std::string_view node) const {
  std::vector<std::string> holders = placement_.HoldersOf(node);
  if (!holders.empty() && holders.front() == node) holders.erase(holders.begin());
  return holders;
}

std::vector<std::string> Replicator::SourcesOf(std::string_view origin, bool include_self) const {
  std::vector<std::string> out{std::string(origin)};
  for (std::string& h : HoldersOf(origin)) {
    if (include_self || h != node_id_) out.push_back(std::move(h));
  }
  return out;
}

std::unique_ptr<PeerObjectStore> Replicator::StoreOn(const std::string& on, std::string_view origin) const {
  std::optional<std::string> address = AddressOf(on);
  if (!address) return nullptr;
  return std::make_unique<PeerObjectStore>(transport_, PeerStoreTarget{on, *address, std::string(origin)}, timeout_);
}

Result<SubtreeSum> Replicator::CommitChildren(const wire::CommitStepRequest& req, const CommitTree& tree) {
  const std::vector<std::string> children = tree.ChildrenOf(node_id_);
  SubtreeSum sum;
  if (children.empty()) return sum;
  // The members as runs of ring places (decision 108): the request's size
  // does not grow with N. Every receiver expands them with its own ring.
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> runs, MemberRuns(membership_, req.members));
  wire::CommitStepRequest without_members = req;
  without_members.members.clear();
  peer::CommitRingSubtreeRequest request;
  request.fan_out = tree.fan_out();
  request.root = tree.root();
  request.ring_size = ring_id_.size;
  request.ring_digest = ring_id_.digest;
  request.member_runs = std::move(runs);
  request.commit = without_members.Encode();
  const std::string payload = request.Encode();
  struct Reply {
    Result<std::string> payload{Internal("not run")};
    bool answered_error = false;
  };
  std::vector<Reply> replies(children.size());
  // One thread per child (at most the fan-out); a child answers once its
  // subtree committed, each part replicated first (--replica-ack all): as
  // long a wait as Replicate.
  (void)ParallelFor(children.size(), static_cast<int>(children.size()), [&](size_t i) {
    replies[i].payload = Call(children[i], PeerMsg::kCommitRingSubtree, payload, PeerMsg::kSubtreeCommitted,
                              peer::Millis(3600 * 1000), &replies[i].answered_error);
    return Status::Ok();  // every child is asked; the replies are judged below
  });
  std::string failed;
  Code code = Code::kOk;
  for (size_t i = 0; i < children.size(); ++i) {
    Result<SubtreeSum> child = replies[i].payload.ok() ? SubtreeSum::Decode(*replies[i].payload)
                                                       : Result<SubtreeSum>(replies[i].payload.status());
    if (child.ok()) {
      AddChild(&sum, *child);
      continue;
    }
    if (code == Code::kOk) code = child.status().code();
    // A child's own error names the member of its subtree that failed; a
    // child that did not answer is named here.
    std::string why = replies[i].answered_error
                          ? child.status().message()
                          : "node " + children[i] + " (asked by " + node_id_ + ") did not answer: " +
                                child.status().ToString() +
                                (child.status().code() == Code::kUnavailable
                                     ? " (an agent of an older version closes the connection on a "
                                       "commit request it does not know, too: run one tierckptd "
                                       "version on every node)"
                                     : "");
    failed += (failed.empty() ? "" : "; ") + why;
  }
  if (!failed.empty()) return Status(code, failed);
  return sum;
}

Result<std::string> Replicator::PersistPartElsewhere(std::string_view origin, std::string_view ns, uint64_t step) {
  std::string tried;
  // This node too when it holds origin's replica: through its own peer
  // service, which uploads from the replica tier like any holder.
  for (const std::string& node : SourcesOf(origin, /*include_self=*/true)) {
    Result<std::string> r =
        Call(node, PeerMsg::kPersistPart, EncodePeerRequest(PeerMsg::kPersistPart, {std::string(origin), std::string(ns), step, ""}),
             PeerMsg::kDone, peer::Millis(3600 * 1000));
    if (r.ok()) return node;
    Log(LogLevel::kInfo, "persist_part_skipped").Kv("ns", ns).Kv("step", step).Kv("origin", origin).Kv("peer", node).Err(r.status());
    tried += (tried.empty() ? "" : "; ") + node + ": " + r.status().ToString();
  }
  return Unavailable("no node could upload the part of node " + std::string(origin) + " of " + StepLabel(ns, step) +
                     " (" + (tried.empty() ? std::string("no holder of it but this node") : tried) + ")");
}

Result<Manifest> Replicator::PartManifest(std::string_view origin, std::string_view ns, uint64_t step) {
  std::string tried;
  for (const std::string& node : SourcesOf(origin, /*include_self=*/false)) {
    std::unique_ptr<PeerObjectStore> from = StoreOn(node, origin);
    if (from == nullptr) continue;
    Result<Manifest> m = from->ReadManifest(ns, step);
    if (m.ok()) return m;
    tried += (tried.empty() ? "" : "; ") + node + ": " + m.status().ToString();
  }
  return NotFound("neither node " + std::string(origin) + " nor a holder of its replicas has its part of " +
                  StepLabel(ns, step) + " (" + tried + ")");
}

Status Replicator::FetchPart(MemoryTier* tier, std::string_view origin, std::string_view ns, uint64_t step) {
  std::string tried;
  for (const std::string& node : SourcesOf(origin, /*include_self=*/false)) {
    std::unique_ptr<PeerObjectStore> from = StoreOn(node, origin);
    if (from == nullptr) continue;
    Status s = tier->Restore(*from, ns, step);
    if (s.ok()) {
      Log(LogLevel::kInfo, "part_fetched").Kv("ns", ns).Kv("step", step).Kv("origin", origin).Kv("peer", node);
      return s;
    }
    tried += (tried.empty() ? "" : "; ") + node + ": " + s.ToString();
  }
  return NotFound("neither node " + std::string(origin) + " nor a holder of its replicas could serve its part of " +
                  StepLabel(ns, step) + " (" + tried + ")");
}

}  // namespace tierckpt::agent
