#include "cluster/membership.h"

#include <algorithm>
#include <utility>

#include "cluster/address.h"
#include "common/names.h"

namespace tierckpt::cluster {
namespace {

std::string Q(std::string_view s) { return QuoteForMessage(s); }

std::string DomainOrNone(const std::string& d) {
  return d.empty() ? "no failure domain" : "failure domain " + Q(d);
}

}  // namespace

Result<Membership> Membership::Create(std::vector<Member> members) {
  if (members.empty()) {
    return InvalidArgument("the membership has no members; every step needs at least one agent");
  }
  for (size_t i = 0; i < members.size(); ++i) {
    Member& m = members[i];
    TC_RETURN_IF_ERROR(ValidateNodeId(m.node_id).WithContext("member " + std::to_string(i)));
    std::string where = "member " + Q(m.node_id);
    Result<PeerAddress> addr = ParseAddress(m.address);
    if (!addr.ok()) return addr.status().WithContext(where);
    m.address = addr->ToString();
    if (!m.failure_domain.empty()) {
      TC_RETURN_IF_ERROR(ValidateFailureDomain(m.failure_domain).WithContext(where));
    }
    std::sort(m.ranks.begin(), m.ranks.end());
    auto dup = std::adjacent_find(m.ranks.begin(), m.ranks.end());
    if (dup != m.ranks.end()) {
      return InvalidArgument(where + " lists rank " + std::to_string(*dup) + " twice; list each rank once");
    }
  }
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.node_id < b.node_id; });
  Membership out;
  std::map<std::string, size_t, std::less<>> by_address;
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    if (i > 0 && members[i - 1].node_id == m.node_id) {
      return InvalidArgument("node id " + Q(m.node_id) + " appears twice (addresses " +
                             members[i - 1].address + " and " + m.address +
                             "); give every agent its own --node-id");
    }
    auto [it, inserted] = by_address.emplace(m.address, i);
    if (!inserted) {
      return InvalidArgument("address " + m.address + " is claimed by nodes " +
                             Q(members[it->second].node_id) + " and " + Q(m.node_id) +
                             "; every agent needs its own host:port");
    }
    if (m.failure_domain.empty() != members.front().failure_domain.empty()) {
      const Member& with = m.failure_domain.empty() ? members.front() : m;
      const Member& without = m.failure_domain.empty() ? m : members.front();
      return InvalidArgument("node " + Q(with.node_id) + " has failure domain " + Q(with.failure_domain) +
                             " but node " + Q(without.node_id) +
                             " has none; give every member a failure domain or none");
    }
    for (uint32_t rank : m.ranks) {
      auto [rit, rinserted] = out.rank_index_.emplace(rank, i);
      if (!rinserted) {
        return InvalidArgument("rank " + std::to_string(rank) + " belongs to both node " +
                               Q(members[rit->second].node_id) + " and node " + Q(m.node_id) +
                               "; a rank talks to exactly one agent");
      }
    }
  }
  out.members_ = std::move(members);
  return out;
}

Result<Membership> Membership::FromReports(const std::vector<RankReport>& reports) {
  if (reports.empty()) {
    return InvalidArgument(
        "no rank reported its agent; every rank must report (node id, address) when planning");
  }
  struct Seen {
    Member member;
    uint32_t first_rank = 0;
  };
  std::map<std::string, Seen, std::less<>> nodes;
  std::map<uint32_t, std::string> rank_node;
  for (const RankReport& r : reports) {
    std::string where = "rank " + std::to_string(r.rank) + "'s agent report";
    TC_RETURN_IF_ERROR(ValidateNodeId(r.node_id).WithContext(where));
    Result<PeerAddress> addr = ParseAddress(r.address);
    if (!addr.ok()) return addr.status().WithContext(where + " (node " + Q(r.node_id) + ")");
    std::string address = addr->ToString();
    if (!r.failure_domain.empty()) {
      TC_RETURN_IF_ERROR(ValidateFailureDomain(r.failure_domain).WithContext(where));
    }
    auto [rn, rank_new] = rank_node.emplace(r.rank, r.node_id);
    if (!rank_new && rn->second != r.node_id) {
      return InvalidArgument("rank " + std::to_string(r.rank) + " reported two agents, node " +
                             Q(rn->second) + " and node " + Q(r.node_id) +
                             "; a rank talks to exactly one agent");
    }
    auto it = nodes.find(r.node_id);
    if (it == nodes.end()) {
      Seen seen;
      seen.member = Member{r.node_id, address, r.failure_domain, {r.rank}};
      seen.first_rank = r.rank;
      nodes.emplace(r.node_id, std::move(seen));
      continue;
    }
    Seen& seen = it->second;
    std::string both = "ranks " + std::to_string(seen.first_rank) + " and " + std::to_string(r.rank) +
                       " both report node " + Q(r.node_id);
    if (seen.member.address != address) {
      return InvalidArgument(both + " but with addresses " + seen.member.address + " and " + address +
                             "; one agent has one address: check the agent settings on that host, or give "
                             "the two agents different node ids");
    }
    if (seen.member.failure_domain != r.failure_domain) {
      return InvalidArgument(both + " but with " + DomainOrNone(seen.member.failure_domain) + " and " +
                             DomainOrNone(r.failure_domain) + "; configure one failure domain per agent");
    }
    if (rank_new) seen.member.ranks.push_back(r.rank);
  }
  std::vector<Member> members;
  members.reserve(nodes.size());
  for (auto& [id, seen] : nodes) members.push_back(std::move(seen.member));
  return Create(std::move(members));
}

const Member* Membership::Find(std::string_view node_id) const {
  auto it = std::lower_bound(members_.begin(), members_.end(), node_id,
                             [](const Member& m, std::string_view id) { return m.node_id < id; });
  if (it == members_.end() || it->node_id != node_id) return nullptr;
  return &*it;
}

const Member* Membership::FindByRank(uint32_t rank) const {
  auto it = rank_index_.find(rank);
  return it == rank_index_.end() ? nullptr : &members_[it->second];
}

std::string Membership::Describe(size_t max_shown) const {
  std::string out;
  for (size_t i = 0; i < members_.size() && i < max_shown; ++i) {
    if (i > 0) out += ", ";
    out += members_[i].node_id;
  }
  if (members_.size() > max_shown) out += ", ... (" + std::to_string(members_.size()) + " in all)";
  if (members_.empty()) out = "(no members)";
  return out;
}

}  // namespace tierckpt::cluster
