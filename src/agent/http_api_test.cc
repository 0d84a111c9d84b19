// HttpApi — the checkpoint HTTP API over a real memory tier, called with
// httplib's client: namespaces, uploads that commit a step on its last shard,
// Shard-Meta checks both ways, replacement, immutability, retention, deletes,
// reset, bad input, an upload cut short, and an agent restart.
#include "agent/http_api.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/http_shard_meta.h"
#include "peer/tcp_socket.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

std::string Filled(size_t n, char c) { return std::string(n, c); }
using testing::TierHarness;

std::string Digest128(const std::string& data) {
  ShardHasher h;
  h.Update(data.data(), data.size());
  return h.Digest128();
}

std::string Meta(const std::string& data) { return FormatShardMeta(Digest128(data)); }

struct Api {
  explicit Api(uint64_t budget = 64u << 20, uint32_t keep_last = 10) : h(budget, keep_last) { Start(); }
  void Start() {
    read_path =
        std::make_unique<ReadPath>(ReadPathDeps{"node-t", h.tier.get(), nullptr, SingleNodeCluster()});
    HttpApiOptions o;
    o.max_shard_bytes = h.options.budget_bytes;
    Result<std::unique_ptr<HttpApi>> a =
        HttpApi::Create(HttpApiDeps{h.tier.get(), read_path.get(), SingleNodeCluster(), h.options.root}, o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    api = std::move(a).value();
    ASSERT_TRUE(api->Start("127.0.0.1:0").ok());
    client = std::make_unique<httplib::Client>("http://" + api->address());
  }
  void Restart() {
    client.reset();
    api.reset();
    ASSERT_TRUE(h.Reopen().ok());
    Start();
  }
  httplib::Result Post(const std::string& path, const std::string& body, const std::string& meta) {
    httplib::Headers headers;
    if (!meta.empty()) headers.emplace("Shard-Meta", meta);
    return client->Post(path.c_str(), headers, body, "application/octet-stream");
  }
  httplib::Result PostShard(const std::string& ns, uint32_t rank, uint64_t step, const std::string& body) {
    return Post("/v1/cp/checkpoints/" + ns + "/" + std::to_string(rank) + "/" + std::to_string(step), body,
                Meta(body));
  }
  httplib::Result Get(const std::string& path) { return client->Get(path.c_str()); }
  void CreateNamespace(const std::string& ns, int ranks, int keep = 3) {
    auto r = client->Post(("/v1/cp/namespaces/" + ns + "?num_ranks=" + std::to_string(ranks) +
                           "&steps_retained=" + std::to_string(keep))
                              .c_str());
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  TierHarness h;
  std::unique_ptr<ReadPath> read_path;
  std::unique_ptr<HttpApi> api;
  std::unique_ptr<httplib::Client> client;
};

std::string Detail(const httplib::Result& r) {
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  return j.is_object() && j.contains("detail") ? j["detail"].get<std::string>()
                                               : "<no detail: " + r->body + ">";
}

TEST(ShardMetaTest, DigestsAreWhatPythonsXxhashSpells) {
  // base64.b64encode(xxhash.xxh3_128(b"hello").digest()), and of b"".
  EXPECT_EQ(Digest128("hello"), "tenBrQcbPn/Hec+qXlI4GA==");
  EXPECT_EQ(Digest128(""), "maoG0wFHmNhgAcMkRo1Jfw==");
  Result<std::optional<std::string>> m = ParseShardMeta(Meta("hello"));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(**m, "tenBrQcbPn/Hec+qXlI4GA==");
  EXPECT_FALSE(ParseShardMeta("")->has_value());
  for (const char* bad : {"nope", R"({"algorithm":"xxh3_128"})", R"({"checksum":"abc"})",
                          R"({"checksum":"tenBrQcbPn/Hec+qXlI4GA==","algorithm":"md5"})"}) {
    EXPECT_EQ(ParseShardMeta(bad).status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(HttpApiTest, NamespacesAreCreatedOnceReadAndDeleted) {
  Api a;
  auto r = a.Get("/v1/cp/namespaces/job");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(Detail(r).find("namespace 'job' not found"), std::string::npos);
  a.CreateNamespace("job", 3, 2);
  r = a.Get("/v1/cp/namespaces/job");
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body),
            nlohmann::json({{"num_ranks", 3}, {"steps_to_retain_per_rank", 2}}));
  r = a.client->Post("/v1/cp/namespaces/job?num_ranks=3");
  EXPECT_EQ(r->status, 409);
  EXPECT_NE(Detail(r).find("already exists"), std::string::npos);
  EXPECT_EQ(a.client->Post("/v1/cp/namespaces/job2")->status, 400);  // num_ranks is required
  EXPECT_EQ(a.client->Post("/v1/cp/namespaces/job2?num_ranks=x")->status, 400);
  EXPECT_EQ(a.client->Post("/v1/cp/namespaces/job2?num_ranks=0")->status, 400);
  EXPECT_EQ(a.client->Post("/v1/cp/namespaces/..?num_ranks=1")->status, 400);
  EXPECT_EQ(a.client->Delete("/v1/cp/namespaces/job")->status, 200);
  EXPECT_EQ(a.client->Delete("/v1/cp/namespaces/job")->status, 404);
  EXPECT_EQ(a.Get("/health")->body, R"({"status":"healthy"})");
  // In absolute form, as sent to a proxy (HTTP_PROXY pointed at the agent).
  EXPECT_EQ(a.Get("http://ai-toolkit-gossip-headless.aws-hyperpod.svc.cluster.local:9200/health")->body,
            R"({"status":"healthy"})");
  a.CreateNamespace("viaproxy", 2);
  EXPECT_EQ(a.Get("http://membrain:9200/v1/cp/namespaces/viaproxy")->status, 200);
}

TEST(HttpApiTest, AStepCommitsOnItsLastShardAndServesItsBytesWithTheirDigest) {
  Api a;
  a.CreateNamespace("job", 3);
  const std::string d0 = Filled(300000, 'a'), d1 = Filled(5, 'b'), meta = "metadata!";
  auto r = a.PostShard("job", 0, 10, d0);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(nlohmann::json::parse(r->body)["committed"].get<bool>());
  ASSERT_EQ(a.PostShard("job", 1, 10, d1)->status, 200);
  // Not complete: invisible.
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/10")->status, 404);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/latest")->body, "[]");
  EXPECT_FALSE(a.h.tier->HasCommitted("job", 10));
  r = a.PostShard("job", 2, 10, meta);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(nlohmann::json::parse(r->body)["committed"].get<bool>());
  EXPECT_TRUE(a.h.tier->HasCommitted("job", 10));
  Result<Manifest> m = a.h.tier->GetManifest("job", 10);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->objects.size(), 3u);
  EXPECT_EQ(m->world_size, 3u);
  r = a.Get("/v1/cp/checkpoints/job/0/10");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->body, d0);
  EXPECT_EQ(r->get_header_value("Shard-Meta"), Meta(d0));
  EXPECT_EQ(r->get_header_value("Content-Length"), std::to_string(d0.size()));
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/2/10")->body, meta);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/latest")->body, "[10]");
  // Committed: immutable.
  r = a.PostShard("job", 1, 10, "other");
  EXPECT_EQ(r->status, 409);
  EXPECT_NE(Detail(r).find("is committed"), std::string::npos) << Detail(r);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/1/10")->body, d1);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/1/11")->status, 404);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/nobody/latest")->status, 404);
}

