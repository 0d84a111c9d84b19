// agent.h — tierckptd assembled: config → memory tier, verifier, persister,
// durable store, local service.
//
// Start() (in order): logging; signal handling (optional: SIGINT/SIGTERM
// become a clean shutdown, SIGPIPE is ignored); the tmpfs root (created
// 0700, must be ours); an exclusive flock on <root>/agent.lock (a second
// agent on the same root fails with "another tierckptd (pid N) owns
// <root>"); the budget check against the mount's free space (Docker's 64 MiB
// /dev/shm fails here, clearly, not with SIGBUS later); the durable store;
// recovery of the tmpfs root (re-enqueueing marked persists); the listening
// socket; the pid file; one "ready" log line.
//
// Run() serves until Stop(), a Shutdown request or a signal, then: stops
// accepting, wakes blocked requests, closes connections, gives running
// persists up to shutdown_grace_s, removes the socket and pid file.
//
// Thread safety: Start and Run from one thread; Stop from any thread.
#pragma once

#include <memory>
#include <thread>

#include "agent/config.h"
#include "agent/durable_bases.h"
#include "agent/handlers.h"
#include "agent/http_api.h"
#include "agent/peer_discovery.h"
#include "agent/routed_store.h"
#include "agent/scrubber.h"
#include "agent/service.h"
#include "common/rate_limiter.h"
#include "common/work_queue.h"
#include "ops/metrics.h"
#include "ops/metrics_server.h"
#include "ops/recent_errors.h"
#include "os/fd.h"
#include "os/file_lock.h"
#include "os/signal_fd.h"
#include "replication/cluster.h"
#include "replication/parity_holder.h"
#include "replication/parity_member.h"
#include "replication/peer_service.h"
#include "replication/replica_tiers.h"
#include "replication/replicator.h"
#include "store/object_store.h"
#include "tier/memory_tier.h"
#include "tier/persister.h"

namespace tierckpt::agent {

class Agent {
 public:
  // config must have gone through FinalizeAgentConfig.
  explicit Agent(AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  Status Start(bool handle_signals);
  void Run();
  void Stop();

  MemoryTier* tier() const { return tier_.get(); }
  const AgentConfig& config() const { return config_; }

 private:
  Status PrepareRoot();
  Status TakeLock();

  // Const after construction.
  const AgentConfig config_;

  // Set up by Start, in this order; destroyed in reverse.
  // --peers: the transport, replica tiers, peer service and replicator.
  // The gauges of a scrape (metrics_server.h): tier, queues, replicas, peers.
  std::vector<Gauge> Gauges() const;
  Status StartPeers(const MemoryTierOptions& tier_options);
  // --redundancy rs:K+M (decision 135): the groups over the peers' ring, the
  // parity holder (re-indexed) and this node's ParityMember; kInvalidArgument
  // when the ring has fewer than K+M agents. Part of StartPeers.
  Status StartParity(const MemoryTierOptions& tier_options, peer::Millis timeout);
  // --peers dns: listens (early_listener_), then resolves and probes until
  // the members are known (cluster/dns_peers.h).
  Result<cluster::Membership> DiscoverDnsPeers(const cluster::DnsPeersSpec& spec, peer::Millis timeout);
  void StopPeers();
  void StopPreallocating();  // shuts the tier down first: only at shutdown

  // What every part reports into (metrics.h); first: the parts outlive none of it.
  Metrics metrics_;
  RecentErrors errors_{&metrics_};
  FileLock lock_;       // the agent lock file, held from TakeLock on
  SignalFd signal_fd_;  // SIGINT/SIGTERM, when Start handles signals
  // --persist-rate and --replicate-rate, shared by every thread of their kind.
  RateLimiter persist_rate_{config_.persist_rate_bytes};
  RateLimiter replicate_rate_{config_.replicate_rate_bytes};
  // --durable and the jobs' own bases (--durable-allow): store_ routes each
  // namespace to its base (routed_store.h).
  Status OpenDurable(const std::string& bases_file);
  std::unique_ptr<DurableBases> bases_;
  std::unique_ptr<ObjectStore> store_;
  std::unique_ptr<MemoryTier> tier_;
  std::unique_ptr<WorkQueue> verifier_;
  std::string tmpfs_huge_pages_;  // huge= of the root's tmpfs, for the ready line
  std::unique_ptr<Persister> persister_;
  // Multi-node (--peers): the parts of the MultiNode cluster and the peer
  // service, all nullptr on a single node; only StartPeers builds them.
  std::unique_ptr<peer::Transport> transport_;
  std::unique_ptr<ReplicaTiers> replicas_;
  std::unique_ptr<Replicator> replicator_;
  std::unique_ptr<WorkQueue> replication_queue_;
  // --redundancy rs:K+M (decision 135): the groups, the parity this node
  // holds, this node's side as a data member, and the queue its sends run
  // on (declared after the member, so it stops first).
  std::unique_ptr<cluster::ParityLayout> parity_layout_;
  std::unique_ptr<ParityHolder> parity_holder_;
  std::unique_ptr<ParityMember> parity_member_;
  std::unique_ptr<WorkQueue> parity_queue_;
  // This node's place in a cluster, what the handlers ask: a SingleNode, or
  // with --peers the MultiNode over the parts above.
  std::unique_ptr<Cluster> cluster_ = std::make_unique<SingleNode>();
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<peer::Listener> early_listener_;            // --peers dns: until peer_service_ takes it
  std::unique_ptr<PeerAddressRefresher> address_refresher_;  // --peers dns:, --peers-refresh > 0
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<Scrubber> scrubber_;  // --scrub-interval; repairs through handlers_' read path
  std::unique_ptr<Service> service_;
  std::unique_ptr<MetricsServer> metrics_server_;
  std::unique_ptr<HttpApi> http_api_;  // --http-listen
  std::thread preallocator_;  // --preallocate; stopped by tier_->Shutdown()
};

// The process exit code for a Start() error: 2 for problems the operator must
// fix in the configuration or environment (bad values, a budget that does
// not fit, the root or socket owned by another agent, permissions), 1
// otherwise.
int ExitCodeFor(const Status& start_error);

}  // namespace tierckpt::agent
