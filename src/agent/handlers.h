// handlers.h — turns decoded requests into memory-tier / persister / durable
// calls and their answers (the RequestHandler of the agent's Service).
//
// Rules enforced here for every connection:
//   * the first request must be Hello (else kProtocolError, connection closed);
//   * an unknown type or an undecodable payload is answered with
//     kProtocolError and the connection is closed;
//   * every namespace, step and object name is validated (common/names.h)
//     before it reaches a path (the memory tier validates again);
//   * reads: OpenObject only decodes, calls ReadPath::Open (read_path.h: the
//     one place that picks the tier and repairs a corrupt copy) and encodes;
//   * bodies: CommitStep returns the manifest, List/Show/Stats/Verify/Prune a
//     JSON document (JsonBody; shapes in docs/agent.md and reports.h), Hello a
//     HelloResponse, OpenObject an OpenObjectResponse + read-only fd,
//     CreateObject an empty body + read-write fd, CreateNextObject a
//     CreateNextObjectResponse + read-write fd; the rest an empty body.
//
// The save's bookkeeping lives here, not in the clients: CreateNextObject
// picks a name not sealed yet (an earlier attempt at the step may have left
// sealed objects under the names a writer counts through), and BeginSave
// aborts the steps an earlier failed save over the same connection left
// half-written (ConnectionState::created_in records the steps each connection
// created objects in with CreateNextObject; requests of one connection are
// handled one at a time).
//
// Thread safety: Handle/OnClose are called concurrently from connection
// threads; Handlers holds no mutable state of its own (its ReadPath is
// thread-safe).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/durable_bases.h"
#include "agent/manifest_cache.h"
#include "agent/read_path.h"
#include "agent/scrubber.h"
#include "agent/service.h"
#include "common/work_queue.h"
#include "ops/recent_errors.h"
#include "replication/cluster.h"
#include "store/object_store.h"
#include "tier/memory_tier.h"
#include "tier/persister.h"

namespace tierckpt::agent {

inline constexpr const char* kAgentVersion = "0.1.0";

// Facts about the running agent, reported by Hello and Stats.
struct AgentInfo {
  std::string node_id;
  std::string root;
  std::string durable_url;                 // "" = no durable tier; the default base when jobs bind their own
  std::vector<std::string> durable_allow;  // --durable-allow, as given
  std::string socket_path;
  int64_t pid = 0;
  uint64_t started_unix_ms = 0;
  uint32_t keep_last = 3;
  uint64_t persist_every = 0;
  uint32_t durable_keep = 0;
  bool verify_on_seal = false;
  bool commit_before_hash = false;
  // The background caps (docs/agent.md "Background work"): 0 = unlimited.
  uint64_t persist_rate_bytes = 0;
  uint64_t replicate_rate_bytes = 0;
  std::string background_priority = "low";  // ThreadPriorityName
  std::string tmpfs_huge_pages;             // huge= of the root's tmpfs (os/mounts.h); "" when not known
  uint64_t scrub_interval_ms = 0;           // 0 = no background scrub
};

struct HandlerDeps {
  AgentInfo info;
  MemoryTier* tier = nullptr;
  Persister* persister = nullptr;  // nullptr without a durable tier
  ObjectStore* store = nullptr;    // nullptr without a durable tier (a RoutedStore over bases)
  DurableBases* bases = nullptr;   // nullptr without a durable tier
  RecentErrors* errors = nullptr;
  std::function<size_t()> connection_count;
  // The scrubber's counters for Stats' "scrub"; unset = all zero.
  std::function<ScrubCounters()> scrub_counters;
  // This node's place in a cluster (replication/cluster.h): replication
  // after each commit, the other parts of steps spanning nodes, the replica
  // holders (restores before the durable tier, List, Show, DeleteStep) and
  // the "peers" of Stats. A SingleNode unless the agent runs with --peers.
  Cluster* cluster = SingleNodeCluster();
};

class Handlers final : public RequestHandler {
 public:
  explicit Handlers(HandlerDeps deps)
      : d_(std::move(deps)), read_path_(ReadPathDeps{d_.info.node_id, d_.tier, d_.store, d_.cluster}) {}