TEST(HttpApiTest, ABadDigestOrASecondPostReplacesNothingVisibleAndRetentionKeepsStepsRetained) {
  Api a;
  a.CreateNamespace("job", 2, 2);
  auto r = a.Post("/v1/cp/checkpoints/job/0/1", "abc", Meta("abd"));
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(Detail(r).find("does not match its Shard-Meta checksum"), std::string::npos) << Detail(r);
  EXPECT_EQ(a.Post("/v1/cp/checkpoints/job/0/1", "abc", "{garbage")->status, 400);
  EXPECT_EQ(a.h.tier->Stats().object_bytes, 0u);    // nothing of them kept
  EXPECT_TRUE(a.h.tier->ListSteps("job").empty());  // not even an empty step
  // A shard posted twice while its step is written: the second copy counts.
  ASSERT_EQ(a.PostShard("job", 0, 1, "first attempt")->status, 200);
  ASSERT_EQ(a.PostShard("job", 0, 1, "second")->status, 200);
  ASSERT_EQ(a.PostShard("job", 1, 1, "m")->status, 200);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/1")->body, "second");
  // A shard without Shard-Meta is accepted; GET still sends the digest.
  ASSERT_EQ(a.Post("/v1/cp/checkpoints/job/0/2", "x", "")->status, 200);
  ASSERT_EQ(a.PostShard("job", 1, 2, "m")->status, 200);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/2")->get_header_value("Shard-Meta"), Meta("x"));
  for (uint64_t step = 3; step <= 4; ++step) {
    ASSERT_EQ(a.PostShard("job", 0, step, "d")->status, 200);
    ASSERT_EQ(a.PostShard("job", 1, step, "m")->status, 200);
  }
  // steps_retained 2, though the tier keeps 10 by default.
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/latest?limit=5")->body, "[4,3]");
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/latest?limit=1")->body, "[4]");
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/latest?limit=-1")->status, 400);
  // Bad input.
  EXPECT_EQ(a.PostShard("job", 2, 5, "d")->status, 400);  // rank outside num_ranks
  EXPECT_NE(Detail(a.PostShard("job", 2, 5, "d")).find("num_ranks 2"), std::string::npos);
  EXPECT_EQ(a.PostShard("nobody", 0, 5, "d")->status, 404);
  EXPECT_EQ(a.Post("/v1/cp/checkpoints/job/x/5", "d", "")->status, 400);
  EXPECT_EQ(a.Post("/v1/cp/checkpoints/job/0/-5", "d", "")->status, 400);
}

