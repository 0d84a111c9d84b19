// config.h — AgentConfig, the configuration of tierckptd, and its parsing
// from flags and an optional config file.
//
// Every field is set by a flag of the same name (--keep-last) or, with
// --config FILE, by a key of the same name in an INI/TOML file
// (`keep-last = 5`); flags win over the file. docs/agent.md lists them all.
//
//   field            flag               default
//   socket_path      --socket           wire::DefaultSocketPath()
//   root             --root             /dev/shm/tierckpt-<uid>
//   memory_budget    --memory-budget    "25%" (bytes, "512MiB", "8GiB" or % of RAM)
//   keep_last        --keep-last        3 (committed steps kept in memory per namespace, >= 1)
//   durable_url      --durable          "" (none); file:///path, /path, mem://name
//   durable_allow    --durable-allow    none; bases jobs may bind their namespace to instead
//                                      ("s3://team-bucket/*,/mnt/fsx/*"; agent/durable_bases.h)
//   persist_every    --persist-every    0 (only on request); N: steps whose number % N == 0
//   durable_keep     --durable-keep     0 (keep all durable steps); M: keep the newest M
//   persist_threads  --persist-threads  2 (1..64)
//   verify_threads   --verify-threads   DefaultVerifyThreads() (1..64) threads hashing sealed objects
//   verify_on_seal   --verify-on-seal   false (trust checksums the client computed from the bytes it
//                                      wrote; objects sealed without one are always hashed)
//   commit_before_hash --commit-before-hash true (commit answers before the agent's hash of objects
//                                      sealed without a checksum; readers wait for it: decision 68)
//   node_id          --node-id          the host name
//   log_level        --log-level        info (debug|info|warn|error)
//   log_file         --log-file         "" (stderr)
//   pid_file         --pid-file         "" (none)
//   shutdown_grace_s --shutdown-grace   30 seconds for running persists at shutdown
//   peers_file       --peers            "" (single node); a hostfile of every agent (docs/replication.md),
//                                      slurm:PORT or dns:NAME:PORT (docs/placement.md)
//   peer_listen      --peer-listen      this node's hostfile address ("host:port" to bind instead);
//                                      with dns: 0.0.0.0:PORT
//   peers_count      --peers-count      0; with dns: the agents to wait for at start, this one included
//                                      (0 = every address NAME has, once all answer)
//   peers_wait_s     --peers-wait       300 seconds the start waits for them (dns:; 1..86400)
//   peers_refresh_s  --peers-refresh    10 seconds between re-resolutions of NAME that find a replaced
//                                      node at its new address (dns:; 0 = off, ..3600)
//   peer_secret_file --peer-secret-file "" ; required with --peers: the cluster secret (16..4096 bytes)
//   replicas         --replicas         2 (copies of each step, this node's included; 1 = none)
//   replica_spacing  --replica-spacing  1 (ring distance between replicas)
//   replica_ack      --replica-ack      all (commit waits for every replica) | none
//   redundancy       --redundancy       "" (none); rs:K+M or xor:K (= rs:K+1): each committed part is
//                                      also folded into its group's parity on M other agents (issue 23).
//                                      Experimental: a lost part of a step (on one node or spanning
//                                      nodes) is rebuilt from its group's survivors (decisions 139, 141);
//                                      accepted with --peers and any --replicas, 1 included (decision
//                                      142); replicas:R is refused (use --replicas R). Fewer
//                                      than K+M agents in --peers is refused at start.
//   parity_ack       --parity-ack       with --redundancy only (refused without): all (a commit returns
//                                      once its group's parity is sealed on every holder, bounded by
//                                      --peer-timeout-ms + 1 s) | none (sent after the commit, decision
//                                      136); default all with --replicas 1, none beside replicas
//                                      (decision 146)
//   commit_fan_out   --commit-fan-out   16 (children per node of the tree a commit spanning nodes goes
//                                      down, decision 102; 1..1024)
//   peer_timeout_ms  --peer-timeout-ms  30000 (connect, handshake and each read from a peer; 100..600000)
//   takeover_after_s --takeover-after   60 seconds a durable step spanning nodes waits for a member's
//                                      part before asking it, then its replica holders (1..86400)
//   parts_wait_s     --parts-wait       3600 seconds before such a step fails for want of parts (1..604800)
//   metrics_listen   --metrics-listen   "" (off); "127.0.0.1:9464": Prometheus /metrics and /healthz
//   http_listen      --http-listen      "" (off); "127.0.0.1:9200": the in-memory checkpoint HTTP API
//                                      (agent/http_api.h, docs/http-api.md)
//   http_allow       --http-allow       client networks of that API ("10.0.0.0/8,::1"); required when
//                                      --http-listen is not a loopback address ("0.0.0.0/0" = any)
//   http_hosts       --http-host        Host names of that API besides IP addresses, localhost, the
//                                      hostname and HyperPod's service name ("*" = any; decision 73)
//   preallocate      --preallocate      "0" (off); bytes or "N%" of the budget written into the segment
//                                      pool at start, in the background (docs/agent.md, "Preallocation")
//   preallocate_segment --preallocate-segment "256MiB" (1MiB..64GiB): the size of those segments
//   persist_rate     --persist-rate     "0" (unlimited); bytes per second of durable uploads, all persist
//                                      threads together ("200M", "1GiB", an optional "/s"; >= 1MiB)
//   replicate_rate   --replicate-rate   "0" (unlimited); bytes per second of this node's steps streamed
//                                      to the peers that replicate them (>= 1MiB)
//   background_priority --background-priority low (normal|low|idle): CPU and I/O priority of the
//                                      persist, replication-queue, preallocation and scrub threads
//   scrub_interval   --scrub-interval   "10m" (0 = off): re-hash every committed memory step this often,
//                                      at background priority, repairing corrupt copies (agent/scrubber.h);
//                                      a duration: 600, 600s, 10m, 1h, 500ms (>= 100ms, <= 7d)
//
// The agent never daemonizes itself; `tierckpt agent start` detaches it.
//
// Functions are thread-safe except that ParseAgentCommandLine reads the
// environment (TIERCKPT_SOCKET, XDG_RUNTIME_DIR) and the host name.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cluster/parity_groups.h"
#include "common/log.h"
#include "os/thread_priority.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// Threads hashing sealed objects by default: a quarter of the cores, at
// least 1, at most 8 (cores = std::thread::hardware_concurrency() when 0).
// One thread hashes through a kept mapping at ~20 GB/s, faster than one
// client's two copy threads fill objects (copy + hash, ~14 GB/s on the 2-core
// VM), so one keeps up with one writer; hashing competes with those copy
// threads for cores, so small machines get one. Big nodes with many ranks
// saving at once get more. docs/agent.md has the measurements.
int DefaultVerifyThreads(unsigned cores = 0);

