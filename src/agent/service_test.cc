// The agent behind a real listening socket, driven with raw frames.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "agent/agent.h"
#include "agent/service.h"
#include "ops/recent_errors.h"
#include "os/files.h"
#include "tier/tier_test_util.h"
#include "wire/protocol.h"
#include "wire/unix_socket.h"

namespace tierckpt::agent {
namespace {

using nlohmann::json;
using testing::ChecksumOf;
using testing::ReadFd;
using testing::TempDir;
using wire::MsgType;

std::string StepPayload(const std::string& ns, uint64_t step) {
  wire::StepRequest r;
  r.ns = ns;
  r.step = step;
  return r.Encode();
}

class RawConn {
 public:
  explicit RawConn(const std::string& socket) {
    Result<UniqueFd> fd = wire::ConnectUnix(socket);
    EXPECT_TRUE(fd.ok()) << fd.status().ToString();
    if (fd.ok()) fd_ = std::move(fd).value();
  }
  int fd() const { return fd_.get(); }

  Result<wire::Frame> Call(MsgType type, const std::string& payload) {
    uint32_t id = next_id_++;
    TC_RETURN_IF_ERROR(wire::SendFrame(fd_.get(), static_cast<uint16_t>(type), id, payload));
    TC_ASSIGN_OR_RETURN(wire::Frame f, wire::RecvFrame(fd_.get(), 10000));
    EXPECT_EQ(f.header.request_id, id);
    EXPECT_EQ(f.header.type, static_cast<uint16_t>(type) | wire::kResponseBit);
    return f;
  }
  // The response body, or the agent's error.
  Result<std::string> Body(MsgType type, const std::string& payload) {
    TC_ASSIGN_OR_RETURN(wire::Frame f, Call(type, payload));
    return wire::DecodeResponse(f.payload);
  }
  Result<json> Json(MsgType type, const std::string& payload) {
    TC_ASSIGN_OR_RETURN(std::string body, Body(type, payload));
    TC_ASSIGN_OR_RETURN(wire::JsonBody jb, wire::JsonBody::Decode(body));
    json j = json::parse(jb.json, nullptr, false);
    if (j.is_discarded()) return Internal("not JSON: " + jb.json);
    return j;
  }
  Result<wire::HelloResponse> Hello() {
    wire::HelloRequest h;
    h.pid = static_cast<uint32_t>(::getpid());
    h.client = "service_test";
    TC_ASSIGN_OR_RETURN(std::string body, Body(MsgType::kHello, h.Encode()));
    return wire::HelloResponse::Decode(body);
  }
  // True when the agent closed the connection.
  bool Closed() {
    Result<wire::Frame> f = wire::RecvFrame(fd_.get(), 5000);
    return !f.ok() && f.status().code() == Code::kUnavailable;
  }

 private:
  UniqueFd fd_;
  uint32_t next_id_ = 1;
};

class AgentHarness {
 public:
  explicit AgentHarness(const std::function<void(AgentConfig&)>& tweak = {}) {
    static std::atomic<int> counter{0};
    config.root = dir.Sub("root");
    config.socket_path = dir.Sub("run/agent.sock");
    config.memory_budget = "64MiB";
    config.durable_url = "mem://service-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    config.node_id = "node-s";
    config.shutdown_grace_s = 5;
    if (tweak) tweak(config);
    EXPECT_TRUE(FinalizeAgentConfig(&config).ok());
    agent = std::make_unique<Agent>(config);
    start = agent->Start(/*handle_signals=*/false);
    if (start.ok()) thread = std::thread([this] { agent->Run(); });
  }
  ~AgentHarness() {
    agent->Stop();
    if (thread.joinable()) thread.join();
  }

