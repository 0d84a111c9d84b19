#include "agent/config.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <thread>

#include "agent/durable_bases.h"
#include "cluster/address.h"
#include "cluster/dns_peers.h"
#include "cluster/parity_groups.h"
#include "ops/http_server.h"
#include "os/process.h"
#include "os/files.h"
#include "peer/tcp_socket.h"
#include "tier/budget.h"
#include "wire/socket_path.h"
#include "wire/unix_socket.h"

namespace tierckpt::agent {
namespace {

constexpr const char* kVersion = "0.1.0";

Status RangeError(const char* flag, int64_t value, int64_t lo, int64_t hi) {
  return InvalidArgument(std::string(flag) + " " + std::to_string(value) + " is out of range; use " +
                         std::to_string(lo) + ".." + std::to_string(hi));
}

void AddOptions(CLI::App& app, AgentConfig& c) {
  app.set_config("--config", "", "read options from an INI/TOML file (keys = flag names)", false);
  app.add_option("--socket", c.socket_path, "Unix socket to listen on (default: $TIERCKPT_SOCKET, "
                                            "$XDG_RUNTIME_DIR/tierckpt/agent.sock, /run/tierckpt/agent.sock for root, "
                                            "/tmp/tierckpt-<uid>/agent.sock; its directory must be yours alone)");
  app.add_option("--root", c.root, "tmpfs directory of the memory tier (default /dev/shm/tierckpt-<uid>)");
  app.add_option("--memory-budget", c.memory_budget,
                 "memory tier capacity: bytes, \"512MiB\", \"8GiB\" or \"25%\" of RAM (default 25%)");
  app.add_option("--keep-last", c.keep_last, "committed steps kept in memory per namespace (default 3, min 1)");
  app.add_option("--durable", c.durable_url, "durable tier URL: file:///dir, /dir, mem://name (default none)");
  app.add_option("--durable-allow", c.durable_allow,
                 "durable bases jobs may choose for their namespace instead of --durable, as patterns: "
                 "s3://team-bucket/*,/mnt/fsx/* (default none: every job persists to --durable; "
                 "docs/agent.md, \"Per-job durable bases\")")
      ->delimiter(',');
  app.add_option("--persist-every", c.persist_every,
                 "persist steps whose number is a multiple of N (default 0 = only on request)");
  app.add_option("--durable-keep", c.durable_keep, "durable steps kept per namespace (default 0 = all)");
  app.add_option("--persist-threads", c.persist_threads, "background persist threads (default 2)");
  app.add_option("--verify-threads", c.verify_threads,
                 "threads hashing sealed objects (default: a quarter of the cores, 1..8; here " +
                     std::to_string(DefaultVerifyThreads()) + ")");
  app.add_flag("--verify-on-seal,!--no-verify-on-seal", c.verify_on_seal,
               "hash again objects whose client sent a checksum (default false: the client's checksum, "
               "computed from the bytes it wrote, is trusted; objects sealed without one are always hashed)");
  app.add_flag("--commit-before-hash,!--no-commit-before-hash", c.commit_before_hash,
               "commit a step without waiting for the agent's hash of objects sealed without a checksum "
               "(default true; every reader of the step waits for the hash instead, decision 68)");
  app.add_option("--node-id", c.node_id, "node id recorded in manifests (default: host name)");
  app.add_option("--log-level", c.log_level, "debug|info|warn|error (default info)");
  app.add_option("--log-file", c.log_file, "append logs to this file (default stderr)");
  app.add_option("--pid-file", c.pid_file, "write the agent's pid here while it runs");
  app.add_option("--shutdown-grace", c.shutdown_grace_s,
                 "seconds running persists may take at shutdown (default 30)");
  app.add_option("--peers", c.peers_file,
                 "every agent of the job: a hostfile (`node_id host:port [domain=D]` per line), or slurm:PORT for "
                 "the nodes of the Slurm job (SLURM_JOB_NODELIST) at that port, or dns:NAME:PORT for the "
                 "addresses a DNS name has (a Kubernetes headless Service), each agent's node id learned from "
                 "its handshake (default: single node)");
  app.add_option("--peer-listen", c.peer_listen,
                 "address to accept peers on (default: this node's hostfile address; with dns: 0.0.0.0:PORT)");
  app.add_option("--peers-count", c.peers_count,
                 "with --peers dns: the agents to wait for at start, this one included (default 0: every "
                 "address the name has, once all of them answer)");
  app.add_option("--peers-wait", c.peers_wait_s,
                 "with --peers dns: seconds the start waits for the agents before failing (default 300)");
  app.add_option("--peers-refresh", c.peers_refresh_s,
                 "with --peers dns: seconds between re-resolutions that find a replaced node at its new "
                 "address (default 10; 0 = off)");
  app.add_option("--peer-secret-file", c.peer_secret_file,
                 "file holding the cluster secret shared by every agent (required with --peers)");
  app.add_option("--replicas", c.replicas, "copies of each step, this node's included (default 2; 1 = none)");
  app.add_option("--replica-spacing", c.replica_spacing, "ring distance between replicas (default 1)");
  app.add_option("--replica-ack", c.replica_ack,
                 "all: a commit returns once every replica is verified (default); none: replicate after commit");
  app.add_option(
      "--redundancy", c.redundancy,
      "rs:K+M or xor:K: also fold each committed part into its group's parity on M other agents "
      "(experimental: a lost part of a step is rebuilt from its group's survivors once the step is "
      "redundant, which a commit waits for under --parity-ack all; needs --peers with >= K+M agents; with "
      "--replicas 1 parity is the only copy on peers)");
  app.add_option(
      "--parity-ack", c.parity_ack,
      "with --redundancy: all: a commit returns once its group's parity is sealed on every holder "
      "(the step redundant); none: send the parity after the commit (default: all with --replicas 1, "
      "none beside replicas)");
  app.add_option("--commit-fan-out", c.commit_fan_out,
                 "children per node of the tree a commit spanning nodes goes down (default 16)");
  app.add_option("--peer-timeout-ms", c.peer_timeout_ms,
                 "connect, handshake and each read from a peer, in ms (default 30000)");
  app.add_option("--takeover-after", c.takeover_after_s,
                 "seconds a durable step spanning nodes waits for a member's part before asking it, then the "
                 "holders of its replicas, to upload it (default 60)");
  app.add_option("--metrics-listen", c.metrics_listen,
                 "serve Prometheus metrics (/metrics) and a readiness probe (/healthz) at HOST:PORT "
                 "(default off; prefer 127.0.0.1:PORT, docs/operations.md)");
  app.add_option(
      "--http-listen", c.http_listen,
      "serve the in-memory checkpoint HTTP API (amzn-sagemaker-checkpointing's InMemoryCheckpointClient) "
      "at HOST:PORT (default off; docs/http-api.md)");
  app.add_option("--http-allow", c.http_allow,
                 "client networks allowed to use --http-listen, e.g. 10.0.0.0/8,::1 (required for an address "
                 "other than loopback; 0.0.0.0/0,::/0 allows any)")
      ->delimiter(',');
  app.add_option("--http-host", c.http_hosts,
                 "Host names clients of --http-listen may use besides IP addresses, localhost, this "
                 "machine's hostname and HyperPod's service name, e.g. agent.pod.svc (requests naming "
                 "another host are refused: DNS rebinding; * allows any)")
      ->delimiter(',');
  app.add_option("--preallocate", c.preallocate,
                 "bytes (or N% of the budget) of the segment pool written at start in the background, so the "
                 "first saves and restores skip fresh tmpfs pages (default 0 = off)");
  app.add_option("--preallocate-segment", c.preallocate_segment,
                 "size of the preallocated segments; match your objects' size (default 256MiB)");
  app.add_option("--persist-rate", c.persist_rate,
                 "cap on the bytes per second uploaded to the durable tier by all persist threads together, "
                 "e.g. 200M or 1GiB (default 0 = unlimited); slows time to durable, spares the training's "
                 "cores and disk");
  app.add_option("--replicate-rate", c.replicate_rate,
                 "cap on the bytes per second of this node's steps streamed to the peers replicating them "
                 "(default 0 = unlimited)");
  app.add_option("--background-priority", c.background_priority,
                 "CPU/IO priority of the persist, replication-queue, preallocation and scrub threads: "
                 "normal, low (nice 10, I/O best-effort 7; default) or idle (SCHED_IDLE, I/O idle)");
  app.add_option("--scrub-interval", c.scrub_interval,
                 "re-hash every committed memory step this often at background priority, repairing a corrupt "
                 "copy from a replica holder or the durable tier; lets attested reads skip their hash: 600, "
                 "90s, 10m, 1h (default 10m; 0 = off)");
  app.add_option("--parts-wait", c.parts_wait_s,
                 "seconds before a durable step spanning nodes fails for want of parts (default 3600)");
  app.add_flag("--foreground")->description("accepted for compatibility; tierckptd always runs in the foreground");
  app.set_version_flag("--version", std::string("tierckptd ") + kVersion);
}

}  // namespace

int DefaultVerifyThreads(unsigned cores) {
  if (cores == 0) cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(cores / 4, 1u, 8u));
}