struct AgentConfig {
  std::string socket_path;             // "" = wire::DefaultSocketPath()
  std::string root;                    // "" = DefaultAgentRoot()
  std::string memory_budget = "25%";   // the spec as given
  uint64_t budget_bytes = 0;           // resolved by FinalizeAgentConfig
  uint32_t keep_last = 3;
  std::string durable_url;
  std::vector<std::string> durable_allow;
  uint64_t persist_every = 0;
  uint32_t durable_keep = 0;
  int persist_threads = 2;
  int verify_threads = DefaultVerifyThreads();
  bool verify_on_seal = false;
  bool commit_before_hash = true;
  std::string node_id;                 // "" = host name
  std::string log_level = "info";
  std::string log_file;
  std::string pid_file;
  int shutdown_grace_s = 30;
  std::string peers_file;
  std::string peer_listen;
  std::string peer_secret_file;
  uint32_t replicas = 2;
  uint32_t replica_spacing = 1;
  std::string replica_ack = "all";
  std::string redundancy;  // "" = none; decision 135
  std::optional<cluster::Redundancy> redundancy_value;  // resolved by FinalizeAgentConfig (rs:K+M only)
  // "" until FinalizeAgentConfig: then, with --redundancy, "all" | "none"
  // (default all with --replicas 1, none beside replicas; decision 146).
  std::string parity_ack;
  uint32_t commit_fan_out = 16;  // kDefaultCommitFanOut (replication/commit_tree.h)
  uint32_t peer_timeout_ms = 30000;
  uint32_t peers_count = 0;
  uint32_t peers_wait_s = 300;
  uint32_t peers_refresh_s = 10;
  uint32_t takeover_after_s = 60;
  uint32_t parts_wait_s = 3600;
  std::string metrics_listen;
  std::string http_listen;
  std::vector<std::string> http_allow;
  std::vector<std::string> http_hosts;
  std::string preallocate = "0";            // the spec as given
  uint64_t preallocate_bytes = 0;           // resolved by FinalizeAgentConfig
  std::string preallocate_segment = "256MiB";
  uint64_t preallocate_segment_bytes = 0;   // resolved by FinalizeAgentConfig
  std::string persist_rate = "0";           // the spec as given
  uint64_t persist_rate_bytes = 0;          // resolved by FinalizeAgentConfig; 0 = unlimited
  std::string replicate_rate = "0";         // the spec as given
  uint64_t replicate_rate_bytes = 0;        // resolved by FinalizeAgentConfig; 0 = unlimited
  std::string background_priority = "low";
  ThreadPriority background_priority_value = ThreadPriority::kLow;  // resolved by FinalizeAgentConfig
  std::string scrub_interval = "10m";                               // the spec as given
  uint64_t scrub_interval_ms = 600'000;  // resolved by FinalizeAgentConfig; 0 = no scrub
  std::string config_file;             // the --config file read, "" if none
};