  TempDir dir;
  AgentConfig config;
  std::unique_ptr<Agent> agent;
  Status start;
  std::thread thread;
};

// Writes one object through the socket: CreateObject (fd) → pwrite → Seal.
void WriteOverSocket(RawConn& c, const std::string& ns, uint64_t step, const std::string& name,
                     const std::string& data) {
  wire::CreateObjectRequest cr;
  cr.ns = ns;
  cr.step = step;
  cr.name = name;
  cr.size = data.size();
  Result<wire::Frame> f = c.Call(MsgType::kCreateObject, cr.Encode());
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(wire::DecodeResponse(f->payload).ok()) << wire::DecodeResponse(f->payload).status().ToString();
  ASSERT_TRUE(f->fd.valid());
  ASSERT_TRUE(PwriteAll(f->fd.get(), data.data(), data.size(), 0, name).ok());
  wire::SealObjectRequest sr;
  sr.ns = ns;
  sr.step = step;
  sr.name = name;
  sr.size = data.size();
  sr.checksum = "";
  Result<std::string> sealed = c.Body(MsgType::kSealObject, sr.Encode());
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
}

Result<json> Commit(RawConn& c, const std::string& ns, uint64_t step, bool persist) {
  wire::CommitStepRequest r;
  r.ns = ns;
  r.step = step;
  r.world_size = 1;
  r.persist = persist;
  return c.Json(MsgType::kCommitStep, r.Encode());
}

TEST(ServiceTest, HelloMustComeFirst) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  wire::ListRequest l;
  Result<std::string> r = c.Body(MsgType::kList, l.Encode());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("Hello"), std::string::npos);
  EXPECT_TRUE(c.Closed());
}

TEST(ServiceTest, WriteCommitAndReadOverTheSocket) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  Result<wire::HelloResponse> hello = c.Hello();
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  EXPECT_EQ(hello->node_id, "node-s");
  EXPECT_EQ(hello->agent_version, "0.1.0");
  EXPECT_EQ(hello->root, a.config.root);
  EXPECT_EQ(hello->durable, a.config.durable_url);

  ASSERT_TRUE(c.Body(MsgType::kBeginStep, StepPayload("job", 10)).ok());
  const std::string data(1u << 20, 'd');
  WriteOverSocket(c, "job", 10, "__0_0.distcp", data);
  WriteOverSocket(c, "job", 10, ".metadata", "meta");
  Result<json> m = Commit(c, "job", 10, false);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  Result<Manifest> manifest = Manifest::Parse(m->dump(), "commit response");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_EQ(manifest->objects.size(), 2u);
  // Sealed without a checksum: the commit may answer before the agent's hash
  // (--commit-before-hash, decision 68); the open below waits for it.
  const std::string& answered = manifest->Find("__0_0.distcp")->checksum;
  if (answered.empty()) {
    EXPECT_TRUE(manifest->checksums_pending);
  } else {
    EXPECT_EQ(answered, ChecksumOf(data));
  }

  wire::OpenObjectRequest o;
  o.ns = "job";
  o.step = 10;
  o.name = "__0_0.distcp";
  Result<wire::Frame> f = c.Call(MsgType::kOpenObject, o.Encode());
  ASSERT_TRUE(f.ok());
  Result<std::string> body = wire::DecodeResponse(f->payload);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  Result<wire::OpenObjectResponse> open = wire::OpenObjectResponse::Decode(*body);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->size, data.size());
  EXPECT_EQ(open->checksum, ChecksumOf(data));
  ASSERT_TRUE(f->fd.valid());
  EXPECT_EQ(ReadFd(f->fd.get()), data);
  EXPECT_EQ(::write(f->fd.get(), "x", 1), -1);  // read-only

  wire::ListRequest l;
  l.ns = "job";
  Result<json> list = c.Json(MsgType::kList, l.Encode());
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ((*list)["steps"].size(), 1u);
  EXPECT_EQ((*list)["steps"][0]["namespace"], "job");
  EXPECT_EQ((*list)["steps"][0]["step"], 10);
  EXPECT_EQ((*list)["steps"][0]["memory"], "committed");
  EXPECT_EQ((*list)["steps"][0]["durable"], "");
  EXPECT_EQ((*list)["steps"][0]["objects"], 2);

  Result<json> show = c.Json(MsgType::kShow, StepPayload("job", 10));
  ASSERT_TRUE(show.ok());
  EXPECT_EQ((*show)["memory"], "committed");
  EXPECT_EQ((*show)["manifest"]["step"], 10);

  Result<json> stats = c.Json(MsgType::kStats, "");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ((*stats)["pid"], ::getpid());
  EXPECT_EQ((*stats)["version"], "0.1.0");
  EXPECT_EQ((*stats)["root"], a.config.root);
  EXPECT_EQ((*stats)["committed_steps"], 1);
  EXPECT_EQ((*stats)["connections"], 1);
  EXPECT_EQ((*stats)["namespaces"][0]["newest_memory"], 10);
  EXPECT_EQ((*stats)["namespaces"][0]["memory_steps"], json::array({10}));
  EXPECT_EQ((*stats)["retention"], 3);
  EXPECT_TRUE((*stats)["last_errors"].is_array());
  EXPECT_EQ((*stats)["not_persisted"], json::array());  // filled by failed persists (test_durable_full.py)
  // The background caps and the scrub, at their defaults (docs/agent.md).
  EXPECT_EQ((*stats)["persist_rate_bytes"], 0);  // unlimited
  EXPECT_EQ((*stats)["replicate_rate_bytes"], 0);
  EXPECT_EQ((*stats)["background_priority"], "low");
  EXPECT_EQ((*stats)["scrub"]["interval_ms"], 600'000);
  EXPECT_EQ((*stats)["scrub"]["passes"], 0);  // the first pass is 10 minutes away
  EXPECT_TRUE((*stats)["scrub"]["last_pass_unix_ms"].is_null());
  EXPECT_EQ((*stats)["scrub"]["objects"], 0);
  EXPECT_EQ((*stats)["scrub"]["corrupt"], 0);
  EXPECT_EQ((*stats)["scrub"]["repaired"], 0);

  Result<json> verify = c.Json(MsgType::kVerify, StepPayload("job", 10));
  ASSERT_TRUE(verify.ok());
  EXPECT_EQ((*verify)["ok"], true);
  EXPECT_EQ((*verify)["tiers"]["memory"]["present"], true);
  EXPECT_EQ((*verify)["tiers"]["durable"]["present"], false);
}

