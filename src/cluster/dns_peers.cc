// dns_peers.cc — see dns_peers.h.
#include "cluster/dns_peers.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <set>
#include <thread>
#include <utility>

#include "cluster/address.h"
#include "common/names.h"

namespace tierckpt::cluster {
namespace {

constexpr std::string_view kDnsUsage = "write dns:NAME:PORT, e.g. dns:tierckpt-peers.tierckpt.svc.cluster.local:7100";

std::string SpecText(std::string_view spec) { return "--peers " + QuoteForMessage(spec); }

// What to check when a name gives no address, for every message that says so.
std::string WhatToCheck(const std::string& name) {
  return "check that the headless Service " + name +
         " exists (kubectl get service), that it selects the agents' pods and publishes them before they are "
         "ready (publishNotReadyAddresses: true), and that the name is fully qualified or in the search list of "
         "/etc/resolv.conf";
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

class SystemResolver final : public HostResolver {
 public:
  Result<std::vector<std::string>> Resolve(const std::string& name) override {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
    // No AI_ADDRCONFIG: it drops every address of a family when the host has
    // only loopback addresses of it (a network namespace, a test).
    addrinfo* raw = nullptr;
    const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &raw);
    AddrInfoPtr res(raw);
    if (rc == EAI_NONAME || rc == EAI_NODATA || rc == EAI_FAIL) {
      return NotFound("resolving " + name + ": " + ::gai_strerror(rc));
    }
    if (rc != 0) {
      return Unavailable("resolving " + name + ": " + ::gai_strerror(rc) + "; the resolver will be asked again");
    }
    std::set<std::string> hosts;
    for (const addrinfo* ai = res.get(); ai != nullptr; ai = ai->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* src = nullptr;
      if (ai->ai_family == AF_INET) {
        src = &reinterpret_cast<const sockaddr_in*>(ai->ai_addr)->sin_addr;
      } else if (ai->ai_family == AF_INET6) {
        src = &reinterpret_cast<const sockaddr_in6*>(ai->ai_addr)->sin6_addr;
      } else {
        continue;
      }
      if (::inet_ntop(ai->ai_family, src, buf, sizeof(buf)) != nullptr) hosts.insert(buf);
    }
    if (hosts.empty()) return NotFound("resolving " + name + ": no IPv4 or IPv6 address");
    return std::vector<std::string>(hosts.begin(), hosts.end());
  }
};

std::string JoinHostPort(const std::string& host, uint16_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// node id → address, as a message: "n0 at 10.0.0.1:7100, n1 at ...".
std::string DescribeFound(const std::map<std::string, std::string>& found) {
  if (found.empty()) return "none";
  std::string out;
  for (const auto& [id, address] : found) {
    if (!out.empty()) out += ", ";
    out += id + " at " + address;
  }
  return out;
}

}  // namespace

bool IsDnsPeers(std::string_view spec) { return spec.substr(0, kDnsPeersPrefix.size()) == kDnsPeersPrefix; }

Result<DnsPeersSpec> ParseDnsPeers(std::string_view spec) {
  if (!IsDnsPeers(spec)) return InvalidArgument(SpecText(spec) + " is not a dns: value; " + std::string(kDnsUsage));
  const std::string_view rest = spec.substr(kDnsPeersPrefix.size());
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos) {
    return InvalidArgument(SpecText(spec) + " has no port; " + std::string(kDnsUsage));
  }
  const std::string_view name = rest.substr(0, colon);
  const std::string_view port = rest.substr(colon + 1);
  if (name.empty()) return InvalidArgument(SpecText(spec) + " has no name before the port; " + std::string(kDnsUsage));
  if (name.find(':') != std::string_view::npos || name.front() == '[') {
    return InvalidArgument(SpecText(spec) + ": " + QuoteForMessage(name) +
                           " is an IPv6 address, not a name; dns: takes the name of a headless Service (whose "
                           "records may be IPv6); list fixed addresses in a hostfile");
  }
  // The port and the name are checked with the address rules, one at a time
  // so that the message says which is wrong.
  if (Result<PeerAddress> p = ParseAddress("localhost:" + std::string(port)); !p.ok()) {
    return InvalidArgument(SpecText(spec) + ": " + QuoteForMessage(port) + " is not a port (1..65535); " +
                           std::string(kDnsUsage));
  }
  Result<PeerAddress> a = ParseAddress(std::string(name) + ":" + std::string(port));
  if (!a.ok()) return a.status().WithContext(SpecText(spec) + ", the name");
  if (a->kind != HostKind::kHostName) {
    return InvalidArgument(SpecText(spec) + ": " + QuoteForMessage(name) +
                           " is an IP address, not a name; dns: takes the name of a headless Service; list fixed "
                           "addresses in a hostfile");
  }
  return DnsPeersSpec{a->host, a->port};
}

std::unique_ptr<HostResolver> NewSystemResolver() { return std::make_unique<SystemResolver>(); }

void StaticResolver::Set(const std::string& name, std::vector<std::string> hosts) {
  std::sort(hosts.begin(), hosts.end());
  hosts.erase(std::unique(hosts.begin(), hosts.end()), hosts.end());
  MutexLock lock(&mu_);
  hosts_[name] = std::move(hosts);
}

void StaticResolver::Remove(const std::string& name) {
  MutexLock lock(&mu_);
  hosts_.erase(name);
}

Result<std::vector<std::string>> StaticResolver::Resolve(const std::string& name) {
  MutexLock lock(&mu_);
  ++calls_;
  auto it = hosts_.find(name);
  if (it == hosts_.end() || it->second.empty()) return NotFound("resolving " + name + ": Name or service not known");
  return it->second;
}

int StaticResolver::calls() const {
  MutexLock lock(&mu_);
  return calls_;
}

Result<Membership> DiscoverDnsPeers(const DnsPeersSpec& spec, std::string_view self_node_id, HostResolver& resolver,
                                    const ProbeNodeId& probe, const DnsDiscoveryOptions& options) {
  const std::string what = "--peers dns:" + spec.name + ":" + std::to_string(spec.port);
  const auto deadline = std::chrono::steady_clock::now() + options.wait;
  std::map<std::string, std::string> found;         // node id → address
  std::map<std::string, std::string> id_at;         // address → node id
  std::map<std::string, std::string> not_answering;  // address → why, the last round
  Status last_resolve = Status::Ok();
  size_t last_resolved = 0;
  for (int round = 0;; ++round) {
    if (round > 0) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      if (options.sleep) {
        options.sleep(options.retry);
      } else {
        std::this_thread::sleep_for(options.retry);
      }
    }
    Result<std::vector<std::string>> hosts = resolver.Resolve(spec.name);
    if (!hosts.ok()) {
      last_resolve = hosts.status();
      continue;
    }
    last_resolve = Status::Ok();
    last_resolved = hosts->size();
    not_answering.clear();
    bool all_known = true;
    for (const std::string& host : *hosts) {
      const std::string address = JoinHostPort(host, spec.port);
      if (id_at.contains(address)) continue;
      Result<std::string> id = probe(address);
      if (!id.ok()) {
        not_answering[address] = id.status().message();
        all_known = false;
        continue;
      }
      if (auto other = found.find(*id); other != found.end() && other->second != address) {
        return InvalidArgument(what + ": the agents at " + other->second + " and " + address +
                               " both have node id " + *id + "; give every agent its own --node-id");
      }
      found[*id] = address;
      id_at[address] = *id;
    }
    if (options.expect > 0 && found.size() > options.expect) {
      return InvalidArgument(what + ": " + std::to_string(found.size()) + " agents answer (" + DescribeFound(found) +
                             ") but --peers-count is " + std::to_string(options.expect) +
                             "; set --peers-count to the number of agents of the job");
    }
    if (!found.contains(std::string(self_node_id))) continue;
    if (options.expect > 0 ? found.size() == options.expect : all_known) {
      std::vector<Member> members;
      members.reserve(found.size());
      for (const auto& [id, address] : found) members.push_back(Member{id, address, "", {}});
      Result<Membership> out = Membership::Create(std::move(members));
      if (!out.ok()) return out.status().WithContext(what);
      return out;
    }
  }
  const std::string waited = std::to_string(options.wait.count() / 1000) + " s (--peers-wait)";
  if (!last_resolve.ok()) {
    return NotFound(what + ": " + last_resolve.message() + " (still, after " + waited + "); " +
                    WhatToCheck(spec.name));
  }
  std::string msg = what + ": after " + waited + " " + spec.name + " has " + std::to_string(last_resolved) +
                    " addresses and the agents known are " + DescribeFound(found);
  if (!found.contains(std::string(self_node_id))) {
    msg += "; this agent (" + std::string(self_node_id) + ") is not among them: its own address must be one of " +
           spec.name + "'s, and --peer-listen must accept connections there";
  }
  if (options.expect > 0) msg += "; waiting for " + std::to_string(options.expect) + " (--peers-count)";
  for (const auto& [address, why] : not_answering) msg += "; " + address + " does not answer: " + why;
  return Timeout(msg);
}

Result<std::map<std::string, std::string>> RefreshDnsAddresses(const DnsPeersSpec& spec, HostResolver& resolver,
                                                               const ProbeNodeId& probe,
                                                               const std::map<std::string, std::string>& current,
                                                               std::map<std::string, std::string>* strangers) {
  Result<std::vector<std::string>> hosts = resolver.Resolve(spec.name);
  if (!hosts.ok()) return hosts.status().WithContext("--peers dns:" + spec.name + ":" + std::to_string(spec.port));
  std::set<std::string> known;
  for (const auto& [id, address] : current) known.insert(address);
  std::map<std::string, std::string> moved;
  for (const std::string& host : *hosts) {
    const std::string address = JoinHostPort(host, spec.port);
    if (known.contains(address)) continue;
    Result<std::string> id = probe(address);
    if (!id.ok()) continue;  // not up yet; the next round asks again
    if (current.contains(*id)) {
      moved[*id] = address;
    } else if (strangers != nullptr) {
      (*strangers)[*id] = address;
    }
  }
  return moved;
}

}  // namespace tierckpt::cluster
