// Handlers: dispatch, Hello, the write path, OpenObject, Shutdown.
// Listings and administration are in handlers_admin.cc.
#include "agent/handlers.h"

#include "common/log.h"
#include "common/names.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

using wire::MsgType;

Reply StatusReply(Status st) {
  Reply r;
  r.status = std::move(st);
  return r;
}

Reply JsonReply(const std::string& json) {
  Reply r;
  r.body = wire::JsonBody{json}.Encode();
  return r;
}

Reply ProtocolReply(const Status& st) {
  Reply r;
  r.status = st.code() == Code::kProtocolError ? st : ProtocolError(st.message());
  r.close_after = true;
  return r;
}

Status Handlers::InNoTier(std::string_view ns, uint64_t step) {
  return NotFound("step " + StepLabel(ns, step) + " is in no tier; `tierckpt ls " + std::string(ns) +
                  "` lists what exists");
}

Result<bool> Handlers::DurableHas(std::string_view ns, uint64_t step) {
  if (d_.store == nullptr) return false;
  Result<Manifest> m = d_.store->ReadManifest(ns, step);
  if (m.ok()) return true;
  if (m.status().code() == Code::kNotFound) return false;
  return m.status().WithContext("reading " + StepLabel(ns, step) + " from " + d_.store->Describe());
}

Reply Handlers::Handle(ConnectionState& conn, const wire::Frame& frame) {
  const uint16_t type = frame.header.type;
  if (!wire::IsKnownRequestType(type)) {
    Status st = ProtocolError("unknown request type " + std::to_string(type) +
                              "; this agent speaks protocol version " + std::to_string(wire::kProtocolVersion) +
                              " (check client and agent are the same version)");
    Log(LogLevel::kWarn, "bad request").Kv("conn", conn.id).Err(st);
    d_.errors->Add("connection", st);
    return ProtocolReply(st);
  }
  const std::string_view name = wire::MsgTypeName(type);
  if (!conn.hello_done && static_cast<MsgType>(type) != MsgType::kHello) {
    Status st = ProtocolError("the first request on a connection must be Hello, not " + std::string(name) +
                              "; use the tierckpt client library or follow docs/protocol.md");
    Log(LogLevel::kWarn, "bad request").Kv("conn", conn.id).Err(st);
    return ProtocolReply(st);
  }
  Reply r = Dispatch(conn, static_cast<MsgType>(type), frame.payload);
  if (!r.status.ok()) {
    const Code c = r.status.code();
    bool serious = c == Code::kCorruption || c == Code::kIoError || c == Code::kInternal ||
                   c == Code::kProtocolError || c == Code::kResourceExhausted;
    Log(serious ? LogLevel::kWarn : LogLevel::kInfo, "request failed")
        .Kv("conn", conn.id)
        .Kv("request", name)
        .Err(r.status);
    if (serious) d_.errors->Add(std::string(name), r.status);
  }
  return r;
}

void Handlers::OnClose(ConnectionState& conn) { d_.tier->ReleaseWriter(conn.id); }

Reply Handlers::Dispatch(ConnectionState& conn, MsgType type, std::string_view p) {
  switch (type) {
    case MsgType::kHello:
      return Hello(conn, p);
    case MsgType::kBeginStep:
      return BeginStep(conn, p);
    case MsgType::kCreateObject:
      return CreateObject(conn, p);
    case MsgType::kSealObject:
      return SealObject(p);
    case MsgType::kCommitStep:
      return CommitStep(p);
    case MsgType::kAbortStep:
      return AbortStep(p);
    case MsgType::kOpenObject:
      return OpenObject(p);
    case MsgType::kList:
      return List(p);
    case MsgType::kShow:
      return Show(p);
    case MsgType::kStats:
      return Stats(p);
    case MsgType::kVerify:
      return Verify(p);
    case MsgType::kDeleteStep:
      return DeleteStep(p);
    case MsgType::kPrune:
      return Prune(p);
    case MsgType::kPersist:
      return Persist(p);
    case MsgType::kWaitDurable:
      return WaitDurable(p);
    case MsgType::kRestore:
      return Restore(p);
    case MsgType::kShutdown:
      return Shutdown(p);
  }
  return ProtocolReply(ProtocolError("unknown request type"));
}

