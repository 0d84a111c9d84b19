// reports.h — the JSON documents the agent answers List, Show, Verify,
// Prune and Stats with (docs/agent.md "Response bodies" is the user copy).
//
//   List    {"steps":[{"namespace","step","bytes","objects","memory","durable",
//            "durable_error"?}], "durable_error"?}
//           memory: "committed" | "writing" | ""   durable: "committed" |
//           "pending" | "failed" | "damaged" | ""
//   Show    {"manifest":{...manifest...},"memory","durable","durable_error"?}
//   Verify  {"namespace","step","ok","tiers":{"memory":V,"durable":V}}
//           V = {"present","ok","state","objects_checked","errors":[str]}
//   Deleted {"deleted":[{"namespace","step","tier"}]}  (DeleteStep; Prune adds
//           "kept_pending":[{"namespace","step"}], "keep_memory", "keep_durable",
//           "errors":[str])
//   Stats   see StatsJson.
// These follow docs/protocol.md, with extra keys clients ignore.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/handlers.h"
#include "agent/scrubber.h"
#include "ops/recent_errors.h"
#include "replication/cluster.h"
#include "tier/budget.h"
#include "tier/memory_tier.h"
#include "tierckpt/manifest.h"

namespace tierckpt::agent {

struct ListEntry {
  std::string ns;
  uint64_t step = 0;
  uint64_t bytes = 0;
  uint32_t objects = 0;
  std::string memory;
  std::string durable;
  std::string durable_error;
  std::string parity;  // this node's parity state of the step, "" without parity (decision 166)
};
std::string ListJson(const std::vector<ListEntry>& steps, const std::string& durable_error);

std::string ShowJson(const Manifest& m, const std::string& memory, const std::string& durable,
                     const std::string& durable_error);

struct TierVerdict {
  bool present = false;
  bool ok = false;
  std::string state;
  uint32_t objects_checked = 0;
  std::vector<std::string> errors;
};
// ok = some tier holds the step and every tier holding it is intact.
std::string VerifyJson(const std::string& ns, uint64_t step, const TierVerdict& memory,
                       const TierVerdict& durable);

struct DeletedStep {
  std::string ns;
  uint64_t step = 0;
  std::string tier;  // "memory" | "durable" | "replica@<holder node>"
};
std::string DeletedJson(const std::vector<DeletedStep>& deleted);

struct PruneReport {
  uint32_t keep_memory = 0;
  uint32_t keep_durable = 0;
  std::vector<DeletedStep> deleted;
  std::vector<std::pair<std::string, uint64_t>> kept_pending;
  std::vector<std::string> errors;
};
std::string PruneJson(const PruneReport& report);

struct NamespaceSummary {
  std::string ns;
  std::vector<uint64_t> memory_steps;  // committed in memory, ascending
  uint64_t memory_bytes = 0;
  std::optional<uint64_t> memory_newest;   // newest committed in memory
  std::optional<uint64_t> durable_newest;  // newest committed in durable
  std::string durable_base;                // its own base (DurableBases), "" = the agent's default
  uint32_t writing_steps = 0;
};
// PeerStatsInput (the "peers" object): replication/cluster.h.

// A committed step in memory whose last persist failed (PersistState::kFailed).
struct NotPersisted {
  std::string ns;
  uint64_t step = 0;
  std::string error;  // why, as the persister reported it
};

struct StatsInput {
  AgentInfo info;
  TierStats tier;
  std::optional<MountSpace> mount;
  std::vector<NamespaceSummary> namespaces;
  std::vector<NotPersisted> not_persisted;  // by namespace, then step
  size_t persist_queued = 0;
  size_t persist_running = 0;
  size_t persist_awaiting_parts = 0;  // steps spanning nodes waiting for the others' parts (decision 152)
  size_t connections = 0;
  std::vector<ErrorRecord> last_errors;
  std::string durable_error;  // listing the durable tier failed
  std::optional<PeerStatsInput> peers;  // nullopt on a single node
  ScrubCounters scrub;
  std::map<std::string, NamespacePolicy> policies;  // declared by writers (SetPolicy)
};
// {"version","pid","node_id","root","socket","durable","budget_bytes",
//  "used_bytes","pool_bytes","tmpfs_free_bytes","retention",
//  "namespaces":[{"namespace","memory_steps":[n],"newest_memory","newest_durable",
//                 "memory_bytes","writing_steps"}],
//  "persist_queue","in_flight_steps","connections","last_errors":[str],
//  "not_persisted":[{"namespace","step","error"}] (committed steps whose last
//  persist failed; the persister tries them again),
//  and: "started_unix_ms","uptime_s","persist_every","durable_keep",
//  "verify_on_seal","object_bytes","pool_segments","tmpfs_total_bytes",
//  "committed_steps","persist_running","persist_awaiting_parts","durable_error"?,
//  "persist_rate_bytes","replicate_rate_bytes" (0 = unlimited),
//  "background_priority" ("normal"|"low"|"idle"),
//  "policies": {ns: {"keep_memory","keep_durable","persist_every"}} (what
//            writers declared with SetPolicy, 0 = no opinion; decision 118),
//  "scrub": {"interval_ms" (0 = off),"passes","last_pass_unix_ms" (null before
//            the first pass ends),"objects","corrupt","repaired"} (sums since start),
//  "peers": null | {"listen","replicas","replica_ack","holders":[id],
//                   "holding":[{"origin","steps","bytes"}]}}
// A last_errors entry reads "<UTC time> <event>: <code>: <message>".
std::string StatsJson(const StatsInput& in);

}  // namespace tierckpt::agent
