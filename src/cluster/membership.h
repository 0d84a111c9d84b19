// membership.h — the agents that take part in one step of a job.
//
// Membership comes from the job, not from us: during DCP planning each rank
// reports its agent (RankReport), and the coordinator turns the reports of all
// ranks into a Membership (FromReports). A static hostfile is the fallback for
// the CLI and tests (cluster/hostfile.h). docs/placement.md describes both.
//
// A Membership is a value: members sorted by node id, each with a validated
// node id, a canonical address (cluster/address.h), an optional failure
// domain and the ranks whose agent it is. Invariants, checked by Create:
//   - at least one member;
//   - node ids unique, addresses unique (after canonicalisation);
//   - a rank belongs to at most one member; each member's ranks are sorted
//     and unique;
//   - either every member has a failure domain or none has (a mix is almost
//     always a misconfigured agent, and placement could not honour it).
//
// Errors are kInvalidArgument naming the node ids, ranks and addresses
// involved and what to fix. Values; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::cluster {

struct Member {
  std::string node_id;
  std::string address;          // "host:port"; canonical once in a Membership
  std::string failure_domain;   // e.g. "rack1"; "" = none
  std::vector<uint32_t> ranks;  // ranks whose agent this is; empty = unknown (hostfile)

  bool operator==(const Member&) const = default;
};

// What one rank reports about its agent during planning.
struct RankReport {
  uint32_t rank = 0;
  std::string node_id;
  std::string address;
  std::string failure_domain;  // "" = none
};

class Membership {
 public:
  Membership() = default;  // empty; only Create/FromReports make valid ones

  // Validates, canonicalises addresses, sorts ranks and sorts members by node
  // id. Fails on any broken invariant (see the header comment).
  static Result<Membership> Create(std::vector<Member> members);

  // Groups reports by node id. Reports of one node id must agree on address
  // and failure domain (else an error naming both ranks and both values); a
  // rank reported twice must name the same node (an identical repeat is
  // ignored). Fails when reports is empty.
  static Result<Membership> FromReports(const std::vector<RankReport>& reports);

  const std::vector<Member>& members() const { return members_; }
  size_t size() const { return members_.size(); }
  bool empty() const { return members_.empty(); }
  // True when the members carry failure domains.
  bool has_domains() const { return !members_.empty() && !members_.front().failure_domain.empty(); }

  // nullptr when absent.
  const Member* Find(std::string_view node_id) const;
  const Member* FindByRank(uint32_t rank) const;
  bool Contains(std::string_view node_id) const { return Find(node_id) != nullptr; }

  // "a, b, c" (at most max_shown ids, then "... (N in all)"), for messages.
  std::string Describe(size_t max_shown = 8) const;

  bool operator==(const Membership& other) const { return members_ == other.members_; }

 private:
  std::vector<Member> members_;            // sorted by node id
  std::map<uint32_t, size_t> rank_index_;  // rank → index into members_
};

}  // namespace tierckpt::cluster