TEST(ServiceTest, StatsReportTheBackgroundCapsAndTheScrubsCounters) {
  AgentHarness a([](AgentConfig& c) {
    c.persist_rate = "50MiB";
    c.replicate_rate = "20MiB";
    c.background_priority = "idle";
    c.scrub_interval = "1s";
  });
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  ASSERT_TRUE(c.Body(MsgType::kBeginStep, StepPayload("job", 1)).ok());
  WriteOverSocket(c, "job", 1, "__0_0.distcp", std::string(1u << 16, 'd'));
  WriteOverSocket(c, "job", 1, ".metadata", "meta");
  ASSERT_TRUE(Commit(c, "job", 1, false).ok());
  const uint64_t committed_ms = NowUnixMs();

  Result<json> stats = c.Json(MsgType::kStats, "");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  auto scrubbed = [](const json& j) -> uint64_t {
    auto scrub = j.find("scrub");
    return scrub != j.end() && scrub->is_object() ? scrub->value("objects", uint64_t{0}) : 0;
  };
  // The first pass after the commit hashes both objects.
  while (stats.ok() && scrubbed(*stats) < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    stats = c.Json(MsgType::kStats, "");
  }
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ((*stats)["persist_rate_bytes"], 50u << 20);
  EXPECT_EQ((*stats)["replicate_rate_bytes"], 20u << 20);
  EXPECT_EQ((*stats)["background_priority"], "idle");
  const json& scrub = (*stats)["scrub"];
  EXPECT_EQ(scrub["interval_ms"], 1000);
  EXPECT_GE(scrub["passes"].get<uint64_t>(), 1u) << scrub.dump();
  EXPECT_GE(scrub["objects"].get<uint64_t>(), 2u) << scrub.dump();
  ASSERT_TRUE(scrub["last_pass_unix_ms"].is_number_unsigned()) << scrub.dump();
  EXPECT_GE(scrub["last_pass_unix_ms"].get<uint64_t>(), committed_ms) << scrub.dump();
  EXPECT_EQ(scrub["corrupt"], 0);
  EXPECT_EQ(scrub["repaired"], 0);
}