// /dev/shm/tierckpt-<uid>
std::string DefaultAgentRoot();
// Creates the socket's parent directory with mode 0700 if missing, then
// refuses it (kPermissionDenied naming its owner and mode) unless
// wire::CheckSocketDir trusts it for this process's uid: a real directory
// owned by us or root that neither group nor others may write, under
// ancestors nobody else can rename.
Status PrepareSocketDir(const std::string& socket_path);

struct CommandLine {
  AgentConfig config;
  bool exit_now = false;  // --help or --version: print `text` and exit 0
  std::string text;
};

// Parses argv (argv[0] is the program name) and the --config file, then
// FinalizeAgentConfig. kInvalidArgument naming the flag on any bad value.
Result<CommandLine> ParseAgentCommandLine(int argc, const char* const* argv);
Result<CommandLine> ParseAgentCommandLine(const std::vector<std::string>& args);

// Fills defaults (socket, root, node id), resolves the budget, validates
// ranges and the log level. physical_ram = 0 means PhysicalMemoryBytes().
Status FinalizeAgentConfig(AgentConfig* config, uint64_t physical_ram = 0);

// A --persist-rate / --replicate-rate value: "0" (unlimited) or bytes per
// second as ParseByteSize takes them ("200M", "1GiB", "500MB"), with an
// optional "/s"; at least kMinRateBytes. kInvalidArgument naming flag.
constexpr uint64_t kMinRateBytes = 1ull << 20;
Result<uint64_t> ParseRate(const std::string& text, const char* flag);

// A duration in milliseconds: a number with an optional unit ms, s (the
// default), m, h or d ("600", "90s", "10m", "1.5h", "500ms"). kInvalidArgument
// naming flag and the accepted forms otherwise.
Result<uint64_t> ParseDurationMs(const std::string& text, const char* flag);

}  // namespace tierckpt::agent
