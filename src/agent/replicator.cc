// replicator.cc — see replicator.h.
#include "agent/replicator.h"

#include <chrono>
#include <thread>

#include "agent/peer_messages.h"
#include "common/log.h"

namespace tierckpt::agent {

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
  return m->address;
}

std::unique_ptr<PeerObjectStore> Replicator::HolderStore(const std::string& holder) const {
  std::optional<std::string> address = AddressOf(holder);
  if (!address) return nullptr;
  return std::make_unique<PeerObjectStore>(transport_, PeerStoreTarget{holder, *address, node_id_}, timeout_);
}

Status Replicator::AskToHold(const std::string& holder, std::string_view ns, uint64_t step) {
  std::optional<std::string> address = AddressOf(holder);
  if (!address) return NotFound("replica holder " + holder + " is not in the peer list");
  TC_ASSIGN_OR_RETURN(std::unique_ptr<peer::Connection> conn, transport_->Connect(*address, timeout_, holder));
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kReplicate);
  f.request_id = 1;
  f.payload = EncodePeerRequest(PeerMsg::kReplicate, {"", std::string(ns), step, ""});
  TC_RETURN_IF_ERROR(conn->Send(f));
  // The holder pulls the whole step before it answers: allow a generous wait
  // (its reads of our objects each have their own progress timeout).
  Result<peer::Message> m = conn->Receive(peer::Millis(3600 * 1000));
  if (!m.ok()) return m.status();
  if (m->kind != peer::Message::Kind::kControl) return ProtocolError(conn->Describe() + " answered with a stream");
  if (m->frame.type == static_cast<uint16_t>(PeerMsg::kError)) return DecodePeerError(m->frame.payload);
  if (m->frame.type != static_cast<uint16_t>(PeerMsg::kDone)) {
    return ProtocolError(conn->Describe() + " answered Replicate with " + std::string(PeerMsgName(m->frame.type)));
  }
  return Status::Ok();
}

Status Replicator::Replicate(std::string_view ns, uint64_t step) {
  if (holders_.empty()) return Status::Ok();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Status> results(holders_.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < holders_.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = AskToHold(holders_[i], ns, step); });
  }
  for (std::thread& t : threads) t.join();
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

Status Replicator::RestoreFromPeers(MemoryTier* tier, std::string_view ns, uint64_t step) {
  std::string tried;
  for (const std::string& holder : holders_) {
    std::unique_ptr<PeerObjectStore> from = HolderStore(holder);
    if (from == nullptr) continue;
    Status s = tier->Restore(*from, ns, step);
    if (s.ok()) {
      Log(LogLevel::kInfo, "restored_from_peer").Kv("ns", ns).Kv("step", step).Kv("peer", holder);
      return s;
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

}  // namespace tierckpt::agent