TEST(ServiceTest, MalformedFramesCloseOnlyThatConnection) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn good(a.config.socket_path);
  ASSERT_TRUE(good.Hello().ok());

  {  // bad magic
    RawConn bad(a.config.socket_path);
    const char junk[16] = "not a frame....";
    ASSERT_EQ(::send(bad.fd(), junk, sizeof(junk), MSG_NOSIGNAL), 16);
    Result<wire::Frame> f = wire::RecvFrame(bad.fd(), 5000);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(wire::DecodeResponse(f->payload).status().code(), Code::kProtocolError);
    EXPECT_TRUE(bad.Closed());
  }
  {  // oversized payload_len: rejected from the header, the payload is never read
    RawConn big(a.config.socket_path);
    wire::FrameHeader h;
    h.type = static_cast<uint16_t>(MsgType::kHello);
    h.request_id = 5;
    h.payload_len = wire::kMaxPayload + 1;
    uint8_t raw[wire::kFrameHeaderSize];
    wire::EncodeHeader(h, raw);
    ASSERT_EQ(::send(big.fd(), raw, sizeof(raw), MSG_NOSIGNAL), 16);
    Result<wire::Frame> f = wire::RecvFrame(big.fd(), 5000);
    ASSERT_TRUE(f.ok());
    Status st = wire::DecodeResponse(f->payload).status();
    EXPECT_EQ(st.code(), Code::kProtocolError);
    EXPECT_TRUE(big.Closed());
  }
  {  // unknown type: answered with its request id
    RawConn unk(a.config.socket_path);
    ASSERT_TRUE(unk.Hello().ok());
    ASSERT_TRUE(wire::SendFrame(unk.fd(), 99, 77, "").ok());
    Result<wire::Frame> f = wire::RecvFrame(unk.fd(), 5000);
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->header.request_id, 77u);
    EXPECT_EQ(wire::DecodeResponse(f->payload).status().code(), Code::kProtocolError);
    EXPECT_TRUE(unk.Closed());
  }
  {  // undecodable payload
    RawConn trunc(a.config.socket_path);
    ASSERT_TRUE(trunc.Hello().ok());
    Result<std::string> r = trunc.Body(MsgType::kBeginStep, "\x05");
    EXPECT_EQ(r.status().code(), Code::kProtocolError);
    EXPECT_TRUE(trunc.Closed());
  }
  // The well-behaved client never noticed.
  wire::ListRequest l;
  EXPECT_TRUE(good.Json(MsgType::kList, l.Encode()).ok());
  Result<json> stats = good.Json(MsgType::kStats, "");
  ASSERT_TRUE(stats.ok());
  ASSERT_FALSE((*stats)["last_errors"].empty());
  EXPECT_TRUE((*stats)["last_errors"][0].is_string());
  EXPECT_NE((*stats)["last_errors"][0].get<std::string>().find("protocol error"), std::string::npos);
}

TEST(ServiceTest, HostileNamesGetClearErrorsAndTheConnectionStays) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  Result<std::string> r = c.Body(MsgType::kBeginStep, StepPayload("../../etc", 1));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  wire::CreateObjectRequest cr;
  cr.ns = "job";
  cr.step = 1;
  cr.name = "../../../escape";
  cr.size = 10;
  EXPECT_EQ(c.Body(MsgType::kCreateObject, cr.Encode()).status().code(), Code::kInvalidArgument);
  cr.name = std::string("a\0b", 3);
  EXPECT_EQ(c.Body(MsgType::kCreateObject, cr.Encode()).status().code(), Code::kInvalidArgument);
  wire::OpenObjectRequest o;
  o.ns = "job";
  o.step = 1;
  o.name = "/etc/passwd";
  EXPECT_EQ(c.Body(MsgType::kOpenObject, o.Encode()).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(c.Body(MsgType::kShow, StepPayload("job", 99999999999ull)).status().code(), Code::kInvalidArgument);
  wire::ListRequest l;
  EXPECT_TRUE(c.Json(MsgType::kList, l.Encode()).ok());
  EXPECT_FALSE(StatPath(a.dir.Sub("escape"))->exists);
}

TEST(ServiceTest, WriterDisconnectDropsItsPartialStep) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  const std::string partial = Layout(a.config.root).PartialDir("job", 3);
  {
    RawConn c(a.config.socket_path);
    ASSERT_TRUE(c.Hello().ok());
    WriteOverSocket(c, "job", 3, "a", "aaaa");
    EXPECT_TRUE(StatPath(partial)->exists);
  }
  for (int i = 0; i < 200 && StatPath(partial)->exists; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_FALSE(StatPath(partial)->exists);
  EXPECT_FALSE(a.agent->tier()->HasCommitted("job", 3));
}