  Reply Handle(ConnectionState& conn, const wire::Frame& frame) override;
  void OnClose(ConnectionState& conn) override;
  // The read path the handlers serve OpenObject through, for the scrub's
  // repairs (shared: repairs of one step are serialized there).
  ReadPath* read_path() { return &read_path_; }

 private:
  Reply Dispatch(ConnectionState& conn, wire::MsgType type, std::string_view payload);
  // Write path and reads (handlers.cc).
  Reply Hello(ConnectionState& conn, std::string_view payload);
  Reply BeginStep(ConnectionState& conn, std::string_view payload);
  Reply CreateObject(ConnectionState& conn, std::string_view payload);
  // The first <prefix><n><suffix> not sealed yet (wire::CreateNextObjectRequest).
  Reply CreateNextObject(ConnectionState& conn, std::string_view payload);
  // BeginSave, then CreateNextObject: the first request of a steady save, one round trip.
  Reply BeginSaveCreateNext(ConnectionState& conn, std::string_view payload);
  Reply CreateNext(ConnectionState& conn, const wire::CreateNextObjectRequest& req);
  // What BeginSave does: this connection's leftover steps of ns aborted, then BeginStep.
  Status BeginSaveOf(ConnectionState& conn, const std::string& ns, uint64_t step);
  // BeginStep, after aborting the steps of the namespace that conn created
  // objects in (CreateNextObject) and that are still being written: what an
  // earlier failed save over this connection left half-written.
  Reply BeginSave(ConnectionState& conn, std::string_view payload);
  // BeginSave's first half: aborts (and forgets) conn's steps of ns other than step.
  void AbortLeftoverSteps(ConnectionState& conn, const std::string& ns, uint64_t step);
  Reply SealObject(const ConnectionState& conn, std::string_view payload);
  Reply CommitStep(const ConnectionState& conn, std::string_view payload);
  Reply AbortStep(const ConnectionState& conn, std::string_view payload);
  Reply OpenObject(std::string_view payload);
  // A step missing from memory, for Restore: ReadPath::RestoreStep.
  Status RestoreFromOtherTiers(const std::string& ns, uint64_t step) {
    return read_path_.RestoreStep(ns, step);
  }
  // Listings and administration (handlers_admin.cc).
  Reply List(std::string_view payload);
  Reply Show(std::string_view payload);
  Reply Stats(std::string_view payload);
  Reply Verify(std::string_view payload);
  Reply DeleteStep(std::string_view payload);
  Reply Prune(std::string_view payload);
  Reply Persist(std::string_view payload);
  Reply WaitDurable(std::string_view payload);
  Reply Restore(std::string_view payload);
  Reply Shutdown(std::string_view payload);
  // Per-job durable bases and save policies (handlers_durable.cc).
  Reply BindDurable(std::string_view payload);
  Reply SetPolicy(const ConnectionState& conn, std::string_view payload);

  // kNotFound "step ns/step is in no tier; `tierckpt ls ns` lists what exists".
  static Status InNoTier(std::string_view ns, uint64_t step);
  // Whether the durable tier holds ns/step committed (false without one).
  Result<bool> DurableHas(std::string_view ns, uint64_t step);
  // Whether the memory tier records ns/step as persisted (kDurable).
  bool RecordedDurable(const std::string& ns, uint64_t step) const;

  // Const after construction.
  const HandlerDeps d_;
  ReadPath read_path_;
  // The summaries of durable manifests List has read, by tag (thread-safe).
  DurableManifestCache manifest_cache_;
};

// A Reply carrying st (and no body).
Reply StatusReply(Status st);
// A Reply with a JsonBody-encoded document.
Reply JsonReply(const std::string& json);
// kProtocolError reply that closes the connection.
Reply ProtocolReply(const Status& st);

// Decodes a request payload into *out; on failure sets *bad to the
// protocol-error reply (connection closed) and returns false.
template <typename T>
bool DecodeRequest(std::string_view payload, T* out, Reply* bad) {
  Result<T> r = T::Decode(payload);
  if (!r.ok()) {
    *bad = ProtocolReply(r.status());
    return false;
  }
  *out = std::move(r).value();
  return true;
}

}  // namespace tierckpt::agent
