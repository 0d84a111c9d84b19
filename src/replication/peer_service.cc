// peer_service.cc — see peer_service.h.
#include "replication/peer_service.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "ops/metrics.h"
#include "os/mapping.h"
#include "os/parallel.h"
#include "replication/peer_store.h"

namespace tierckpt::agent {

PeerService::PeerService(PeerServiceDeps deps)
    : deps_(std::move(deps)), ring_id_(deps_.ring != nullptr ? RingIdOf(*deps_.ring) : RingId{}) {}

PeerService::~PeerService() { Stop(); }

Status PeerService::Start(const std::string& address) {
  Result<std::unique_ptr<peer::Listener>> l = deps_.transport->Listen(address);
  if (!l.ok()) return l.status().WithContext("listening for peers at " + address + " (--peer-listen)");
  Start(std::move(l).value());
  return Status::Ok();
}

void PeerService::Start(std::unique_ptr<peer::Listener> listener) {
  listener_ = std::move(listener);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

std::string PeerService::address() const { return listener_ != nullptr ? listener_->address() : ""; }

void PeerService::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    for (Served& s : served_) {
      if (s.conn != nullptr) s.conn->Close();
    }
  }
  if (listener_ != nullptr) listener_->Close();
  if (acceptor_.joinable()) acceptor_.join();
  std::list<Served> served;
  {
    MutexLock lock(&mu_);
    served.swap(served_);
  }
  for (Served& s : served) {
    if (s.thread.joinable()) s.thread.join();
  }
}

void PeerService::AcceptLoop() {
  for (;;) {
    Result<std::unique_ptr<peer::Connection>> c = listener_->Accept(peer::Millis(1000));
    if (!c.ok()) {
      if (c.status().code() == Code::kTimeout) continue;
      return;  // closed
    }
    MutexLock lock(&mu_);
    if (stopping_) return;
    // Reap connections that ended.
    for (auto it = served_.begin(); it != served_.end();) {
      if (it->conn == nullptr && it->thread.joinable()) {
        it->thread.join();
        it = served_.erase(it);
      } else {
        ++it;
      }
    }
    served_.push_back(Served{std::move(c).value(), std::thread()});
    Served& s = served_.back();
    peer::Connection* conn = s.conn.get();
    Log(LogLevel::kDebug, "peer_connected").Kv("peer", conn->Describe());
    s.thread = std::thread([this, conn] {
      Serve(conn);
      MutexLock done(&mu_);
      for (Served& x : served_) {
        if (x.conn.get() == conn) x.conn.reset();  // the thread is joined at reap or Stop
      }
    });
  }
}

void PeerService::Serve(peer::Connection* conn) {
  for (;;) {
    Result<peer::Message> m = conn->Receive(peer::Millis(1000));
    if (!m.ok()) {
      if (m.status().code() == Code::kTimeout) {
        MutexLock lock(&mu_);
        if (stopping_) return;
        continue;
      }
      if (m.status().code() != Code::kUnavailable) {
        Log(LogLevel::kWarn, "peer_connection_failed").Kv("peer", conn->Describe()).Err(m.status());
      }
      return;
    }
    if (m->kind == peer::Message::Kind::kStream) {
      Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Kv("error", "unexpected stream");
      conn->Close();
      return;
    }
    if (!Answer(conn, m->frame)) {
      conn->Close();
      return;
    }
  }
}

Result<MemoryTier*> PeerService::TierOf(std::string_view origin) {
  if (origin == deps_.node_id) return deps_.tier;
  return deps_.replicas->Get(origin, /*create=*/false);
}

