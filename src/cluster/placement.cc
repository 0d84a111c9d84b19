#include "cluster/placement.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>
#include <utility>

#include "cluster/address.h"
#include "common/names.h"

namespace tierckpt::cluster {
namespace {

// Ring distance of replica i: (spacing * i) mod n, without overflow.
size_t Offset(uint32_t spacing, size_t i, size_t n) {
  return static_cast<size_t>((uint64_t{spacing} % n) * i % n);
}

// Length of each walk p, p+spacing, ... (the ring splits into gcd walks).
size_t CycleLength(uint32_t spacing, size_t n) { return n / std::gcd(static_cast<size_t>(spacing % n), n); }

std::string JoinNumbers(const std::vector<size_t>& v, size_t total) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(v[i]);
  if (total > v.size()) out += ", ...";
  return out;
}

struct Domain {
  std::string name;
  std::vector<std::string> nodes;  // sorted by node id
};

// The domain-aware ring described in placement.h.
std::vector<std::string> DomainRing(std::vector<Domain> domains, const PlacementPolicy& policy, size_t n) {
  std::sort(domains.begin(), domains.end(), [](const Domain& a, const Domain& b) {
    if (a.nodes.size() != b.nodes.size()) return a.nodes.size() > b.nodes.size();
    return a.name < b.name;
  });
  const size_t walks = n / CycleLength(policy.spacing, n);
  const size_t cycle = n / walks;
  const size_t step = Offset(policy.spacing, 1, n);
  constexpr size_t kNone = static_cast<size_t>(-1);
  // Deal the nodes to the walks, domain by domain, so each walk gets a mix.
  std::vector<std::vector<std::deque<std::string>>> dealt(
      walks, std::vector<std::deque<std::string>>(domains.size()));
  size_t k = 0;
  for (size_t d = 0; d < domains.size(); ++d) {
    for (const std::string& node : domains[d].nodes) dealt[k++ % walks][d].push_back(node);
  }
  std::vector<std::string> ring(n);
  for (size_t c = 0; c < walks; ++c) {
    std::vector<std::deque<std::string>>& left = dealt[c];
    size_t previous = kNone;
    for (size_t j = 0; j < cycle; ++j) {
      // The domain with the most nodes left other than the previous one
      // (ties: the earlier domain); the previous one only when nothing else is left.
      size_t best = kNone;
      for (size_t d = 0; d < domains.size(); ++d) {
        if (left[d].empty() || d == previous) continue;
        if (best == kNone || left[d].size() > left[best].size()) best = d;
      }
      if (best == kNone) best = previous;
      ring[(c + j * step) % n] = std::move(left[best].front());
      left[best].pop_front();
      previous = best;
    }
  }
  return ring;
}

std::vector<std::string> BuildRing(const Membership& membership, const PlacementPolicy& policy) {
  std::map<std::string, Domain> by_name;
  for (const Member& m : membership.members()) {
    Domain& d = by_name[m.failure_domain];
    d.name = m.failure_domain;
    d.nodes.push_back(m.node_id);  // members are sorted by node id
  }
  if (!membership.has_domains() || by_name.size() < 2) {
    std::vector<std::string> ring;
    for (const Member& m : membership.members()) ring.push_back(m.node_id);
    return ring;
  }
  std::vector<Domain> domains;
  for (auto& [name, d] : by_name) domains.push_back(std::move(d));
  return DomainRing(std::move(domains), policy, membership.size());
}

std::vector<std::string> HoldersAt(const std::vector<std::string>& ring, const PlacementPolicy& policy,
                                   size_t p) {
  std::vector<std::string> out;
  for (size_t i = 1; i < policy.replicas; ++i)
    out.push_back(ring[(p + Offset(policy.spacing, i, ring.size())) % ring.size()]);
  return out;
}

Status Bad(const std::string& what) {
  return Corruption("placement " + what + "; the step's placement cannot be trusted, place it again");
}

}  // namespace