TEST(ServiceTest, PersistWaitDurableAndRestoreOnOpen) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  WriteOverSocket(c, "job", 1, "a", "first");
  ASSERT_TRUE(Commit(c, "job", 1, /*persist=*/true).ok());
  wire::WaitDurableRequest w;
  w.ns = "job";
  w.step = 1;
  w.timeout_ms = 10000;
  Result<std::string> waited = c.Body(MsgType::kWaitDurable, w.Encode());
  ASSERT_TRUE(waited.ok()) << waited.status().ToString();

  WriteOverSocket(c, "job", 2, "a", "second");
  ASSERT_TRUE(Commit(c, "job", 2, false).ok());
  w.step = 2;
  Status never = c.Body(MsgType::kWaitDurable, w.Encode()).status();
  EXPECT_EQ(never.code(), Code::kFailedPrecondition);
  EXPECT_EQ(never.message(),
            "persistence of job/2 was never requested; call Persist or commit with persist=true");
  w.step = 3;
  EXPECT_EQ(c.Body(MsgType::kWaitDurable, w.Encode()).status().code(), Code::kNotFound);
  ASSERT_TRUE(c.Body(MsgType::kPersist, StepPayload("job", 2)).ok());
  w.step = 2;
  EXPECT_TRUE(c.Body(MsgType::kWaitDurable, w.Encode()).ok());

  // Memory loses step 1 (tmpfs wiped, say): OpenObject restores it from durable.
  wire::DeleteStepRequest d;
  d.ns = "job";
  d.step = 1;
  Result<json> deleted = c.Json(MsgType::kDeleteStep, d.Encode());
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ((*deleted)["deleted"], json::parse(R"([{"namespace":"job","step":1,"tier":"memory"}])"));
  EXPECT_FALSE(a.agent->tier()->HasCommitted("job", 1));
  wire::OpenObjectRequest o;
  o.ns = "job";
  o.step = 1;
  o.name = "a";
  Result<wire::Frame> f = c.Call(MsgType::kOpenObject, o.Encode());
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(wire::DecodeResponse(f->payload).ok()) << wire::DecodeResponse(f->payload).status().ToString();
  EXPECT_EQ(ReadFd(f->fd.get()), "first");
  EXPECT_TRUE(a.agent->tier()->HasCommitted("job", 1));
  o.step = 7;
  Status missing = c.Body(MsgType::kOpenObject, o.Encode()).status();
  EXPECT_EQ(missing.code(), Code::kNotFound);
  EXPECT_NE(missing.message().find("step job/7 is in no tier; `tierckpt ls job` lists what exists"), std::string::npos)
      << missing.ToString();

  wire::ListRequest l;
  l.ns = "job";
  Result<json> list = c.Json(MsgType::kList, l.Encode());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)["steps"].size(), 2u);
  EXPECT_EQ((*list)["steps"][0]["durable"], "committed");
  EXPECT_EQ((*list)["steps"][1]["durable"], "committed");

  Result<json> verify = c.Json(MsgType::kVerify, StepPayload("job", 1));
  ASSERT_TRUE(verify.ok());
  EXPECT_EQ((*verify)["ok"], true);
  EXPECT_EQ((*verify)["tiers"]["durable"]["ok"], true);

  wire::PruneRequest p;
  p.ns = "job";
  p.keep_memory = 1;
  p.keep_durable = 1;
  Result<json> pruned = c.Json(MsgType::kPrune, p.Encode());
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ((*pruned)["deleted"],
            json::parse(R"([{"namespace":"job","step":1,"tier":"memory"},{"namespace":"job","step":1,"tier":"durable"}])"));
  EXPECT_EQ((*pruned)["keep_memory"], 1);
  EXPECT_TRUE(a.agent->tier()->HasCommitted("job", 2));
}

std::string PolicyPayload(const std::string& ns, uint32_t keep_memory, uint32_t keep_durable,
                          uint64_t persist_every) {
  wire::SetPolicyRequest r;
  r.ns = ns;
  r.keep_memory = keep_memory;
  r.keep_durable = keep_durable;
  r.persist_every = persist_every;
  return r.Encode();
}