bool PeerService::Answer(peer::Connection* conn, const peer::Frame& request) {
  const auto type = static_cast<PeerMsg>(request.type);
  auto reply = [&](PeerMsg t, std::string payload) {
    peer::Frame f;
    f.type = static_cast<uint16_t>(t);
    f.request_id = request.request_id;
    f.payload = std::move(payload);
    Status s = conn->Send(f);
    if (!s.ok()) Log(LogLevel::kWarn, "peer_reply_failed").Kv("peer", conn->Describe()).Err(s);
    return s.ok();
  };
  auto fail = [&](const Status& s) { return reply(PeerMsg::kError, EncodePeerError(s)); };
  switch (type) {
    case PeerMsg::kGetManifest:
    case PeerMsg::kListSteps:
    case PeerMsg::kGetObject:
    case PeerMsg::kReplicate:
    case PeerMsg::kPersistPart:
    case PeerMsg::kDropReplica:
    case PeerMsg::kDropParity:
      break;
    case PeerMsg::kFoldParity: {
      Result<peer::ParityFolded> folded = FoldParity(conn->peer().node_id, request.payload);
      if (!folded.ok()) {
        if (folded.status().code() == Code::kProtocolError) {
          Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Err(folded.status());
          return false;
        }
        return fail(folded.status());
      }
      return reply(PeerMsg::kParityFolded, folded->Encode());
    }
    case PeerMsg::kGetParityRecord:
    case PeerMsg::kGetParityPiece:
      return AnswerParityRead(conn, request);
    case PeerMsg::kCommitSubtree:
    case PeerMsg::kCommitRingSubtree: {
      Result<SubtreeSum> sum = type == PeerMsg::kCommitSubtree
                                   ? CommitSubtree(conn->peer().node_id, request.payload)
                                   : CommitRingSubtree(conn->peer().node_id, request.payload);
      if (!sum.ok()) {
        if (sum.status().code() == Code::kProtocolError) {
          Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Err(sum.status());
          return false;
        }
        return fail(sum.status());
      }
      return reply(PeerMsg::kSubtreeCommitted, sum->Encode());
    }
    case PeerMsg::kCommitPart: {
      Result<Manifest> part = CommitPart(conn->peer().node_id, request.payload);
      if (!part.ok()) {
        if (part.status().code() == Code::kProtocolError) {
          Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Err(part.status());
          return false;
        }
        return fail(part.status());
      }
      return reply(PeerMsg::kManifest, part->ToJson());
    }
    default:
      Log(LogLevel::kWarn, "peer_protocol")
          .Kv("peer", conn->Describe())
          .Kv("error", "unknown request type " + std::to_string(request.type));
      return false;
  }
  Result<PeerRequest> r = DecodePeerRequest(type, request.payload);
  if (!r.ok()) {
    Log(LogLevel::kWarn, "peer_protocol").Kv("peer", conn->Describe()).Err(r.status());
    return false;
  }
  Status valid = ValidateNamespace(r->ns);
  if (valid.ok()) valid = ValidateStep(r->step);
  if (valid.ok() && type == PeerMsg::kGetObject) valid = ValidateObjectName(r->name);
  if (!valid.ok()) return fail(valid);
  if (type == PeerMsg::kPersistPart) {
    Status persisted = PersistPart(*r);
    if (!persisted.ok()) return fail(persisted);
    return reply(PeerMsg::kDone, "");
  }
  if (type == PeerMsg::kDropReplica) {
    const std::string origin = conn->peer().node_id;
    Result<MemoryTier*> held = deps_.replicas->Get(origin, /*create=*/false);
    bool dropped = false;
    if (held.ok()) {
      Result<bool> d = (*held)->DeleteStep(r->ns, r->step);
      if (!d.ok()) return fail(d.status().WithContext("deleting the replica of " + r->ns + " step " +
                                                      std::to_string(r->step) + " of node " + origin));
      dropped = *d;
    }
    Log(LogLevel::kInfo, "replica_deleted").Kv("origin", origin).Kv("ns", r->ns).Kv("step", r->step).Kv("held", dropped);
    return reply(PeerMsg::kDone, DropReplicaAnswer{dropped ? 1u : 0u}.Encode());
  }
  if (type == PeerMsg::kDropParity) {
    Result<bool> dropped = DropParity(conn->peer().node_id, *r);
    if (!dropped.ok()) return fail(dropped.status());
    return reply(PeerMsg::kDone, DropReplicaAnswer{*dropped ? 1u : 0u}.Encode());
  }
  if (type == PeerMsg::kReplicate) {
    const std::string origin = conn->peer().node_id;
    Status pulled = PullReplica(origin, *r);
    if (!pulled.ok()) return fail(pulled);
    return reply(PeerMsg::kDone, "");
  }
  Result<MemoryTier*> tier = TierOf(r->origin);
  if (!tier.ok()) return fail(tier.status());
  switch (type) {
    case PeerMsg::kGetManifest: {
      Result<Manifest> m = (*tier)->GetManifest(r->ns, r->step);
      if (!m.ok()) return fail(m.status());
      return reply(PeerMsg::kManifest, m->ToJson());
    }
    case PeerMsg::kListSteps: {
      std::vector<uint64_t> steps;
      for (const StepInfo& s : (*tier)->ListSteps(r->ns)) {
        if (s.committed && s.ns == r->ns) steps.push_back(s.step);
      }
      return reply(PeerMsg::kSteps, EncodeSteps(steps));
    }
    default: {  // kGetObject
      // Through the tier's kept read mapping, pinned: no page-table setup and
      // teardown per request. Until the stream begins, errors are answered.
      Result<PinnedObject> object = (*tier)->ReadCommittedObject(r->ns, r->step, r->name);
      if (!object.ok()) return fail(object.status());
      // Only this node's own steps are capped: replicas held for others go
      // back to their origin for a restore, which waits on them.
      RateLimiter* rate = r->origin == deps_.node_id ? deps_.replicate_rate : nullptr;
      Status sent = SendObject(conn, request.request_id, r->name, *object, rate);
      if (sent.ok()) return true;
      Log(LogLevel::kWarn, "peer_send_failed")
          .Kv("peer", conn->Describe())
          .Kv("ns", r->ns)
          .Kv("step", r->step)
          .Kv("object", r->name)
          .Err(sent);
      // The stream was aborted (the peer sees why) or the connection broke.
      return sent.code() != Code::kUnavailable && sent.code() != Code::kTimeout &&
             sent.code() != Code::kIoError;
    }
  }
}

