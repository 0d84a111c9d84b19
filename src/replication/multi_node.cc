// multi_node.cc — see multi_node.h.
#include "replication/multi_node.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "cluster/placement_json.h"
#include "common/log.h"
#include "replication/parity_restore.h"
#include "tier/part_record.h"
#include "tier/step_state.h"

namespace tierckpt::agent {

std::string MultiNode::PlacementJson() const {
  if (holders().empty()) return "";
  return cluster::PlacementToJsonText(d_.replicator->placement());
}

Status MultiNode::ReplicateCommitted(std::string_view ns, uint64_t step, bool down_tree) {
  // Parity first: queued, so it never waits for the replicas nor they for it.
  if (d_.parity_member != nullptr) d_.parity_member->Committed(ns, step);
  Status replicated = Status::Ok();
  if (!holders().empty()) {
    if (d_.ack == ReplicaAck::kAll) {
      // The step stays committed here either way; the error tells the writer
      // the replicas it asked for are missing (docs/replication.md).
      replicated = d_.replicator->Replicate(ns, step);
    } else {
      Replicator* rep = d_.replicator;
      d_.queue->Submit([rep, ns = std::string(ns), step] { rep->Replicate(ns, step).IgnoreError(); });
    }
  }
  // Decision 146: with --parity-ack all, then the group's seal (sent on the
  // parity queue meanwhile), waited for with no lock held; never down a
  // commit tree, whose coordinator commits its part after this one answers.
  const bool await_parity = d_.parity_member != nullptr && d_.parity_ack == ReplicaAck::kAll && !down_tree;
  Status parity = await_parity ? d_.parity_member->AwaitSent(ns, step) : Status::Ok();
  if (!replicated.ok()) {
    if (!parity.ok()) Log(LogLevel::kWarn, "parity_ack_failed").Kv("ns", ns).Kv("step", step).Err(parity);
    return replicated;
  }
  return parity;
}

Result<SubtreeSum> MultiNode::CommitOtherParts(const wire::CommitStepRequest& req) {
  if (!std::binary_search(req.members.begin(), req.members.end(), d_.node_id)) {
    return InvalidArgument("commit of " + StepLabel(req.ns, req.step) + " names members without this node (" +
                           d_.node_id + "); the coordinator commits through its own node's agent");
  }
  TC_ASSIGN_OR_RETURN(CommitTree tree, CommitTree::Create(req.members, d_.node_id, d_.commit_fan_out));
  Result<SubtreeSum> sum = d_.replicator->CommitChildren(req, tree);
  if (!sum.ok()) {
    Log(LogLevel::kWarn, "commit_parts_failed").Kv("ns", req.ns).Kv("step", req.step).Err(sum.status());
    return Status(sum.status().code(), "committing " + StepLabel(req.ns, req.step) +
                                           " across nodes failed: " + sum.status().message() +
                                           "; the step is not committed on this node (the coordinator's "
                                           "part is committed last), so no reader sees it; save it again");
  }
  return sum;
}

Result<Manifest> MultiNode::CoordinatorPart(const Manifest& own) {
  const std::string& coordinator = own.member_ref->coordinator;
  Result<MemoryTier*> copy = d_.replicas->Get(coordinator, /*create=*/false);
  Result<Manifest> part = copy.ok() && (*copy)->HasCommitted(own.ns, own.step)
                              ? (*copy)->GetManifest(own.ns, own.step)
                              : d_.replicator->PartManifest(coordinator, own.ns, own.step);
  if (!part.ok()) {
    return part.status().WithContext("reading the member list of " + StepLabel(own.ns, own.step) +
                                     " from its coordinator's part (node " + coordinator + ")");
  }
  if (part->members.empty() || DigestMembers(part->members) != DigestOfPart(own)) {
    return Corruption("the part of node " + coordinator + ", the coordinator of " + StepLabel(own.ns, own.step) +
                      ", names " + (part->members.empty() ? std::string("no member list")
                                                           : DescribeMembers(DigestMembers(part->members))) +
                      ", not the " + DescribeMembers(DigestOfPart(own)) + " node " + d_.node_id +
                      "'s part names; they come from different saves of that step number: delete the step "
                      "and save it again");
  }
  return part;
}

Result<PartObject> MultiNode::OpenFromOtherParts(const Manifest& own, const std::string& name) {
  const std::string& ns = own.ns;
  const uint64_t step = own.step;
  // Decision 116: a non-coordinator part names the members by count and
  // digest; the coordinator's part (kept by it and its holders) lists them.
  std::optional<Manifest> coordinator;
  if (own.member_ref) {
    TC_ASSIGN_OR_RETURN(coordinator, CoordinatorPart(own));
  }
  const std::vector<std::string>& members = coordinator ? coordinator->members : own.members;
  for (const std::string& member : members) {
    if (member == d_.node_id) continue;
    Result<MemoryTier*> copy = d_.replicas->Get(member, /*create=*/false);
    bool fetched = false;
    if (!copy.ok() || !(*copy)->HasCommitted(ns, step)) {
      // Only fetch a part that has the object: ask for its manifest first.
      Result<Manifest> part = coordinator && member == coordinator->node
                                  ? Result<Manifest>(*coordinator)
                                  : d_.replicator->PartManifest(member, ns, step);
      if (!part.ok()) {
        Log(LogLevel::kWarn, "part_unreachable")
            .Kv("ns", ns)
            .Kv("step", step)
            .Kv("origin", member)
            .Err(part.status());
        if (d_.parity_member == nullptr) continue;
        // A degraded read (decision 158): the part rebuilt from its group's survivors.
        copy = d_.replicas->Get(member, /*create=*/true);
        if (!copy.ok()) return copy.status();
        Result<std::string> rebuilt = RebuildMemberPart(*copy, member, ns, step, name);
        if (!rebuilt.ok()) {
          if (rebuilt.status().code() != Code::kNotFound) {
            Log(LogLevel::kWarn, "part_not_rebuilt")
                .Kv("ns", ns)
                .Kv("step", step)
                .Kv("origin", member)
                .Err(rebuilt.status());
          }
          continue;
        }
        fetched = true;
      } else {
        if (part->Find(name) == nullptr) continue;
        copy = d_.replicas->Get(member, /*create=*/true);
        if (!copy.ok()) return copy.status();
        TC_RETURN_IF_ERROR(d_.replicator->FetchPart(*copy, member, ns, step));
        fetched = true;
      }
    }
    Result<OpenedObject> opened = (*copy)->OpenObject(ns, step, name);
    if (opened.ok()) return PartObject{std::move(opened).value(), *copy, member, fetched};
    if (opened.status().code() != Code::kNotFound) return opened.status();
  }
  return NotFound("object " + name + " is in no part of " + StepLabel(ns, step) + " that nodes " +
                  JoinIds(members) +
                  (d_.parity_member != nullptr ? " (or the holders of their replicas, or their groups' parity)"
                                               : " (or the holders of their replicas)") +
                  " could serve; `tierckpt ls " + ns + "` shows what exists");
}

Result<std::vector<std::string>> MultiNode::DropReplicas(std::string_view ns, uint64_t step) {
  Result<std::vector<std::string>> dropped = d_.replicator->DropReplicas(ns, step);
  if (d_.parity_member == nullptr) return dropped;
  Status parity = d_.parity_member->Drop(ns, step);
  if (!parity.ok()) {
    Log(LogLevel::kWarn, "parity_delete_failed").Kv("ns", ns).Kv("step", step).Err(parity);
    if (dropped.ok()) return parity;
  }
  return dropped;
}

std::optional<PeerStatsInput> MultiNode::Stats() const {
  PeerStatsInput peers;
  peers.listen = d_.listen ? d_.listen() : "";
  peers.replicas = d_.replica_count;
  peers.replica_ack = std::string(ReplicaAckName(d_.ack));
  peers.holders = d_.replicator->holders();
  for (const std::string& origin : d_.replicas->Origins()) {
    Result<MemoryTier*> t = d_.replicas->Get(origin, /*create=*/false);
    if (!t.ok()) continue;
    PeerStatsInput::Held h;
    h.origin = origin;
    for (const StepInfo& st : (*t)->ListSteps("")) {
      if (!st.committed) continue;
      ++h.steps;
      h.bytes += st.bytes;
    }
    peers.held.push_back(std::move(h));
  }
  if (d_.parity_member != nullptr) {
    peers.parity = d_.parity_member->Stats();
    peers.parity->ack = std::string(ReplicaAckName(d_.parity_ack));
    if (d_.parity_holder != nullptr) peers.parity->held_bytes = d_.parity_holder->used_bytes();
  }
  return peers;
}

void MultiNode::AddGauges(std::vector<Gauge>* out) const {
  auto add = [out](std::string name, std::string help, double value,
                   std::vector<std::pair<std::string, std::string>> labels = {}) {
    out->push_back(Gauge{std::move(name), std::move(help), std::move(labels), value});
  };
  add("tierckpt_replication_queue", "replications queued (--replica-ack none)",
      static_cast<double>(d_.queue->queued() + d_.queue->running()));
  for (const std::string& origin : d_.replicas->Origins()) {
    Result<MemoryTier*> r = d_.replicas->Get(origin, false);
    if (!r.ok()) continue;
    const TierStats rs = (*r)->Stats();
    add("tierckpt_replica_bytes", "bytes of the replicas this node holds, by origin node",
        static_cast<double>(rs.object_bytes), {{"origin", origin}});
  }
  if (d_.parity_holder != nullptr) {
    add("tierckpt_parity_held_bytes", "bytes of the parity pieces this node holds for groups (--redundancy)",
        static_cast<double>(d_.parity_holder->used_bytes()));
  }
  if (d_.parity_member != nullptr) {
    std::map<ParityStepState::Kind, size_t> by_kind;
    for (const ParityStepState& st : d_.parity_member->Stats().steps) ++by_kind[st.kind];
    for (ParityStepState::Kind k : {ParityStepState::Kind::kPending, ParityStepState::Kind::kRedundant,
                                    ParityStepState::Kind::kIncomplete, ParityStepState::Kind::kUnknown}) {
      add("tierckpt_parity_steps", "this node's committed steps by the state of their parity (--redundancy)",
          static_cast<double>(by_kind[k]), {{"state", std::string(ParityStepState::Name(k))}});
    }
  }
  for (const auto& [peer, up] : d_.replicator->PeerHealth()) {
    add("tierckpt_peer_up", "1 if the last request to the peer was answered, 0 if it failed", up ? 1 : 0,
        {{"peer", peer}});
  }
}

Result<std::string> MultiNode::RestoreFromParity(MemoryTier* tier, std::string_view ns, uint64_t step) {
  if (d_.parity_member == nullptr)
    return FailedPrecondition("this agent keeps no parity (no --redundancy rs:K+M)");
  return OneRebuildAtATime({std::string(ns), step}, tier, ns, step, [&] {
    return agent::RestoreFromParity(d_.parity_member->sender(), d_.replicator, tier, ns, step);
  });
}

Result<std::string> MultiNode::OneRebuildAtATime(const std::pair<std::string, uint64_t>& key, MemoryTier* into,
                                                 std::string_view ns, uint64_t step,
                                                 const std::function<Result<std::string>()>& rebuild) {
  {
    MutexLock lock(&parity_mu_);
    while (rebuilding_.count(key) != 0) parity_cv_.Wait();
    rebuilding_.insert(key);
  }
  // Another reader's rebuild may have brought it in while this one waited.
  Result<std::string> out =
      into->HasCommitted(ns, step) ? Result<std::string>(std::string("a concurrent rebuild from parity")) : rebuild();
  MutexLock lock(&parity_mu_);
  rebuilding_.erase(key);
  parity_cv_.SignalAll();
  return out;
}

Status MultiNode::AwaitMembersParity(std::string_view ns, uint64_t step, const std::vector<std::string>& members) {
  if (d_.parity_member == nullptr || d_.parity_ack != ReplicaAck::kAll) return Status::Ok();
  const ParitySender& me = d_.parity_member->sender();
  std::set<uint32_t> others;
  for (const std::string& member : members) {
    const cluster::ParityGroup* g = me.layout().GroupOf(member);
    if (g != nullptr && g->index != me.group().index) others.insert(g->index);
  }
  const auto deadline = std::chrono::steady_clock::now() + d_.parity_member->await_limit();
  auto pause = std::chrono::milliseconds(10);
  for (uint32_t index : others) {
    const cluster::ParityGroup& g = me.layout().groups[index];
    for (;;) {
      std::vector<std::string> lacking = HoldersNotSealed(g, d_.replicator, ns, step);
      if (lacking.empty()) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string answers;
        for (const std::string& a : lacking) answers += (answers.empty() ? "" : "; ") + a;
        Log(LogLevel::kWarn, "parity_ack_timeout").Kv("ns", ns).Kv("step", step).Kv("group", index).Kv("holders", answers);
        return Timeout("the parity of " + StepLabel(ns, step) + " is not sealed for group " + std::to_string(index) +
                       " of its members after " + std::to_string(d_.parity_member->await_limit().count()) +
                       " ms (--parity-ack all): " + answers +
                       "; the step is committed on every member, but those members' parts are not redundant yet");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }
  return Status::Ok();
}

Result<std::string> MultiNode::RebuildPartOf(MemoryTier* copy, std::string_view member, std::string_view ns,
                                             uint64_t step) {
  if (d_.parity_member == nullptr)
    return FailedPrecondition("this agent keeps no parity (no --redundancy rs:K+M)");
  return RebuildMemberPart(copy, std::string(member), ns, step, "");
}

Result<std::string> MultiNode::RebuildMemberPart(MemoryTier* copy, const std::string& member, std::string_view ns,
                                                 uint64_t step, const std::string& name) {
  return OneRebuildAtATime({member + "/" + std::string(ns), step}, copy, ns, step, [&] {
    return RestoreMemberFromParity(d_.parity_member->sender().layout(), member, d_.replicator, copy, ns, step, name);
  });
}

std::string MultiNode::ParityStateOf(std::string_view ns, uint64_t step) const {
  if (d_.parity_member == nullptr) return "";
  Result<ParityStepState> state = d_.parity_member->State(ns, step);
  return state.ok() ? std::string(ParityStepState::Name(state->kind)) : "";
}

Result<Manifest> MultiNode::ManifestFromParity(std::string_view ns, uint64_t step) {
  if (d_.parity_member == nullptr) return NotFound("this agent keeps no parity (no --redundancy rs:K+M)");
  const ParitySender& me = d_.parity_member->sender();
  TC_ASSIGN_OR_RETURN(ec::ParityRecord record, GroupRecord(me, d_.replicator, ns, step));
  if (me.index() >= record.data.size() || record.data[me.index()].member != d_.node_id) {
    return FailedPrecondition("the parity record of " + std::string(ns) + " step " + std::to_string(step) +
                              " does not make node " + d_.node_id + " data member " +
                              std::to_string(me.index()) +
                              "; give every agent the same peer list and --redundancy");
  }
  return PartManifestFromRecord(record, me.index(), d_.node_id);
}

}  // namespace tierckpt::agent
