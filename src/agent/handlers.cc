// Handlers: dispatch, Hello, the write path, OpenObject (read_path.h decides), Shutdown.
// Listings and administration are in handlers_admin.cc.
#include "agent/handlers.h"

#include <algorithm>

#include "common/log.h"
#include "common/names.h"
#include "replication/commit.h"
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

Status Handlers::InNoTier(std::string_view ns, uint64_t step) { return StepInNoTier(ns, step); }

Result<bool> Handlers::DurableHas(std::string_view ns, uint64_t step) {
  if (d_.store == nullptr) return false;
  Result<Manifest> m = d_.store->ReadManifest(ns, step);
  if (m.ok()) return true;
  if (m.status().code() == Code::kNotFound) return false;
  return m.status().WithContext("reading " + StepLabel(ns, step) + " from " +
                                d_.store->DescribeNamespace(ns));
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

void Handlers::OnClose(ConnectionState& conn) {
  d_.tier->ReleaseWriter(conn.id);
  d_.tier->policies().Release(conn.id);
}

Reply Handlers::Dispatch(ConnectionState& conn, MsgType type, std::string_view p) {
  switch (type) {
    case MsgType::kHello:
      return Hello(conn, p);
    case MsgType::kBeginStep:
      return BeginStep(conn, p);
    case MsgType::kCreateObject:
      return CreateObject(conn, p);
    case MsgType::kCreateNextObject:
      return CreateNextObject(conn, p);
    case MsgType::kBeginSave:
      return BeginSave(conn, p);
    case MsgType::kBeginSaveCreateNext:
      return BeginSaveCreateNext(conn, p);
    case MsgType::kSealObject:
      return SealObject(conn, p);
    case MsgType::kCommitStep:
      return CommitStep(conn, p);
    case MsgType::kAbortStep:
      return AbortStep(conn, p);
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
    case MsgType::kBindDurable:
      return BindDurable(p);
    case MsgType::kSetPolicy:
      return SetPolicy(conn, p);
  }
  return ProtocolReply(ProtocolError("unknown request type"));
}

Reply Handlers::Hello(ConnectionState& conn, std::string_view p) {
  wire::HelloRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = wire::ValidateWriterId(req.writer); !st.ok()) return StatusReply(st.WithContext("Hello"));
  conn.hello_done = true;
  conn.client = req.client.substr(0, 128);
  conn.writer = req.writer;
  Log(LogLevel::kInfo, "hello")
      .Kv("conn", conn.id)
      .Kv("client", conn.client)
      .Kv("writer", conn.writer)
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
  return StatusReply(d_.tier->BeginStep(req.ns, req.step, conn.id, conn.writer));
}

Reply Handlers::CreateObject(ConnectionState& conn, std::string_view p) {
  wire::CreateObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  Result<CreatedObject> created = d_.tier->CreateObject(req.ns, req.step, req.name, req.size, conn.id, conn.writer);
  if (!created.ok()) return StatusReply(created.status());
  Reply r;
  r.fd = std::move(created->fd);
  return r;
}

Reply Handlers::CreateNextObject(ConnectionState& conn, std::string_view p) {
  wire::CreateNextObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return CreateNext(conn, req);
}

Reply Handlers::BeginSaveCreateNext(ConnectionState& conn, std::string_view p) {
  wire::CreateNextObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status begun = BeginSaveOf(conn, req.ns, req.step); !begun.ok()) return StatusReply(begun);
  return CreateNext(conn, req);
}

Reply Handlers::CreateNext(ConnectionState& conn, const wire::CreateNextObjectRequest& req) {
  for (uint64_t i = 0; i < wire::kMaxNextObjectNames; ++i) {
    const uint64_t n = req.first + i;
    if (n < req.first) break;  // past 2^64 - 1
    std::string name = req.prefix + std::to_string(n) + req.suffix;
    Result<CreatedObject> created =
        d_.tier->CreateObject(req.ns, req.step, name, req.size, conn.id, conn.writer);
    if (created.ok()) {
      conn.created_in.emplace(req.ns, req.step);
      Reply r;
      r.body = wire::CreateNextObjectResponse{n, std::move(name)}.Encode();
      r.fd = std::move(created->fd);
      return r;
    }
    if (created.status().code() != Code::kAlreadyExists) return StatusReply(created.status());
    // Either this name is sealed, or the step is committed or owned by
    // another writer. BeginStep refuses the latter two: then that is the
    // answer; otherwise the next name is tried.
    if (Status begun = d_.tier->BeginStep(req.ns, req.step, conn.id, conn.writer); !begun.ok()) {
      return StatusReply(begun);
    }
  }
  return StatusReply(AlreadyExists(
      "object names " + QuoteForMessage(req.prefix + "<n>" + req.suffix) +
      " for n = " + std::to_string(req.first) + " and the " + std::to_string(wire::kMaxNextObjectNames - 1) +
      " after it are sealed in step " + StepLabel(req.ns, req.step) +
      " by earlier attempts; abort the step (`tierckpt rm`) or save another step"));
}

Reply Handlers::BeginSave(ConnectionState& conn, std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(BeginSaveOf(conn, req.ns, req.step));
}