Reply Handlers::Hello(ConnectionState& conn, std::string_view p) {
  wire::HelloRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  conn.hello_done = true;
  conn.client = req.client.substr(0, 128);
  Log(LogLevel::kInfo, "hello")
      .Kv("conn", conn.id)
      .Kv("client", conn.client)
      .Kv("pid", static_cast<uint64_t>(req.pid))
      .Kv("peer_pid", static_cast<int64_t>(conn.peer.pid));
  wire::HelloResponse resp;
  resp.node_id = d_.info.node_id;
  resp.agent_version = kAgentVersion;
  resp.root = d_.info.root;
  resp.durable = d_.info.durable_url;
  Reply r;
  r.body = resp.Encode();
  return r;
}

Reply Handlers::BeginStep(ConnectionState& conn, std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(d_.tier->BeginStep(req.ns, req.step, conn.id));
}

Reply Handlers::CreateObject(ConnectionState& conn, std::string_view p) {
  wire::CreateObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  Result<CreatedObject> created = d_.tier->CreateObject(req.ns, req.step, req.name, req.size, conn.id);
  if (!created.ok()) return StatusReply(created.status());
  Reply r;
  r.fd = std::move(created->fd);
  return r;
}

Reply Handlers::SealObject(std::string_view p) {
  wire::SealObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(d_.tier->SealObject(req.ns, req.step, req.name, req.size, req.checksum));
}

Reply Handlers::CommitStep(std::string_view p) {
  wire::CommitStepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  Result<Manifest> m = d_.tier->CommitStep(req.ns, req.step, req.world_size, req.persist, req.expected_objects);
  if (!m.ok()) return StatusReply(m.status());
  if (d_.replicator != nullptr && !d_.replicator->holders().empty()) {
    if (d_.replica_ack == ReplicaAck::kAll) {
      // The step stays committed here either way; the error tells the writer
      // the replicas it asked for are missing (docs/replication.md).
      if (Status r = d_.replicator->Replicate(req.ns, req.step); !r.ok()) return StatusReply(r);
    } else {
      Replicator* rep = d_.replicator;
      d_.replication_queue->Submit([rep, ns = req.ns, step = req.step] { rep->Replicate(ns, step).IgnoreError(); });
    }
  }
  return JsonReply(m->ToJson());
}

Reply Handlers::AbortStep(std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(d_.tier->AbortStep(req.ns, req.step));
}

Reply Handlers::OpenObject(std::string_view p) {
  wire::OpenObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  Result<OpenedObject> opened = d_.tier->OpenObject(req.ns, req.step, req.name);
  if (!opened.ok() && opened.status().code() == Code::kNotFound && !d_.tier->HasCommitted(req.ns, req.step)) {
    Status restored = RestoreFromOtherTiers(req.ns, req.step);
    if (!restored.ok()) return StatusReply(restored);
    opened = d_.tier->OpenObject(req.ns, req.step, req.name);
  }
  if (!opened.ok()) return StatusReply(opened.status());
  wire::OpenObjectResponse resp;
  resp.size = opened->size;
  resp.checksum = opened->checksum;
  Reply r;
  r.body = resp.Encode();
  r.fd = std::move(opened->fd);
  return r;
}

Status Handlers::RestoreFromOtherTiers(const std::string& ns, uint64_t step) {
  Status from_peers = NotFound("no peers");
  if (d_.replicator != nullptr && !d_.replicator->holders().empty()) {
    from_peers = d_.replicator->RestoreFromPeers(d_.tier, ns, step);
    if (from_peers.ok()) return from_peers;
    if (from_peers.code() == Code::kUnavailable) return from_peers;  // shutting down
    Log(LogLevel::kWarn, "peer_restore_failed")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("next", d_.store != nullptr ? "durable" : "none")
        .Err(from_peers);
  }
  if (d_.store == nullptr) {
    Status none = InNoTier(ns, step);
    if (d_.replicator != nullptr && !d_.replicator->holders().empty()) {
      return Status(none.code(), none.message() + "; no replica holder has it either (" + from_peers.message() + ")");
    }
    return none;
  }
  return d_.tier->Restore(*d_.store, ns, step);
}

Reply Handlers::Shutdown(std::string_view p) {
  wire::Decoder dec(p);
  if (Status st = dec.Finish(); !st.ok()) return ProtocolReply(st.WithContext("Shutdown takes no payload"));
  Log(LogLevel::kInfo, "shutdown requested").Kv("by", "client");
  Reply r;
  r.stop_after = true;
  return r;
}

}  // namespace tierckpt::agent