Status PeerService::SendObject(peer::Connection* conn, uint32_t request_id, const std::string& name,
                               const PinnedObject& object, RateLimiter* rate) {
  peer::StreamHeader h;
  h.type = static_cast<uint16_t>(PeerMsg::kObject);
  h.request_id = request_id;
  h.object_id = request_id;
  h.size = object.view.size();
  h.metadata = name;
  // The checksum taken at commit goes out as the stream's: the receiver
  // hashes what lands against it, so this side does not hash the object
  // again (a third of a holder's CPU per restore), and bytes damaged here
  // since the commit still fail there.
  Result<Checksum> known = Checksum::Parse(object.checksum);
  if (rate != nullptr && !rate->unlimited()) return SendPaced(conn, h, object, known, rate);
  if (known.ok()) return conn->SendStreamKnown(h, object.view.data(), object.view.size(), *known);
  return conn->SendStream(h, object.view.data(), object.view.size());
}

Status PeerService::SendPaced(peer::Connection* conn, const peer::StreamHeader& h, const PinnedObject& object,
                              const Result<Checksum>& known, RateLimiter* rate) {
  // Connection::SendStream's loop, with each chunk paid for before it goes.
  TC_RETURN_IF_ERROR(conn->BeginStream(h));
  const auto* p = static_cast<const uint8_t*>(object.view.data());
  const size_t size = object.view.size();
  const size_t chunk = std::max<size_t>(conn->chunk_bytes(), 1);
  auto stopping = [this] {
    MutexLock lock(&mu_);
    return stopping_;
  };
  Hasher hasher;
  for (size_t off = 0; off < size; off += chunk) {
    const size_t n = std::min(chunk, size - off);
    bool cancelled = false;
    rate->Acquire(n, stopping, &cancelled);
    if (cancelled) {
      TC_RETURN_IF_ERROR(conn->AbortStream("the agent is shutting down"));
      return Aborted("streaming " + QuoteForMessage(h.metadata) + " to " + conn->Describe() +
                     ": shutting down");
    }
    if (!known.ok()) hasher.Update(p + off, n);
    TC_RETURN_IF_ERROR(conn->SendStreamChunk(p + off, n));
  }
  return conn->EndStream(known.ok() ? *known : hasher.Finish());
}