// Decision 118: the declared policy is applied at every commit (cadence, memory
// and durable retention) with no Prune; a different one is refused while its
// declarer is connected and accepted once it has gone.
TEST(ServiceTest, SetPolicyIsAppliedAtEveryCommitAndRefusedWhileAnotherHoldsTheNamespace) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  ASSERT_TRUE(c.Body(MsgType::kSetPolicy, PolicyPayload("job", 1, 1, 2)).ok());
  for (uint64_t step = 1; step <= 4; ++step) {
    WriteOverSocket(c, "job", step, "a", "bytes" + std::to_string(step));
    ASSERT_TRUE(Commit(c, "job", step, /*persist=*/false).ok());
  }
  wire::WaitDurableRequest w;
  w.ns = "job";
  w.step = 4;
  w.timeout_ms = 10000;
  ASSERT_TRUE(c.Body(MsgType::kWaitDurable, w.Encode()).ok());  // on the cadence: persisted
  EXPECT_FALSE(a.agent->tier()->HasCommitted("job", 3));  // keep_memory 1
  EXPECT_TRUE(a.agent->tier()->HasCommitted("job", 4));
  wire::ListRequest l;
  l.ns = "job";
  bool durable_kept_one = false;
  for (int i = 0; i < 200 && !durable_kept_one; ++i) {  // durable retention runs after each persist
    Result<json> list = c.Json(MsgType::kList, l.Encode());
    ASSERT_TRUE(list.ok());
    int durable = 0;
    for (const auto& st : (*list)["steps"]) durable += st["durable"] == "committed" ? 1 : 0;
    durable_kept_one = durable == 1;
    if (!durable_kept_one) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(durable_kept_one);

  {
    RawConn other(a.config.socket_path);
    ASSERT_TRUE(other.Hello().ok());
    Status refused = other.Body(MsgType::kSetPolicy, PolicyPayload("job", 3, 1, 2)).status();
    EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
    EXPECT_NE(refused.message().find("keep_memory=1 keep_durable=1 persist_every=2"), std::string::npos)
        << refused.ToString();
    EXPECT_NE(refused.message().find("keep_memory=3 keep_durable=1 persist_every=2"), std::string::npos)
        << refused.ToString();
    EXPECT_TRUE(other.Body(MsgType::kSetPolicy, PolicyPayload("job", 1, 1, 2)).ok());  // the same: joins
  }
  Result<json> stats = c.Json(MsgType::kStats, "");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ((*stats)["policies"], json::parse(R"({"job":{"keep_memory":1,"keep_durable":1,"persist_every":2}})"));
  {
    RawConn c2(a.config.socket_path);  // c still holds the policy
    ASSERT_TRUE(c2.Hello().ok());
    EXPECT_EQ(c2.Body(MsgType::kSetPolicy, PolicyPayload("job", 3, 0, 0)).status().code(),
              Code::kFailedPrecondition);
  }
}

TEST(ServiceTest, SetPolicyWithACadenceNeedsADurableTier) {
  AgentHarness a([](AgentConfig& c) { c.durable_url.clear(); });
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  Status refused = c.Body(MsgType::kSetPolicy, PolicyPayload("job", 0, 0, 5)).status();
  EXPECT_EQ(refused.code(), Code::kFailedPrecondition);
  EXPECT_NE(refused.message().find("no durable tier"), std::string::npos) << refused.ToString();
  EXPECT_TRUE(c.Body(MsgType::kSetPolicy, PolicyPayload("job", 2, 0, 0)).ok());  // memory retention only
}

TEST(ServiceTest, ShutdownRequestStopsTheAgent) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  RawConn c(a.config.socket_path);
  ASSERT_TRUE(c.Hello().ok());
  EXPECT_TRUE(c.Body(MsgType::kShutdown, "").ok());
  a.thread.join();  // Run returns on its own
  EXPECT_FALSE(StatPath(a.config.socket_path)->exists);
}

TEST(ServiceTest, SecondAgentOnTheSameRootIsRefused) {
  AgentHarness a;
  ASSERT_TRUE(a.start.ok()) << a.start.ToString();
  AgentConfig c2 = a.config;
  c2.socket_path = a.dir.Sub("run/other.sock");
  Agent second(c2);
  Status st = second.Start(false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kAlreadyExists);
  EXPECT_NE(st.message().find("another tierckptd (pid " + std::to_string(::getpid()) + ") owns " + a.config.root),
            std::string::npos)
      << st.ToString();
  EXPECT_EQ(ExitCodeFor(st), 2);
}

TEST(ServiceTest, BudgetThatDoesNotFitFailsAtStart) {
  AgentHarness a([](AgentConfig& c) { c.memory_budget = "1000TiB"; });
  ASSERT_FALSE(a.start.ok());
  EXPECT_EQ(a.start.code(), Code::kResourceExhausted);
  EXPECT_NE(a.start.message().find("memory budget 1000.0 TiB does not fit in " + a.config.root), std::string::npos)
      << a.start.ToString();
  EXPECT_EQ(ExitCodeFor(a.start), 2);
  EXPECT_FALSE(StatPath(a.config.socket_path)->exists);
}

class EchoHandler : public RequestHandler {
 public:
  Reply Handle(ConnectionState&, const wire::Frame&) override { return Reply{}; }
  void OnClose(ConnectionState&) override {}
};

