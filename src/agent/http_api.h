// http_api.h — the in-memory checkpoint HTTP API of tierckptd (--http-listen),
// the one amzn-sagemaker-checkpointing 1.1.3's InMemoryCheckpointClient
// speaks to HyperPod's memory service, so that library runs on tierckpt
// unchanged (docs/http-api.md has every route, status and body):
//
//   GET|POST|DELETE /v1/cp/namespaces/{ns}            POST ?num_ranks=N&steps_retained=K
//   GET|POST|DELETE /v1/cp/checkpoints/{ns}/{rank}/{step}   header Shard-Meta
//   GET             /v1/cp/checkpoints/{ns}/latest?limit=N
//   POST            /v1/cp/cluster/reset
//   GET             /health
//
// How it maps onto the memory tier (decision 71):
//   * a namespace is a tier namespace; its steps_retained is the tier's
//     retention for it (MemoryTier::SetNamespaceKeep);
//   * the shard of rank R of step S is the object "rank_<R>" of step S. The
//     body streams from the socket into the object's shared memory (one copy,
//     hashed XXH3-64 and XXH3-128 on the way: http_shard_meta.h); a body whose
//     digest differs from its Shard-Meta, or that ends early (the client went
//     away), is dropped and nothing of it is visible;
//   * a step commits, through the same CommitOnNode as a native commit
//     (replication, --persist-every, retention), when its last missing rank
//     is posted: num_ranks shards, data and metadata ranks together. Until
//     then it is invisible: GET answers 404, latest does not list it. A step
//     is written by this API only (its tier writer id kHttpWriter);
//   * a shard posted again while its step is being written replaces the
//     earlier one (a retry, or a new attempt after a crash); a committed step
//     is immutable (409); DELETE of a shard of a committed step drops the
//     whole step from memory (it could not be loaded any more);
//   * an older step of the namespace still being written when a newer one
//     commits is an abandoned attempt: it is aborted;
//   * GET reads through ReadPath (memory, then replicas, then durable,
//     restoring into memory), checks the bytes against the tier's checksum
//     before the first byte is sent, and sends the XXH3-128 of what it hashed.
//
// Errors are JSON {"detail": "<what failed, where, what to do>"} with 400 for
// bad input, 404 for absent, 409 for conflicts, 411 without Content-Length,
// 507 when the memory budget cannot hold the shard, 503 while stopping.
//
// Thread safety: the server's threads call in concurrently; mu_ guards the
// steps being written and is never held across a tier call.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "agent/http_namespaces.h"
#include "agent/read_path.h"
#include "common/mutex.h"
#include "ops/http_server.h"
#include "replication/cluster.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

// The tier writer id of steps written through HTTP: '*' keeps it out of the
// client ids' alphabet (wire/protocol.h), so no native client owns one.
inline constexpr std::string_view kHttpWriter = "*http";

struct HttpApiDeps {
  MemoryTier* tier = nullptr;     // required
  ReadPath* read_path = nullptr;  // required
  Cluster* cluster = SingleNodeCluster();
  std::string root;  // the tier's root: where the namespaces file lives
};

// The host name of HyperPod's memory service, the library's default URL
// (docs/http-api.md): a Host the API always accepts (HttpServer's screen).
inline constexpr std::string_view kHyperPodServiceHost = "ai-toolkit-gossip-headless.aws-hyperpod.svc.cluster.local";

struct HttpApiOptions {
  AllowList allow;               // --http-allow; empty: any client that can connect
  // --http-host: Host names accepted besides IP addresses, localhost, this
  // machine's hostname and kHyperPodServiceHost ("*": any).
  std::vector<std::string> hosts;
  size_t threads = 32;           // concurrent requests (one shard upload each)
  uint64_t max_shard_bytes = 0;  // the memory budget
};

class HttpApi {
 public:
  // Reads the namespaces file and applies each namespace's retention.
  static Result<std::unique_ptr<HttpApi>> Create(HttpApiDeps deps, HttpApiOptions options);
  ~HttpApi();

  Status Start(const std::string& address) { return http_->Start(address); }
  std::string address() const { return http_->address(); }
  void Stop() { http_->Stop(); }

  // The shard object's name for a rank.
  static std::string ShardName(uint32_t rank) { return "rank_" + std::to_string(rank); }

 private:
  HttpApi(HttpApiDeps deps, HttpApiOptions options, std::unique_ptr<HttpNamespaces> namespaces);
  void AddRoutes();

  // A step being written through HTTP.
  struct Shard {
    bool writing = false;  // a request is streaming its body now
    bool sealed = false;
  };
  struct Pending {
    std::map<uint32_t, Shard> shards;
    bool committing = false;
    bool aborting = false;  // its last shard went: the tier's empty step is being dropped
  };
  using StepKey = std::pair<std::string, uint64_t>;

  // Routes (http_api.cc).
  void GetNamespace(const httplib::Request& req, httplib::Response& res);
  void CreateNamespace(const httplib::Request& req, httplib::Response& res);
  void DeleteNamespace(const httplib::Request& req, httplib::Response& res);
  void GetShard(const httplib::Request& req, httplib::Response& res);
  void DeleteShard(const httplib::Request& req, httplib::Response& res);
  void Latest(const httplib::Request& req, httplib::Response& res);
  void Reset(const httplib::Request& req, httplib::Response& res);
  // The upload (http_api_post.cc).
  void PostShard(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& body);
  // Claims (ns, step, rank) for a body: false (and *why) if it cannot be written now.
  bool ClaimShard(const std::string& ns, uint64_t step, uint32_t rank, Status* why);
  // The claim ends; sealed: the shard is in. Returns the step's shard names
  // when it is now complete (the caller commits), nullopt otherwise.
  std::optional<std::vector<std::string>> ReleaseShard(const std::string& ns, uint64_t step, uint32_t rank,
                                                       bool sealed, uint32_t num_ranks);
  // Drops the tier's step when no shard of it is left (a refused or deleted
  // last shard), so no empty step lingers.
  void AbortIfEmpty(const std::string& ns, uint64_t step);
  Status CommitComplete(const std::string& ns, uint64_t step, uint32_t num_ranks,
                        std::vector<std::string> names);

  // Drops every memory step of ns (committed or being written).
  Status DropNamespaceSteps(const std::string& ns);

  const HttpApiDeps d_;
  const HttpApiOptions options_;
  std::unique_ptr<HttpNamespaces> namespaces_;
  Mutex mu_;
  std::map<StepKey, Pending> pending_ GUARDED_BY(mu_);
  std::unique_ptr<HttpServer> http_;  // last: stopped (its threads joined) first
};

}  // namespace tierckpt::agent
