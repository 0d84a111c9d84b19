// peer_discovery.cc — see peer_discovery.h.
#include "agent/peer_discovery.h"

#include <utility>

#include "common/log.h"

namespace tierckpt::agent {

cluster::ProbeNodeId HandshakeProbe(peer::Transport* transport, peer::Millis timeout) {
  return [transport, timeout](const std::string& address) -> Result<std::string> {
    TC_ASSIGN_OR_RETURN(std::unique_ptr<peer::Connection> conn, transport->Connect(address, timeout, ""));
    std::string id = conn->peer().node_id;
    conn->Close();
    return id;
  };
}

PeerAddressRefresher::PeerAddressRefresher(cluster::DnsPeersSpec spec,
                                           std::unique_ptr<cluster::HostResolver> resolver,
                                           cluster::ProbeNodeId probe, Replicator* replicator,
                                           std::chrono::milliseconds interval)
    : spec_(std::move(spec)),
      resolver_(std::move(resolver)),
      probe_(std::move(probe)),
      replicator_(replicator),
      interval_(interval) {}

PeerAddressRefresher::~PeerAddressRefresher() { Stop(); }

void PeerAddressRefresher::Start() { thread_ = std::thread([this] { Loop(); }); }

void PeerAddressRefresher::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

void PeerAddressRefresher::Loop() {
  for (;;) {
    {
      MutexLock lock(&mu_);
      const auto deadline = std::chrono::steady_clock::now() + interval_;
      while (!stop_ && std::chrono::steady_clock::now() < deadline) cv_.WaitUntil(deadline);
      if (stop_) return;
    }
    RefreshOnce();
  }
}

void PeerAddressRefresher::RefreshOnce() {
  const std::map<std::string, std::string> current = replicator_->Addresses();
  std::map<std::string, std::string> strangers;
  Result<std::map<std::string, std::string>> moved =
      cluster::RefreshDnsAddresses(spec_, *resolver_, probe_, current, &strangers);
  if (!moved.ok()) {
    // Logged when it starts failing, not every round.
    if (!resolve_failing_) Log(LogLevel::kWarn, "peer_refresh").Err(moved.status());
    resolve_failing_ = true;
    return;
  }
  resolve_failing_ = false;
  for (const auto& [id, address] : *moved) {
    const std::string from = current.at(id);
    if (Status s = replicator_->MoveNode(id, address); !s.ok()) {
      Log(LogLevel::kWarn, "peer_moved").Kv("node", id).Err(s);
      continue;
    }
    Log(LogLevel::kInfo, "peer_moved").Kv("node", id).Kv("from", from).Kv("to", address);
  }
  for (const auto& [id, address] : strangers) {
    if (!strangers_logged_.insert(id).second) continue;
    Log(LogLevel::kWarn, "peer_not_in_ring")
        .Kv("node", id)
        .Kv("address", address)
        .Kv("action", "left out; the ring changes when the agents restart (docs/placement.md)");
  }
}

}  // namespace tierckpt::agent