TEST(ServiceTest, ConnectionsAboveTheCapAreTurnedAway) {
  TempDir dir;
  EchoHandler handler;
  ServiceOptions so;
  so.socket_path = dir.Sub("cap.sock");
  so.max_connections = 2;
  Service service(so, &handler);
  ASSERT_TRUE(service.Listen().ok());
  std::thread runner([&] { service.Run(); });
  RawConn c1(so.socket_path);
  ASSERT_TRUE(c1.Body(MsgType::kHello, "").ok());
  RawConn c2(so.socket_path);
  ASSERT_TRUE(c2.Body(MsgType::kHello, "").ok());
  RawConn c3(so.socket_path);
  Result<wire::Frame> f = wire::RecvFrame(c3.fd(), 5000);
  ASSERT_TRUE(f.ok());
  Status st = wire::DecodeResponse(f->payload).status();
  EXPECT_EQ(st.code(), Code::kResourceExhausted);
  EXPECT_NE(st.message().find("limit"), std::string::npos);
  EXPECT_TRUE(c3.Closed());
  EXPECT_EQ(service.connections(), 2u);
  service.Stop();
  runner.join();
  EXPECT_FALSE(StatPath(so.socket_path)->exists);
}

// ---- Limits and timeouts (issue 16, items 11 and 12) ----

// Answers every request with an empty body; Hello marks the connection as
// greeted, like the agent's handlers; a Stats request answers big_body.
class HelloHandler : public RequestHandler {
 public:
  Reply Handle(ConnectionState& conn, const wire::Frame& f) override {
    if (f.header.type == static_cast<uint16_t>(MsgType::kHello)) conn.hello_done = true;
    Reply r;
    if (f.header.type == static_cast<uint16_t>(MsgType::kStats)) r.body = big_body;
    return r;
  }
  void OnClose(ConnectionState&) override {}
  std::string big_body;
};

class ServiceRunner {
 public:
  explicit ServiceRunner(const std::function<void(ServiceOptions&)>& tweak) {
    so.socket_path = dir.Sub("limits.sock");
    if (tweak) tweak(so);
    service = std::make_unique<Service>(so, &handler);
    EXPECT_TRUE(service->Listen().ok());
    runner = std::thread([this] { service->Run(); });
  }
  ~ServiceRunner() {
    service->Stop();
    runner.join();
  }
  TempDir dir;
  ServiceOptions so;
  HelloHandler handler;
  std::unique_ptr<Service> service;
  std::thread runner;
};

