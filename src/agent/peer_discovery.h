// peer_discovery.h — `--peers dns:NAME:PORT` in the agent (cluster/dns_peers.h
// is the logic; this is its wiring to the peer transport and the replicator).
//
// HandshakeProbe learns the node id of the agent at an address: it opens a
// peer connection, whose handshake authenticates the far end's node id with
// the cluster secret, and closes it. An agent that is not up yet, or a
// stranger without the secret, is an error (the discovery asks again).
//
// PeerAddressRefresher keeps a running agent's view of where each ring member
// is: every interval it resolves NAME again, probes the addresses it does not
// know and tells the replicator of a member found elsewhere (a node replaced
// by a machine with another address keeps its node id, hence its ring
// position and its replicas; decision 95). It logs `peer_moved node=ID
// from=OLD to=NEW`; an agent not in the ring is logged once
// (`peer_not_in_ring`) and left out: the ring changes only when the agents
// restart. Thread-safe; Stop() joins and is idempotent (the destructor
// stops).
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "cluster/dns_peers.h"
#include "common/mutex.h"
#include "peer/transport.h"
#include "replication/replicator.h"

namespace tierckpt::agent {

// transport must outlive the probe.
cluster::ProbeNodeId HandshakeProbe(peer::Transport* transport, peer::Millis timeout);

class PeerAddressRefresher {
 public:
  // replicator and whatever probe uses must outlive the refresher.
  PeerAddressRefresher(cluster::DnsPeersSpec spec, std::unique_ptr<cluster::HostResolver> resolver,
                       cluster::ProbeNodeId probe, Replicator* replicator, std::chrono::milliseconds interval);
  ~PeerAddressRefresher();
  PeerAddressRefresher(const PeerAddressRefresher&) = delete;
  PeerAddressRefresher& operator=(const PeerAddressRefresher&) = delete;

  void Start();
  void Stop() EXCLUDES(mu_);
  // One round now (the thread's body; tests call it directly).
  void RefreshOnce();

 private:
  void Loop() EXCLUDES(mu_);

  // Const after construction.
  const cluster::DnsPeersSpec spec_;
  const std::unique_ptr<cluster::HostResolver> resolver_;
  const cluster::ProbeNodeId probe_;
  Replicator* const replicator_;
  const std::chrono::milliseconds interval_;

  // Only the refresher's thread (or a test's RefreshOnce) touches these.
  std::set<std::string> strangers_logged_;
  bool resolve_failing_ = false;

  Mutex mu_;
  CondVar cv_{&mu_};
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tierckpt::agent