TEST(HttpApiTest, AnOlderStepLeftHalfWrittenIsAbortedWhenANewerOneCommits) {
  Api a;
  a.CreateNamespace("job", 2);
  ASSERT_EQ(a.PostShard("job", 0, 5, "crashed attempt")->status, 200);
  ASSERT_EQ(a.PostShard("job", 0, 6, "d")->status, 200);
  ASSERT_EQ(a.PostShard("job", 1, 6, "m")->status, 200);
  bool step5_left = false;
  for (const StepInfo& s : a.h.tier->ListSteps("job")) step5_left |= s.step == 5;
  EXPECT_FALSE(step5_left);
}

TEST(HttpApiTest, DeletesDropAShardOfAStepBeingWrittenOrAWholeCommittedStep) {
  Api a;
  a.CreateNamespace("job", 2);
  ASSERT_EQ(a.PostShard("job", 0, 1, "d")->status, 200);
  EXPECT_EQ(a.client->Delete("/v1/cp/checkpoints/job/0/1")->status, 200);
  EXPECT_EQ(a.client->Delete("/v1/cp/checkpoints/job/0/1")->status, 404);
  EXPECT_TRUE(a.h.tier->ListSteps("job").empty());
  ASSERT_EQ(a.PostShard("job", 1, 1, "m")->status, 200);
  EXPECT_FALSE(a.h.tier->HasCommitted("job", 1));  // rank 0 is missing again
  ASSERT_EQ(a.PostShard("job", 0, 1, "d2")->status, 200);
  EXPECT_TRUE(a.h.tier->HasCommitted("job", 1));
  auto r = a.client->Delete("/v1/cp/checkpoints/job/1/1");
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(nlohmann::json::parse(r->body)["step_dropped"].get<bool>());
  EXPECT_FALSE(a.h.tier->HasCommitted("job", 1));
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/1")->status, 404);
}