void SendRaw(int fd, uint16_t type, uint32_t id, uint32_t payload_len, size_t send_bytes) {
  wire::FrameHeader h;
  h.type = type;
  h.request_id = id;
  h.payload_len = payload_len;
  uint8_t buf[wire::kFrameHeaderSize];
  wire::EncodeHeader(h, buf);
  std::string bytes(reinterpret_cast<char*>(buf), sizeof(buf));
  bytes.append(send_bytes, 'p');
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

// The error frame the service sent before closing: its header and status.
struct Refusal {
  wire::FrameHeader header;
  Status status;
};
Refusal ReadRefusal(RawConn& c) {
  Result<wire::Frame> f = wire::RecvFrame(c.fd(), 5000);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  if (!f.ok()) return {{}, f.status()};
  return {f->header, wire::DecodeResponse(f->payload).status()};
}

// Regression (issue 16, item 11): 1,024 idle same-uid connections that never
// sent Hello locked every client out; the oldest of them now make room.
TEST(ServiceTest, IdleConnectionsWithoutHelloDoNotLockOutClients) {
  ServiceRunner r([](ServiceOptions& so) {
    so.max_connections = 32;
    so.max_pending_hello = 8;
  });
  std::vector<std::unique_ptr<RawConn>> idle;
  for (int i = 0; i < 48; ++i) idle.push_back(std::make_unique<RawConn>(r.so.socket_path));
  RawConn real(r.so.socket_path);
  Result<std::string> hello = real.Body(MsgType::kHello, "");
  ASSERT_TRUE(hello.ok()) << hello.status().ToString();
  // The oldest idle connection was told why it was closed.
  Refusal first = ReadRefusal(*idle[0]);
  EXPECT_EQ(first.status.code(), Code::kResourceExhausted) << first.status.ToString();
  EXPECT_NE(first.status.message().find("Hello"), std::string::npos) << first.status.ToString();
  EXPECT_TRUE(idle[0]->Closed());
  EXPECT_LE(r.service->connections(), 32u);
}

TEST(ServiceTest, ConnectionWithoutHelloIsClosedAfterTheHelloTimeout) {
  ServiceRunner r([](ServiceOptions& so) { so.hello_timeout_ms = 100; });
  RawConn idle(r.so.socket_path);
  Refusal why = ReadRefusal(idle);
  EXPECT_EQ(why.status.code(), Code::kTimeout) << why.status.ToString();
  EXPECT_TRUE(idle.Closed());
  // After Hello a connection may stay idle longer than that.
  RawConn greeted(r.so.socket_path);
  ASSERT_TRUE(greeted.Body(MsgType::kHello, "").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(greeted.Body(MsgType::kStats, "").ok());
}

// Regression (issue 16, item 11): a client that sent half a frame header and
// waited held its connection open forever.
TEST(ServiceTest, HalfAFrameHeaderIsDroppedAfterTheFrameTimeout) {
  ServiceRunner r([](ServiceOptions& so) { so.frame_timeout_ms = 100; });
  RawConn c(r.so.socket_path);
  ASSERT_TRUE(c.Body(MsgType::kHello, "").ok());
  ASSERT_EQ(::send(c.fd(), "TCKP\3\0\14\0", 8, MSG_NOSIGNAL), 8);
  Refusal why = ReadRefusal(c);
  EXPECT_EQ(why.status.code(), Code::kTimeout) << why.status.ToString();
  EXPECT_NE(why.status.message().find("only 8 of"), std::string::npos) << why.status.ToString();
  EXPECT_TRUE(c.Closed());
}

// Regression (issue 16, item 12): any request could announce 80 MiB and the
// agent buffered it; each type now has its limit, checked from the header,
// and the refusal carries the request's id so the client reports it.
TEST(ServiceTest, OversizedRequestIsRefusedFromTheHeaderWithItsId) {
  ServiceRunner r({});
  RawConn c(r.so.socket_path);
  ASSERT_TRUE(c.Body(MsgType::kHello, "").ok());
  SendRaw(c.fd(), static_cast<uint16_t>(MsgType::kStats), 7, 1u << 20, 0);
  Refusal why = ReadRefusal(c);
  EXPECT_EQ(why.header.request_id, 7u);
  EXPECT_EQ(why.header.type, static_cast<uint16_t>(MsgType::kStats) | wire::kResponseBit);
  EXPECT_EQ(why.status.code(), Code::kInvalidArgument) << why.status.ToString();
  EXPECT_NE(why.status.message().find(std::to_string(wire::kMaxSmallRequestPayload)), std::string::npos)
      << why.status.ToString();
  EXPECT_TRUE(c.Closed());
}

// Regression (issue 16, item 12): eight connections each sending most of an
// announced 80 MiB grew the agent without bound; what all connections may
// have in flight is capped, and released when a connection goes.
TEST(ServiceTest, RequestBytesInFlightAreBoundedAndReleased) {
  ServiceRunner r([](ServiceOptions& so) { so.max_buffered_request_bytes = 1u << 20; });
  const uint16_t commit = static_cast<uint16_t>(MsgType::kCommitStep);
  auto a = std::make_unique<RawConn>(r.so.socket_path);
  ASSERT_TRUE(a->Body(MsgType::kHello, "").ok());
  SendRaw(a->fd(), commit, 2, 900u << 10, 10);  // admitted, then stalls
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawConn b(r.so.socket_path);
  ASSERT_TRUE(b.Body(MsgType::kHello, "").ok());
  SendRaw(b.fd(), commit, 2, 900u << 10, 0);
  Refusal why = ReadRefusal(b);
  EXPECT_EQ(why.header.request_id, 2u);
  EXPECT_EQ(why.status.code(), Code::kResourceExhausted) << why.status.ToString();
  EXPECT_NE(why.status.message().find("already receiving"), std::string::npos) << why.status.ToString();
  a.reset();  // its bytes are released when it goes
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    RawConn c(r.so.socket_path);
    ASSERT_TRUE(c.Body(MsgType::kHello, "").ok());
    served = c.Body(MsgType::kCommitStep, std::string(900u << 10, 'x')).ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
}

TEST(ServiceTest, ClientThatNeverReadsItsResponseIsDropped) {
  ServiceRunner r([](ServiceOptions& so) { so.send_timeout_ms = 100; });
  r.handler.big_body = std::string(16u << 20, 'b');
  RawConn c(r.so.socket_path);
  ASSERT_TRUE(c.Body(MsgType::kHello, "").ok());
  SendRaw(c.fd(), static_cast<uint16_t>(MsgType::kStats), 2, 0, 0);
  // Never read; the service gives up on it and serves others.
  for (int i = 0; i < 100 && r.service->connections() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(r.service->connections(), 0u);
  r.handler.big_body.clear();
}

}  // namespace
}  // namespace tierckpt::agent