Status ValidatePolicy(const PlacementPolicy& policy, size_t n) {
  if (n == 0)
    return InvalidArgument("cannot place replicas on an empty membership; at least one agent is needed");
  const std::string nodes = std::to_string(n) + (n == 1 ? " node" : " nodes");
  if (policy.replicas == 0 || policy.replicas > n) {
    return InvalidArgument("replicas " + std::to_string(policy.replicas) + " does not fit a membership of " +
                           nodes + "; use replicas 1.." + std::to_string(n) + " (1 = no replication)" +
                           (policy.replicas > n ? " or add nodes" : ""));
  }
  if (policy.spacing == 0) {
    return InvalidArgument(
        "spacing 0 would put every replica on its primary; use spacing 1 (the next node) or more");
  }
  if (policy.replicas == 1) return Status::Ok();
  const size_t cycle = CycleLength(policy.spacing, n);
  if (policy.replicas <= cycle) return Status::Ok();
  std::vector<size_t> good;
  size_t total = 0;
  for (size_t s = 1; s < n; ++s) {
    if (CycleLength(static_cast<uint32_t>(s), n) < policy.replicas) continue;
    ++total;
    if (good.size() < 8) good.push_back(s);
  }
  return InvalidArgument(
      "spacing " + std::to_string(policy.spacing) + " with " + nodes + " puts replica " +
      std::to_string(cycle) + " back on its primary (" + std::to_string(policy.spacing) + " x " +
      std::to_string(cycle) + " is a multiple of " + std::to_string(n) + "); with replicas " +
      std::to_string(policy.replicas) + " use a spacing s where " + std::to_string(n) + "/gcd(s, " +
      std::to_string(n) + ") >= " + std::to_string(policy.replicas) + ", e.g. " + JoinNumbers(good, total) +
      ", or keep spacing " + std::to_string(policy.spacing) + " with replicas 1.." + std::to_string(cycle));
}

Result<Placement> PlacePrimary(const Membership& membership, const PlacementPolicy& policy) {
  Status s = ValidatePolicy(policy, membership.size());
  if (!s.ok()) return s.WithContext("placing replicas on " + membership.Describe());
  Placement out;
  out.policy = policy;
  out.ring = BuildRing(membership, policy);
  std::map<std::string_view, size_t> position;
  for (size_t p = 0; p < out.ring.size(); ++p) position.emplace(out.ring[p], p);
  for (const Member& m : membership.members()) {
    out.nodes.push_back(
        PlacedNode{m.node_id, m.failure_domain, HoldersAt(out.ring, policy, position.at(m.node_id))});
  }
  return out;
}

const PlacedNode* Placement::Find(std::string_view node_id) const {
  auto it = std::lower_bound(nodes.begin(), nodes.end(), node_id,
                             [](const PlacedNode& n, std::string_view id) { return n.node_id < id; });
  if (it == nodes.end() || it->node_id != node_id) return nullptr;
  return &*it;
}

std::vector<std::string> Placement::HoldersOf(std::string_view primary) const {
  const PlacedNode* node = Find(primary);
  if (node == nullptr) return {};
  std::vector<std::string> out{node->node_id};
  out.insert(out.end(), node->replica_holders.begin(), node->replica_holders.end());
  return out;
}

std::vector<std::string> Placement::ReplicaSetsHeldBy(std::string_view node_id) const {
  auto it = std::find(ring.begin(), ring.end(), node_id);
  if (it == ring.end()) return {};
  const size_t n = ring.size();
  const size_t p = static_cast<size_t>(it - ring.begin());
  std::vector<std::string> out;
  for (size_t i = 1; i < policy.replicas; ++i)
    out.push_back(ring[(p + n - Offset(policy.spacing, i, n)) % n]);
  return out;
}

Status Placement::Validate() const {
  if (ring.empty()) return Bad("has an empty ring");
  Status s = ValidatePolicy(policy, ring.size());
  if (!s.ok()) return Bad("records a policy that does not fit its ring: " + s.message());
  std::map<std::string_view, size_t> position;
  for (size_t p = 0; p < ring.size(); ++p) {
    s = ValidateNodeId(ring[p]);
    if (!s.ok()) return Bad("ring position " + std::to_string(p) + ": " + s.message());
    if (!position.emplace(ring[p], p).second)
      return Bad("lists node " + QuoteForMessage(ring[p]) + " twice in its ring");
  }
  if (nodes.size() != ring.size()) {
    return Bad("has " + std::to_string(nodes.size()) + " nodes but " + std::to_string(ring.size()) +
               " ring positions");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const PlacedNode& node = nodes[i];
    std::string where = "node " + QuoteForMessage(node.node_id);
    if (i > 0 && nodes[i - 1].node_id >= node.node_id)
      return Bad("nodes are not sorted by node id at " + where);
    auto it = position.find(node.node_id);
    if (it == position.end()) return Bad(where + " is not on the ring");
    if (!node.failure_domain.empty()) {
      s = ValidateFailureDomain(node.failure_domain);
      if (!s.ok()) return Bad(where + ": " + s.message());
    }
    if (node.replica_holders != HoldersAt(ring, policy, it->second)) {
      return Bad(where + " lists replica holders that do not follow from the ring and spacing " +
                 std::to_string(policy.spacing));
    }
  }
  return Status::Ok();
}

}  // namespace tierckpt::cluster
