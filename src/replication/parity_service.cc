// parity_service.cc — PeerService's answers to kFoldParity (peer_service.h,
// decision 126): who may ask, which piece of which group, and the pull of the
// caller's part into the ParityHolder; and to kDropParity (decision 131):
// only a data member of a group drops that group's parity; and to
// kGetParityRecord and kGetParityPiece (decision 138): a sealed group's record
// and pieces, for a node rebuilding its part.
#include <algorithm>
#include <chrono>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "replication/peer_part_source.h"
#include "replication/peer_service.h"
#include "replication/peer_store.h"

namespace tierckpt::agent {
namespace {

double NsToMs(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

Result<peer::ParityFolded> PeerService::FoldParity(const std::string& origin, std::string_view payload) {
  TC_ASSIGN_OR_RETURN(peer::FoldParityRequest r, peer::FoldParityRequest::Decode(payload));
  if (r.wait_ms > peer::kMaxParityWaitMs) {
    return ProtocolError("FoldParity from node " + origin + ": wait_ms " + std::to_string(r.wait_ms) +
                         " is above the limit " + std::to_string(peer::kMaxParityWaitMs));
  }
  TC_RETURN_IF_ERROR(ValidateNamespace(r.ns));
  TC_RETURN_IF_ERROR(ValidateStep(r.step));
  const std::string what = "folding data piece " + std::to_string(r.index) + " of parity group " +
                           std::to_string(r.group) + " of " + r.ns + " step " + std::to_string(r.step) +
                           " from node " + origin + " on node " + deps_.node_id;
  if (deps_.parity == nullptr || deps_.parity_layout == nullptr) {
    return FailedPrecondition(what + ": this agent keeps no parity (it runs without --redundancy rs:K+M); give "
                              "every agent the same --redundancy");
  }
  const cluster::ParityLayout& layout = *deps_.parity_layout;
  if (r.k != layout.k || r.m != layout.m) {
    return InvalidArgument(what + ": the request is rs:" + std::to_string(r.k) + "+" + std::to_string(r.m) +
                           ", this agent's layout rs:" + std::to_string(layout.k) + "+" +
                           std::to_string(layout.m) + "; give every agent the same --redundancy");
  }
  const cluster::ParityGroup* group = layout.GroupOf(origin);
  if (group == nullptr || group->index != r.group || r.index >= group->data.size() ||
      group->data[r.index] != origin) {
    std::string mine = "no group";
    if (group != nullptr) {
      const auto at = std::find(group->data.begin(), group->data.end(), origin) - group->data.begin();
      mine = "data piece " + std::to_string(at) + " of group " + std::to_string(group->index);
    }
    return InvalidArgument(what + ": this agent's layout gives node " + origin + " " + mine +
                           "; give every agent the same peer list and --redundancy");
  }
  ParityFoldTarget target;
  target.ns = r.ns;
  target.step = r.step;
  target.group = r.group;
  target.k = layout.k;
  target.m = layout.m;
  target.members = static_cast<uint32_t>(group->data.size());
  target.index = r.index;
  for (uint32_t j = 0; j < group->parity.size(); ++j) {
    if (group->parity[j] == deps_.node_id) target.held.push_back(j);
  }
  if (target.held.empty()) {
    return InvalidArgument(what + ": this agent's layout has it hold no parity piece of group " +
                           std::to_string(r.group) + "; give every agent the same peer list and --redundancy");
  }
  std::optional<std::string> address = deps_.address_of(origin);
  if (!address) {
    return FailedPrecondition(what + ": node " + origin + " is not in this agent's peer list (--peers)");
  }
  PeerObjectStore from(deps_.transport, PeerStoreTarget{origin, *address, origin}, deps_.timeout);
  const auto t0 = std::chrono::steady_clock::now();
  Result<Manifest> part = from.ReadManifest(r.ns, r.step);
  if (!part.ok()) return part.status().WithContext(what);
  if (part->node != origin) {
    return InvalidArgument(what + ": its part names node " + QuoteForMessage(part->node) + " as its writer");
  }
  PeerPartSource source(&from, *part, &fold_buffers_);
  ec::FoldTimings timings;
  Result<ParityFoldState> state = deps_.parity->Fold(target, *part, source, &timings);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!state.ok()) {
    Log(LogLevel::kWarn, "parity_fold_failed")
        .Kv("origin", origin)
        .Kv("ns", r.ns)
        .Kv("step", r.step)
        .Kv("group", r.group)
        .Err(state.status());
    return state.status().WithContext("on node " + deps_.node_id);
  }
  Log(LogLevel::kInfo, "parity_folded")
      .Kv("origin", origin)
      .Kv("ns", r.ns)
      .Kv("step", r.step)
      .Kv("group", r.group)
      .Kv("folded", static_cast<uint64_t>(state->folded))
      .Kv("ms", ms)
      // Where the fold's time went (summed over its chunks): the claim (the
      // pieces grown for the group's first part), the pull from the member,
      // the check of its checksums, the wait for the group's other folds'
      // updates, the GF update; the rest is the manifest's round trip and,
      // for the fold that completes the group, the seal (parity_sealed ms).
      .Kv("claim_ms", NsToMs(timings.claim_ns))
      .Kv("read_ms", NsToMs(timings.read_ns))
      .Kv("hash_ms", NsToMs(timings.hash_ns))
      .Kv("wait_ms", NsToMs(timings.lock_wait_ns))
      .Kv("update_ms", NsToMs(timings.update_ns));
  if (!state->sealed && r.wait_ms > 0) {
    *state = deps_.parity->WaitSealed(r.ns, r.step, r.group,
                                      std::chrono::steady_clock::now() + std::chrono::milliseconds(r.wait_ms));
  }
  return peer::ParityFolded{state->folded, state->members, state->sealed};
}

Result<bool> PeerService::DropParity(const std::string& origin, const PeerRequest& r) {
  if (deps_.parity == nullptr || deps_.parity_layout == nullptr) return false;  // keeps no parity: held none
  const std::string what = "dropping the parity of " + r.ns + " step " + std::to_string(r.step) +
                           " for node " + origin + " on node " + deps_.node_id;
  // Scoped to the caller's own group, as DropReplica is to the caller's own
  // copy: a peer that is no data member of a group whose pieces this node
  // holds cannot drop them (the pieces protect the other members' parts).
  const cluster::ParityGroup* group = deps_.parity_layout->GroupOf(origin);
  const bool holds =
      group != nullptr && std::find(group->parity.begin(), group->parity.end(), deps_.node_id) != group->parity.end();
  if (!holds) {
    return PermissionDenied(what + ": this agent's layout makes node " + origin +
                            " a data member of no group whose parity this node holds; only a group's data "
                            "members may drop its parity (give every agent the same peer list and --redundancy)");
  }
  Result<bool> dropped = deps_.parity->DropGroup(r.ns, r.step, group->index);
  if (!dropped.ok()) return dropped.status().WithContext(what);
  Log(LogLevel::kInfo, "parity_deleted")
      .Kv("by", origin)
      .Kv("ns", r.ns)
      .Kv("step", r.step)
      .Kv("group", group->index)
      .Kv("held", *dropped);
  return *dropped;
}

bool PeerService::AnswerParityRead(peer::Connection* conn, const peer::Frame& request) {
  const auto type = static_cast<PeerMsg>(request.type);
  auto fail = [&](const Status& s) {
    peer::Frame f;
    f.type = static_cast<uint16_t>(PeerMsg::kError);
    f.request_id = request.request_id;
    f.payload = EncodePeerError(s);
    Status sent = conn->Send(f);
    if (!sent.ok()) Log(LogLevel::kWarn, "peer_reply_failed").Kv("peer", conn->Describe()).Err(sent);
    return sent.ok();
  };
  Result<peer::GetParityRequest> r = peer::GetParityRequest::Decode(request.payload);
  if (!r.ok()) {
    Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Err(r.status());
    return false;
  }
  Status valid = ValidateNamespace(r->ns);
  if (valid.ok()) valid = ValidateStep(r->step);
  if (!valid.ok()) return fail(valid);
  const bool record_only = type == PeerMsg::kGetParityRecord;
  const std::string what =
      std::string(record_only ? "the parity record" : "parity piece " + std::to_string(r->piece)) +
      " of group " + std::to_string(r->group) + " of " + r->ns + " step " + std::to_string(r->step) +
      " asked by node " + conn->peer().node_id + " of node " + deps_.node_id;
  if (deps_.parity == nullptr || deps_.parity_layout == nullptr) {
    return fail(FailedPrecondition(what +
                                   ": this agent keeps no parity (it runs without --redundancy rs:K+M); "
                                   "give every agent the same --redundancy"));
  }
  if (record_only) {
    Result<ec::ParityRecord> record = deps_.parity->Record(r->ns, r->step, r->group);
    if (!record.ok()) return fail(record.status().WithContext(what));
    peer::Frame f;
    f.type = static_cast<uint16_t>(PeerMsg::kParityRecord);
    f.request_id = request.request_id;
    f.payload = record->ToJson();
    Status sent = conn->Send(f);
    if (!sent.ok()) Log(LogLevel::kWarn, "peer_reply_failed").Kv("peer", conn->Describe()).Err(sent);
    return sent.ok();
  }
  Result<ParityHolder::HeldPiece> piece = deps_.parity->ReadPiece(r->ns, r->step, r->group, r->piece);
  if (!piece.ok()) return fail(piece.status().WithContext(what));
  peer::StreamHeader h;
  h.type = static_cast<uint16_t>(PeerMsg::kObject);
  h.request_id = request.request_id;
  h.object_id = request.request_id;
  h.size = piece->bytes.size();
  h.metadata = "parity_" + std::to_string(r->piece);
  // The record's checksum goes out as the stream's: the receiver hashes what
  // lands against it, so a piece damaged at rest fails there, by name.
  Result<Checksum> known = Checksum::Parse(piece->checksum);
  Status sent = known.ok() ? conn->SendStreamKnown(h, piece->bytes.data(), piece->bytes.size(), *known)
                           : conn->SendStream(h, piece->bytes.data(), piece->bytes.size());
  if (sent.ok()) {
    Log(LogLevel::kInfo, "parity_piece_sent")
        .Kv("to", conn->peer().node_id)
        .Kv("ns", r->ns)
        .Kv("step", r->step)
        .Kv("group", r->group)
        .Kv("piece", r->piece);
    return true;
  }
  Log(LogLevel::kWarn, "peer_send_failed").Kv("peer", conn->Describe()).Kv("what", what).Err(sent);
  return sent.code() != Code::kUnavailable && sent.code() != Code::kTimeout && sent.code() != Code::kIoError;
}

}  // namespace tierckpt::agent
