// dns_peers.h — `--peers dns:NAME:PORT`: the agents are the addresses a DNS
// name resolves to, e.g. a Kubernetes headless Service over the DaemonSet's
// pods (one A or AAAA record per pod), each agent at ADDRESS:PORT
// (docs/placement.md, "Where the peers come from").
//
// DNS gives addresses, not node ids. An agent's id is its --node-id, and each
// address's id is learned from the agent that answers there: the peer
// handshake carries the node id, authenticated with the cluster secret
// (peer/handshake.h), so a stranger cannot claim a place in the ring. The
// ring is the node ids (cluster/placement.h); an address is only where a
// node is found now. A node replaced by a machine with another name and
// address keeps its ring position by keeping its node id.
//
// DiscoverDnsPeers runs once at start: it resolves NAME and probes every
// address until it knows the expected number of members (or, with none
// given, every address NAME has), this node among them, or the wait runs out.
// RefreshDnsAddresses is one later round: the addresses NAME has now, for the
// ids the ring already has (a node that came back elsewhere); the agent runs
// it periodically (agent.cc). Members never join or leave a running agent's
// ring: a changed set of node ids is a new ring, taken in by restarting the
// agents (decision 95).
//
// Errors are kInvalidArgument for a bad spec, kNotFound naming the name, the
// resolver's error and what to check when NAME does not resolve, kTimeout
// naming what was found and what was missing when the wait runs out.
// ParseDnsPeers and the functions are thread-safe given thread-safe
// arguments; SystemResolver is thread-safe (getaddrinfo); StaticResolver is
// thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/membership.h"
#include "common/mutex.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

inline constexpr std::string_view kDnsPeersPrefix = "dns:";

struct DnsPeersSpec {
  std::string name;  // a host name (cluster/address.h rules), lower-cased
  uint16_t port = 0;
};

// True when spec is a `dns:` value (whether or not it parses).
bool IsDnsPeers(std::string_view spec);
// "dns:NAME:PORT". NAME must be a host name: an IP address, bracketed or not,
// is refused (a fixed address belongs in a hostfile).
Result<DnsPeersSpec> ParseDnsPeers(std::string_view spec);

// Turns a name into addresses: canonical numeric hosts (IPv4 dotted quad or
// IPv6 in the inet_ntop spelling, without brackets), sorted, unique.
class HostResolver {
 public:
  virtual ~HostResolver() = default;
  // kNotFound when the name has no address (NXDOMAIN, no records),
  // kUnavailable when the resolver could not answer (try again); both name
  // the name and the resolver's own words.
  virtual Result<std::vector<std::string>> Resolve(const std::string& name) = 0;
};

// getaddrinfo(3) with AF_UNSPEC: /etc/hosts, then the servers in
// /etc/resolv.conf, as nsswitch.conf says. No caching of its own.
std::unique_ptr<HostResolver> NewSystemResolver();

// A resolver for tests: a map from name to addresses, changeable at any time.
class StaticResolver final : public HostResolver {
 public:
  void Set(const std::string& name, std::vector<std::string> hosts) EXCLUDES(mu_);
  void Remove(const std::string& name) EXCLUDES(mu_);
  Result<std::vector<std::string>> Resolve(const std::string& name) override;
  int calls() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::vector<std::string>> hosts_ GUARDED_BY(mu_);
  int calls_ GUARDED_BY(mu_) = 0;
};

// Asks the agent at "host:port" for its node id (the agent: a peer connection
// and its handshake). An error means nothing answers there yet.
using ProbeNodeId = std::function<Result<std::string>(const std::string& address)>;

struct DnsDiscoveryOptions {
  // Members to wait for, this node included (--peers-count). 0: every
  // address NAME has when one round identifies all of them.
  size_t expect = 0;
  // How long to keep resolving and probing before giving up (--peers-wait).
  std::chrono::milliseconds wait{300000};
  // Pause between rounds.
  std::chrono::milliseconds retry{1000};
  // How a pause is taken (tests pass their own).
  std::function<void(std::chrono::milliseconds)> sleep;
};

// Resolves spec.name and probes each address (host:port) not identified yet,
// round after round, until the members known include self_node_id and
// number options.expect (or, with 0, cover every address of the last round).
// Fails at once when two addresses answer with one node id, or when more
// than options.expect members answer.
Result<Membership> DiscoverDnsPeers(const DnsPeersSpec& spec, std::string_view self_node_id, HostResolver& resolver,
                                    const ProbeNodeId& probe, const DnsDiscoveryOptions& options);

// One round for a running agent: resolves spec.name, probes each address that
// is not in `current` (node id → address) and returns the node ids of
// `current` found at another address now (node id → new address).
// `strangers` (optional) receives the answers whose node id is not in
// `current` (node id → address): agents that are not in this ring.
Result<std::map<std::string, std::string>> RefreshDnsAddresses(
    const DnsPeersSpec& spec, HostResolver& resolver, const ProbeNodeId& probe,
    const std::map<std::string, std::string>& current, std::map<std::string, std::string>* strangers = nullptr);

}  // namespace tierckpt::cluster