Status Handlers::BeginSaveOf(ConnectionState& conn, const std::string& ns, uint64_t step) {
  AbortLeftoverSteps(conn, ns, step);
  return d_.tier->BeginStep(ns, step, conn.id, conn.writer);
}

void Handlers::AbortLeftoverSteps(ConnectionState& conn, const std::string& ns, uint64_t step) {
  std::vector<uint64_t> leftovers;
  for (auto it = conn.created_in.lower_bound({ns, 0}); it != conn.created_in.end() && it->first == ns;) {
    if (it->second == step) {
      ++it;
      continue;
    }
    leftovers.push_back(it->second);
    it = conn.created_in.erase(it);
  }
  if (leftovers.empty()) return;
  std::vector<uint64_t> writing;  // steps of ns not committed: being written (or restored)
  for (const StepInfo& s : d_.tier->ListSteps(ns)) {
    if (s.ns == ns && !s.committed) writing.push_back(s.step);
  }
  for (uint64_t old : leftovers) {
    if (std::find(writing.begin(), writing.end(), old) == writing.end()) continue;  // committed or gone
    Log(LogLevel::kWarn, "leftover_step_aborted")
        .Kv("conn", conn.id)
        .Kv("ns", ns)
        .Kv("step", old);
    if (Status st = d_.tier->AbortStep(ns, old, conn.writer); !st.ok()) {
      Log(LogLevel::kWarn, "leftover_step_abort_failed").Kv("ns", ns).Kv("step", old).Err(st);
    }
  }
}

Reply Handlers::SealObject(const ConnectionState& conn, std::string_view p) {
  wire::SealObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(d_.tier->SealObject(req.ns, req.step, req.name, req.size, req.checksum, conn.writer));
}

Reply Handlers::CommitStep(const ConnectionState& conn, std::string_view p) {
  wire::CommitStepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  std::sort(req.members.begin(), req.members.end());
  req.members.erase(std::unique(req.members.begin(), req.members.end()), req.members.end());
  const CommitDeps commit{d_.tier, d_.cluster};
  if (req.members.size() <= 1) {
    if (req.members.size() == 1 && req.members[0] != d_.info.node_id) {
      return StatusReply(InvalidArgument("commit of " + StepLabel(req.ns, req.step) + " names node " + req.members[0] +
                                         " as its only member, but this agent is node " + d_.info.node_id));
    }
    req.members.clear();
    Result<Manifest> m = CommitOnNode(commit, req, conn.writer);
    if (!m.ok()) return StatusReply(m.status());
    return JsonReply(m->ToJson());
  }
  // A step spanning nodes (docs/multinode.md): every other member's part
  // first, down the commit tree, this node's part last, so a part here means
  // the step is whole. A single node refuses it (Cluster::CommitOtherParts).
  // The answer is this node's part with the sums of every part (decision
  // 102): no node holds the other members' manifests.
  Result<SubtreeSum> others = d_.cluster->CommitOtherParts(req);
  if (!others.ok()) return StatusReply(others.status());
  Result<Manifest> own = CommitOnNode(commit, req, conn.writer);
  if (!own.ok()) return StatusReply(own.status());
  SubtreeSum sum = *others;
  AddPart(&sum, *own);
  if (sum.parts != req.members.size()) {
    return StatusReply(Internal("committing " + StepLabel(req.ns, req.step) + " across nodes: " +
                                std::to_string(sum.parts) + " parts answered for " +
                                std::to_string(req.members.size()) + " members"));
  }
  Manifest answer = std::move(own).value();
  answer.world_size = std::max(answer.world_size, sum.world_size);
  answer.checksums_pending = answer.checksums_pending || sum.checksums_pending;
  answer.span = SpanSummary{sum.parts, sum.objects, sum.bytes, FormatSpanNamesDigest(sum.names)};
  Log(LogLevel::kInfo, "commit_across_nodes")
      .Kv("ns", req.ns)
      .Kv("step", req.step)
      .Kv("members", static_cast<uint64_t>(req.members.size()))
      .Kv("objects", sum.objects)
      .Kv("bytes", sum.bytes)
      .Kv("depth", static_cast<uint64_t>(sum.depth));
  return JsonReply(answer.ToJson());
}

Reply Handlers::AbortStep(const ConnectionState& conn, std::string_view p) {
  wire::StepRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  return StatusReply(d_.tier->AbortStep(req.ns, req.step, conn.writer));
}

Reply Handlers::OpenObject(std::string_view p) {
  wire::OpenObjectRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  Result<ServedObject> served = read_path_.Open(req.ns, req.step, req.name, req.repair);
  if (!served.ok()) return StatusReply(served.status());
  wire::OpenObjectResponse resp;
  resp.size = served->object.size;
  resp.checksum = served->object.checksum;
  resp.repaired = std::move(served->repaired);
  static_assert(kNeverVerified == wire::kNeverVerifiedAgeMs);
  resp.verified_age_ms = served->object.verified_age_ms;
  Reply r;
  r.body = resp.Encode();
  r.fd = std::move(served->object.fd);
  return r;
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