Status PeerService::PullReplica(const std::string& origin, const PeerRequest& r) {
  if (origin == deps_.node_id) {
    return InvalidArgument("node " + origin + " asked itself to hold its own replica; check the hostfile");
  }
  std::optional<std::string> address = deps_.address_of(origin);
  if (!address) {
    return FailedPrecondition("node " + origin + " is not in this agent's peer list (--peers); add it to "
                              "the hostfile of every agent");
  }
  TC_ASSIGN_OR_RETURN(MemoryTier * tier, deps_.replicas->Get(origin, /*create=*/true));
  PeerObjectStore from(deps_.transport, PeerStoreTarget{origin, *address, origin}, deps_.timeout);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = tier->Restore(from, r.ns, r.step);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    deps_.metrics->replicate.Failed();
    Log(LogLevel::kWarn, "replica_failed").Kv("origin", origin).Kv("ns", r.ns).Kv("step", r.step).Err(s);
    return s.WithContext("holding a replica of " + r.ns + " step " + std::to_string(r.step) + " of node " +
                         origin + " on node " + deps_.node_id);
  }
  Result<Manifest> held = tier->GetManifest(r.ns, r.step);
  deps_.metrics->replicate.Succeeded(held.ok() ? held->TotalBytes() : 0, ms / 1e3);
  Log(LogLevel::kInfo, "replica_held").Kv("origin", origin).Kv("ns", r.ns).Kv("step", r.step).Kv("ms", ms);
  return Status::Ok();
}

Result<Manifest> PeerService::CommitPart(const std::string& coordinator, std::string_view payload) {
  TC_ASSIGN_OR_RETURN(wire::CommitStepRequest req, wire::CommitStepRequest::Decode(payload));
  TC_RETURN_IF_ERROR(ValidateNamespace(req.ns));
  TC_RETURN_IF_ERROR(ValidateStep(req.step));
  auto member = [&](const std::string& id) {
    return std::find(req.members.begin(), req.members.end(), id) != req.members.end();
  };
  if (!member(deps_.node_id) || !member(coordinator)) {
    return InvalidArgument("node " + coordinator + " asked node " + deps_.node_id +
                           " to commit its part of " + StepLabel(req.ns, req.step) +
                           ", but the members it names lack " +
                           (member(coordinator) ? deps_.node_id : coordinator));
  }
  return CommitOwnPart(coordinator, coordinator, req);
}

Result<Manifest> PeerService::CommitOwnPart(const std::string& by, const std::string& coordinator,
                                            const wire::CommitStepRequest& req) {
  const std::string label = StepLabel(req.ns, req.step);
  if (!deps_.commit_part) return FailedPrecondition("node " + deps_.node_id + " cannot commit parts yet (starting)");
  const auto t0 = std::chrono::steady_clock::now();
  Result<Manifest> m = deps_.commit_part(req, coordinator);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!m.ok()) {
    Log(LogLevel::kWarn, "part_commit_failed")
        .Kv("ns", req.ns)
        .Kv("step", req.step)
        .Kv("by", by)
        .Err(m.status());
    return m.status().WithContext("committing node " + deps_.node_id + "'s part of " + label);
  }
  Log(LogLevel::kInfo, "part_committed")
      .Kv("ns", req.ns)
      .Kv("step", req.step)
      .Kv("by", by)
      .Kv("bytes", m->TotalBytes())
      .Kv("ms", ms);
  return m;
}

Result<SubtreeSum> PeerService::CommitSubtree(const std::string& parent, std::string_view payload) {
  TC_ASSIGN_OR_RETURN(peer::CommitSubtreeRequest r, peer::CommitSubtreeRequest::Decode(payload));
  TC_ASSIGN_OR_RETURN(wire::CommitStepRequest req, wire::CommitStepRequest::Decode(r.commit));
  return CommitTreeOf(parent, req, r.root, r.fan_out, payload.size());
}

Result<SubtreeSum> PeerService::CommitRingSubtree(const std::string& parent, std::string_view payload) {
  TC_ASSIGN_OR_RETURN(peer::CommitRingSubtreeRequest r, peer::CommitRingSubtreeRequest::Decode(payload));
  TC_ASSIGN_OR_RETURN(wire::CommitStepRequest req, wire::CommitStepRequest::Decode(r.commit));
  TC_RETURN_IF_ERROR(ValidateNamespace(req.ns));
  TC_RETURN_IF_ERROR(ValidateStep(req.step));
  const std::string asked = "node " + parent + " asked node " + deps_.node_id + " to commit its subtree of " +
                            StepLabel(req.ns, req.step);
  if (!req.members.empty()) {
    return InvalidArgument(asked +
                           " with a member list beside the member runs; a request names its members once");
  }
  const RingId theirs{r.ring_size, r.ring_digest};
  if (deps_.ring == nullptr || theirs != ring_id_) {
    return FailedPrecondition(asked + " with the members as places in its ring of agents (" +
                              theirs.ToString() + "), but node " + deps_.node_id +
                              "'s ring (its --peers) is " +
                              (deps_.ring == nullptr ? std::string("none") : ring_id_.ToString()) +
                              "; every agent of a job needs the same peer list: give every agent the "
                              "same --peers (one hostfile, or the same slurm: or dns: source) and restart "
                              "the ones that differ");
  }
  Result<std::vector<std::string>> members = MembersOfRuns(*deps_.ring, r.member_runs);
  if (!members.ok()) return members.status().WithContext(asked);
  req.members = std::move(members).value();
  return CommitTreeOf(parent, req, r.root, r.fan_out, payload.size());
}