std::string DefaultAgentRoot() { return "/dev/shm/tierckpt-" + std::to_string(::getuid()); }

Status PrepareSocketDir(const std::string& socket_path) {
  std::string dir = DirName(socket_path);
  Status s = MakeDirs(dir, 0700);
  if (!s.ok()) {
    return s.WithContext("creating the directory of socket " + socket_path +
                         " (choose another path with --socket or TIERCKPT_SOCKET)");
  }
  // Clients trust only an agent whose socket directory nobody else controls.
  return wire::CheckSocketDir(dir, ::geteuid())
      .WithContext("tierckptd will not listen on " + socket_path);
}

namespace {

// An HTTP API has no peer credentials: off loopback, the operator names who may call it.
Status CheckHttpListen(const AgentConfig& c) {
  Result<AllowList> allow = AllowList::Parse(c.http_allow);
  if (!allow.ok()) return allow.status().WithContext("--http-allow");
  if (c.http_listen.empty()) {
    if (!c.http_allow.empty()) return InvalidArgument("--http-allow needs --http-listen");
    if (!c.http_hosts.empty()) return InvalidArgument("--http-host needs --http-listen");
    return Status::Ok();
  }
  for (const std::string& h : c.http_hosts) {
    auto name_char = [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '*';
    };
    const bool ok = !h.empty() && h.size() <= 253 && std::all_of(h.begin(), h.end(), name_char);
    if (!ok || (h.find('*') != std::string::npos && h != "*")) {
      return InvalidArgument("--http-host entry \"" + h.substr(0, 100) +
                             "\" is not a host name; give names like agent.svc.cluster.local, or * for any");
    }
  }
  Result<peer::HostPort> hp = peer::ParseHostPort(c.http_listen);
  if (!hp.ok()) return hp.status().WithContext("--http-listen");
  const bool loopback = hp->host == "localhost" || hp->host == "::1" || hp->host.rfind("127.", 0) == 0;
  if (!loopback && c.http_allow.empty()) {
    return InvalidArgument("--http-listen " + c.http_listen +
                           " is not a loopback address, and the HTTP API cannot tell its callers apart (no "
                           "credentials): name the client networks with --http-allow (e.g. the pod network "
                           "10.0.0.0/8; 0.0.0.0/0,::/0 for any), or listen on 127.0.0.1");
  }
  return Status::Ok();
}

// Jobs' own bases are written with the agent's credentials: only where the
// operator allowed, and beside a default base (the tier persists or not as a whole).
Status CheckDurableAllow(const AgentConfig& c) {
  Result<DurableAllowList> allow = DurableAllowList::Parse(c.durable_allow);
  if (!allow.ok()) return allow.status().WithContext("--durable-allow");
  if (!allow->empty() && c.durable_url.empty()) {
    return InvalidArgument("--durable-allow " + allow->ToString() +
                           " needs --durable: jobs that name no base of their own persist there");
  }
  return Status::Ok();
}

// --preallocate: bytes, or a percent of the (resolved) budget, at most the
// budget; --preallocate-segment: bytes, 1 MiB..64 GiB.
Status ResolvePreallocate(AgentConfig* c) {
  if (c->preallocate.find('%') != std::string::npos) {
    TC_ASSIGN_OR_RETURN(c->preallocate_bytes, ResolveBudget(c->preallocate, c->budget_bytes, "--preallocate"));
  } else {
    TC_ASSIGN_OR_RETURN(c->preallocate_bytes, ParseByteSize(c->preallocate, "--preallocate"));
  }
  if (c->preallocate_bytes > c->budget_bytes) {
    return InvalidArgument("--preallocate " + c->preallocate + " is " + FormatBytes(c->preallocate_bytes) +
                           ", more than the memory budget (" + FormatBytes(c->budget_bytes) +
                           "); lower it or raise --memory-budget");
  }
  TC_ASSIGN_OR_RETURN(c->preallocate_segment_bytes, ParseByteSize(c->preallocate_segment, "--preallocate-segment"));
  if (c->preallocate_segment_bytes < (1ull << 20) || c->preallocate_segment_bytes > (64ull << 30)) {
    return InvalidArgument("--preallocate-segment " + c->preallocate_segment + " is " +
                           FormatBytes(c->preallocate_segment_bytes) + "; use 1MiB to 64GiB, about the size of "
                           "the objects you save (a DCP rank file)");
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> ParseRate(const std::string& text, const char* flag) {
  std::string_view t = text;
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  if (t.size() >= 2 && (t.substr(t.size() - 2) == "/s" || t.substr(t.size() - 2) == "/S")) t.remove_suffix(2);
  Result<uint64_t> parsed = ParseByteSize(t, flag);
  if (!parsed.ok() || t.find('%') != std::string_view::npos) {
    return InvalidArgument(std::string(flag) + " \"" + text.substr(0, 40) +
                           "\" is not a rate; use 0 (unlimited) or bytes per second: 209715200, 200M, 1GiB, "
                           "500MB/s");
  }
  const uint64_t bytes = *parsed;
  if (bytes != 0 && bytes < kMinRateBytes) {
    return InvalidArgument(std::string(flag) + " " + text + " is " + FormatBytes(bytes) +
                           " per second; use 0 (unlimited) or at least 1MiB/s (a stream chunk of 1 MiB must "
                           "move well within the peer timeout)");
  }
  return bytes;
}

Result<uint64_t> ParseDurationMs(const std::string& text, const char* flag) {
  auto bad = [&] {
    return InvalidArgument(
        std::string(flag) + " \"" + text.substr(0, 40) +
        "\" is not a duration; use a number with an optional unit: 600 (seconds), 90s, 10m, "
        "1.5h, 1d, 500ms, or 0");
  };
  std::string t = text;
  while (!t.empty() && t.back() == ' ') t.pop_back();
  size_t end = 0;
  while (end < t.size() && (std::isdigit(static_cast<unsigned char>(t[end])) || t[end] == '.')) ++end;
  if (end == 0) return bad();
  const std::string digits = t.substr(0, end);
  char* parsed_end = nullptr;
  const double number = std::strtod(digits.c_str(), &parsed_end);
  if (parsed_end != digits.c_str() + digits.size()) return bad();
  const std::string unit = t.substr(end);
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1000;
  } else if (unit == "ms") {
    scale = 1;
  } else if (unit == "m" || unit == "min") {
    scale = 60'000;
  } else if (unit == "h") {
    scale = 3'600'000;
  } else if (unit == "d") {
    scale = 86'400'000;
  } else {
    return bad();
  }
  const double ms = number * scale;
  if (!(ms >= 0) || ms > 1e15) return bad();
  return static_cast<uint64_t>(ms + 0.5);
}

Status FinalizeAgentConfig(AgentConfig* c, uint64_t physical_ram) {
  if (c->socket_path.empty()) c->socket_path = wire::DefaultSocketPath();
  if (c->root.empty()) c->root = DefaultAgentRoot();
  if (c->node_id.empty()) c->node_id = HostName();
  if (c->socket_path.size() >= 108) {
    return InvalidArgument("--socket " + c->socket_path + " is " + std::to_string(c->socket_path.size()) +
                           " bytes; Unix socket paths must be shorter than 108 bytes, choose a shorter path");
  }
  if (c->root.empty() || c->root == "/") {
    return InvalidArgument("--root \"" + c->root + "\" is not usable; give a dedicated directory on a tmpfs");
  }
  if (physical_ram == 0) physical_ram = PhysicalMemoryBytes();
  TC_ASSIGN_OR_RETURN(c->budget_bytes, ResolveBudget(c->memory_budget, physical_ram, "--memory-budget"));
  if (c->keep_last < 1 || c->keep_last > 1000000) return RangeError("--keep-last", c->keep_last, 1, 1000000);
  TC_RETURN_IF_ERROR(ResolvePreallocate(c));
  if (c->persist_threads < 1 || c->persist_threads > 64) {
    return RangeError("--persist-threads", c->persist_threads, 1, 64);
  }
  if (c->verify_threads < 1 || c->verify_threads > 64) {
    return RangeError("--verify-threads", c->verify_threads, 1, 64);
  }
  if (c->shutdown_grace_s < 0 || c->shutdown_grace_s > 3600) {
    return RangeError("--shutdown-grace", c->shutdown_grace_s, 0, 3600);
  }
  TC_ASSIGN_OR_RETURN(c->persist_rate_bytes, ParseRate(c->persist_rate, "--persist-rate"));
  TC_ASSIGN_OR_RETURN(c->replicate_rate_bytes, ParseRate(c->replicate_rate, "--replicate-rate"));
  Result<ThreadPriority> priority = ParseThreadPriority(c->background_priority);
  if (!priority.ok()) return priority.status().WithContext("--background-priority");
  c->background_priority_value = *priority;
  TC_ASSIGN_OR_RETURN(c->scrub_interval_ms, ParseDurationMs(c->scrub_interval, "--scrub-interval"));
  constexpr uint64_t kMinScrubMs = 100, kMaxScrubMs = 7ull * 86'400'000;
  if (c->scrub_interval_ms != 0 &&
      (c->scrub_interval_ms < kMinScrubMs || c->scrub_interval_ms > kMaxScrubMs)) {
    return InvalidArgument("--scrub-interval " + c->scrub_interval + " is " +
                           std::to_string(c->scrub_interval_ms) +
                           " ms; use 0 (off) or 100ms to 7d (default 10m)");
  }
  Result<LogLevel> level = ParseLogLevel(c->log_level);
  if (!level.ok()) return level.status().WithContext("--log-level");
  if (c->replicas < 1 || c->replicas > 16) return RangeError("--replicas", c->replicas, 1, 16);
  if (c->commit_fan_out < 1 || c->commit_fan_out > 1024) {
    return RangeError("--commit-fan-out", c->commit_fan_out, 1, 1024);
  }
  if (c->replica_spacing < 1 || c->replica_spacing > 1024) {
    return RangeError("--replica-spacing", c->replica_spacing, 1, 1024);
  }
  if (c->peer_timeout_ms < 100 || c->peer_timeout_ms > 600000) {
    return RangeError("--peer-timeout-ms", c->peer_timeout_ms, 100, 600000);
  }
  if (c->takeover_after_s < 1 || c->takeover_after_s > 86400) {
    return RangeError("--takeover-after", c->takeover_after_s, 1, 86400);
  }
  if (c->parts_wait_s < 1 || c->parts_wait_s > 604800) return RangeError("--parts-wait", c->parts_wait_s, 1, 604800);
  if (c->peers_count > 65536) return RangeError("--peers-count", c->peers_count, 0, 65536);
  if (c->peers_wait_s < 1 || c->peers_wait_s > 86400) return RangeError("--peers-wait", c->peers_wait_s, 1, 86400);
  if (c->peers_refresh_s > 3600) return RangeError("--peers-refresh", c->peers_refresh_s, 0, 3600);
  if (cluster::IsDnsPeers(c->peers_file)) {
    Result<cluster::DnsPeersSpec> dns = cluster::ParseDnsPeers(c->peers_file);
    if (!dns.ok()) return dns.status();
    if (c->peer_listen.empty()) c->peer_listen = "0.0.0.0:" + std::to_string(dns->port);
  }
  if (!c->redundancy.empty()) {
    // Decision 135: nothing accepts a scheme it would not honour. Decision
    // 142: every lost part, of a step on one node or spanning nodes, is
    // rebuilt from parity (decisions 139, 141), so replicas are no longer
    // required beside it (--replicas 1 is parity alone).
    Result<cluster::Redundancy> r = cluster::ParseRedundancy(c->redundancy);
    if (!r.ok()) return r.status().WithContext("--redundancy");
    if (r->kind == cluster::Redundancy::Kind::kReplicas) {
      return InvalidArgument("--redundancy " + c->redundancy + ": use --replicas " + std::to_string(r->replicas) +
                             " (--redundancy takes only erasure codes: rs:K+M or xor:K)");
    }
    if (c->peers_file.empty()) {
      return InvalidArgument("--redundancy " + c->redundancy + " needs --peers: the parity of a group of " +
                             std::to_string(r->k) + " agents is held by " + std::to_string(r->m) +
                             " others, so at least " + std::to_string(r->k + r->m) +
                             " agents must be listed in the peer hostfile");
    }
    c->redundancy_value = *r;
  }
  // Decision 146: when a commit waits for its group's parity.
  if (!c->parity_ack.empty() && c->parity_ack != "all" && c->parity_ack != "none") {
    return InvalidArgument("--parity-ack " + c->parity_ack +
                           ": use \"all\" (a commit waits until its group's parity is sealed) or \"none\"");
  }
  if (!c->parity_ack.empty() && !c->redundancy_value.has_value()) {
    return InvalidArgument(
        "--parity-ack " + c->parity_ack +
        " needs --redundancy rs:K+M: it says whether a commit waits for its group's parity, "
        "and without --redundancy there is none (--replica-ack is the policy for replicas)");
  }
  if (c->parity_ack.empty() && c->redundancy_value.has_value()) {
    // Parity alone is the only copy on peers: a commit should not return before it protects the step.
    c->parity_ack = c->replicas <= 1 ? "all" : "none";
  }
  if (c->replica_ack != "all" && c->replica_ack != "none") {
    return InvalidArgument("--replica-ack " + c->replica_ack +
                           ": use \"all\" (a commit waits for every replica) or \"none\"");
  }
  if (!c->peers_file.empty() && c->peer_secret_file.empty()) {
    return InvalidArgument("--peers " + c->peers_file + " needs --peer-secret-file: agents authenticate each "
                           "other with a shared secret (e.g. `head -c 32 /dev/urandom > secret`, the same file "
                           "on every node, mode 0600)");
  }
  if (c->peers_file.empty() && (!c->peer_listen.empty() || !c->peer_secret_file.empty())) {
    return InvalidArgument("--peer-listen and --peer-secret-file need --peers (the hostfile of every agent)");
  }
  TC_RETURN_IF_ERROR(CheckHttpListen(*c));
  TC_RETURN_IF_ERROR(CheckDurableAllow(*c));
  // Node ids name peers in placements (src/cluster), so they follow its rule.
  if (Status id = cluster::ValidateNodeId(c->node_id); !id.ok()) {
    return id.WithContext("--node-id (default: the host name)");
  }
  return Status::Ok();
}

Result<CommandLine> ParseAgentCommandLine(const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  argv.reserve(args.size());
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseAgentCommandLine(static_cast<int>(argv.size()), argv.data());
}

Result<CommandLine> ParseAgentCommandLine(int argc, const char* const* argv) {
  CommandLine out;
  CLI::App app("tierckptd — the tierckpt node agent (memory tier, durable persistence)", "tierckptd");
  AddOptions(app, out.config);
  // CLI11 reports errors by exception; they stop here, at the edge of the core.
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.exit_now = true;
    out.text = app.help();
    return out;
  } catch (const CLI::CallForVersion&) {
    out.exit_now = true;
    out.text = std::string("tierckptd ") + kVersion + "\n";
    return out;
  } catch (const CLI::Error& e) {
    return InvalidArgument(std::string(e.what()) + " (see `tierckptd --help`)");
  }
  if (auto* opt = app.get_config_ptr(); opt != nullptr && opt->count() > 0) {
    out.config.config_file = opt->as<std::string>();
  }
  TC_RETURN_IF_ERROR(FinalizeAgentConfig(&out.config));
  return out;
}

}  // namespace tierckpt::agent