TEST(HttpApiTest, ResetDropsEveryNamespaceAndItsMemorySteps) {
  Api a;
  a.CreateNamespace("a", 1);
  a.CreateNamespace("b", 1);
  ASSERT_EQ(a.PostShard("a", 0, 1, "x")->status, 200);
  ASSERT_EQ(a.PostShard("b", 0, 1, "y")->status, 200);
  ASSERT_EQ(a.client->Post("/v1/cp/cluster/reset")->status, 200);
  EXPECT_EQ(a.Get("/v1/cp/namespaces/a")->status, 404);
  EXPECT_FALSE(a.h.tier->HasCommitted("a", 1));
  EXPECT_FALSE(a.h.tier->HasCommitted("b", 1));
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/a/latest")->status, 404);
}

TEST(HttpApiTest, AFullBudgetIs507AndNothingIsKept) {
  Api a(/*budget=*/1 << 20);
  a.CreateNamespace("job", 1);
  ASSERT_EQ(a.PostShard("job", 0, 1, Filled(600000, 'a'))->status, 200);
  // The newest committed step is never evicted: no room for another.
  auto r = a.PostShard("job", 0, 2, Filled(600000, 'b'));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 507) << r->body;
  EXPECT_NE(Detail(r).find("budget"), std::string::npos) << Detail(r);
  // Larger than the whole budget: refused, its body discarded (507 naming
  // the budget, or the library's 413 when it stops reading first).
  r = a.PostShard("job", 0, 3, Filled(2 << 20, 'z'));
  if (r) {
    EXPECT_TRUE(r->status == 507 || r->status == 413) << r->status << " " << r->body;
    EXPECT_NE(r->body.find("budget"), std::string::npos) << r->body;
  }
  EXPECT_EQ(a.h.tier->Stats().object_bytes, 600000u);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/1")->body, Filled(600000, 'a'));  // still serving
}

TEST(HttpApiTest, ABodyCutShortLeavesNothingAndTheShardCanBePostedAgain) {
  Api a;
  a.CreateNamespace("job", 1);
  const std::string body = Filled(200000, 'q');
  {
    Result<std::unique_ptr<peer::ByteChannel>> c =
        peer::TcpDial(a.api->address(), peer::Millis(3000), peer::SocketOptions{});
    ASSERT_TRUE(c.ok());
    const std::string head = "POST /v1/cp/checkpoints/job/0/1 HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                             std::to_string(body.size()) + "\r\nShard-Meta: " + Meta(body) + "\r\n\r\n";
    const std::string part = head + body.substr(0, 50000);
    peer::ConstBuffer buf{part.data(), part.size()};
    ASSERT_TRUE((*c)->Write({&buf, 1}, peer::Millis(3000)).ok());
    (*c)->Shutdown();  // the client goes away mid-body
  }
  // The server notices the end of the body and drops what it had; until
  // then a second upload of the shard is told to retry (409).
  httplib::Result r = a.PostShard("job", 0, 1, body);
  for (int i = 0; i < 500 && r && r->status == 409; ++i) {
    EXPECT_FALSE(a.h.tier->HasCommitted("job", 1));
    usleep(10000);
    r = a.PostShard("job", 0, 1, body);
  }
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/1")->body, body);
}

TEST(HttpApiTest, NamespacesAndStepsOutliveARestartOnTheSameRoot) {
  Api a;
  a.CreateNamespace("job", 1, 1);
  ASSERT_EQ(a.PostShard("job", 0, 1, "one")->status, 200);
  a.Restart();
  auto r = a.Get("/v1/cp/namespaces/job");
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["steps_to_retain_per_rank"], 1);
  EXPECT_EQ(a.Get("/v1/cp/checkpoints/job/0/1")->body, "one");
  ASSERT_EQ(a.PostShard("job", 0, 2, "two")->status, 200);
  // steps_retained 1, applied again: retention drops step 1 just after step 2's commit is answered
  // (the drop is logged after the 200), so the listing is polled for it, up to 5 s.
  std::string latest = a.Get("/v1/cp/checkpoints/job/latest")->body;
  for (int i = 0; i < 500 && latest != "[2]"; ++i) {
    usleep(10000);
    latest = a.Get("/v1/cp/checkpoints/job/latest")->body;
  }
  EXPECT_EQ(latest, "[2]");
}

}  // namespace
}  // namespace tierckpt::agent