Result<SubtreeSum> PeerService::CommitTreeOf(const std::string& parent, const wire::CommitStepRequest& req,
                                             const std::string& root, uint32_t fan_out,
                                             size_t request_bytes) {
  TC_RETURN_IF_ERROR(ValidateNamespace(req.ns));
  TC_RETURN_IF_ERROR(ValidateStep(req.step));
  const std::string label = StepLabel(req.ns, req.step);
  Result<CommitTree> tree = CommitTree::Create(req.members, root, fan_out);
  if (!tree.ok()) {
    return tree.status().WithContext("node " + parent + " asked node " + deps_.node_id +
                                     " to commit its subtree of " + label);
  }
  const std::optional<std::string> my_parent = tree->ParentOf(deps_.node_id);
  if (!tree->Contains(deps_.node_id) || my_parent != parent) {
    return InvalidArgument("node " + parent + " asked node " + deps_.node_id + " to commit its subtree of " +
                           label + ", but in that step's commit tree (root " + root + ", fan-out " +
                           std::to_string(fan_out) + ") " +
                           (tree->Contains(deps_.node_id) ? "its parent is " + my_parent.value_or("none")
                                                          : std::string("it is not a member")));
  }
  if (!deps_.commit_children) {
    return FailedPrecondition("node " + deps_.node_id + " cannot commit parts yet (starting)");
  }
  // The children's subtrees and this node's own part at once: a subtree's
  // commit costs the depth in hops plus its slowest part, not their sum.
  const auto t0 = std::chrono::steady_clock::now();
  Result<SubtreeSum> children(Internal("not run"));
  Result<Manifest> own(Internal("not run"));
  (void)ParallelFor(2, 2, [&](size_t i) {
    if (i == 0) {
      children = deps_.commit_children(req, *tree);
    } else {
      own = CommitOwnPart(parent, root, req);
    }
    return Status::Ok();
  });
  if (!children.ok() || !own.ok()) {
    std::string failed = own.ok() ? "" : own.status().message();
    if (!children.ok()) failed += (failed.empty() ? "" : "; ") + children.status().message();
    Code code = own.ok() ? children.status().code() : own.status().code();
    // A malformed answer from below is the subtree's failure, answered to the
    // parent; kProtocolError here would close the parent's connection instead.
    if (code == Code::kProtocolError) code = Code::kUnavailable;
    return Status(code, failed);
  }
  SubtreeSum sum = std::move(children).value();
  AddPart(&sum, *own);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Log(LogLevel::kInfo, "subtree_committed")
      .Kv("ns", req.ns)
      .Kv("step", req.step)
      .Kv("by", parent)
      .Kv("children", static_cast<uint64_t>(tree->ChildrenOf(deps_.node_id).size()))
      .Kv("parts", static_cast<uint64_t>(sum.parts))
      .Kv("request_bytes", static_cast<uint64_t>(request_bytes))
      .Kv("ms", ms);
  return sum;
}

Status PeerService::PersistPart(const PeerRequest& r) {
  if (!deps_.persist_part) {
    return FailedPrecondition("node " + deps_.node_id + " has no durable tier (--durable) to upload the part of node " +
                              r.origin + " of " + StepLabel(r.ns, r.step) + " to");
  }
  TC_ASSIGN_OR_RETURN(MemoryTier * tier, TierOf(r.origin));
  const auto t0 = std::chrono::steady_clock::now();
  Status s = deps_.persist_part(tier, r.ns, r.step);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) return s.WithContext("uploading the part of node " + r.origin + " of " + StepLabel(r.ns, r.step));
  Log(LogLevel::kInfo, r.origin == deps_.node_id ? "part_persisted" : "part_taken_over")
      .Kv("ns", r.ns)
      .Kv("step", r.step)
      .Kv("origin", r.origin)
      .Kv("ms", ms);
  return Status::Ok();
}

}  // namespace tierckpt::agent
