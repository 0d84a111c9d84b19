// member_runs.cc — see member_runs.h.
#include "replication/member_runs.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>

#include "wire/protocol.h"

namespace tierckpt::agent {

std::string RingId::ToString() const {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(digest));
  return std::to_string(size) + " agents, digest " + hex;
}

RingId RingIdOf(const cluster::Membership& ring) {
  std::string ids;
  for (const cluster::Member& m : ring.members()) ids += m.node_id + '\n';
  return RingId{static_cast<uint32_t>(ring.size()), XXH3_64bits(ids.data(), ids.size())};
}

Result<std::vector<uint64_t>> MemberRuns(const cluster::Membership& ring,
                                         const std::vector<std::string>& members) {
  std::vector<uint64_t> runs;
  const std::vector<cluster::Member>& all = ring.members();
  uint64_t last = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (i > 0 && members[i] <= members[i - 1]) {
      return InvalidArgument("the members of a step must be sorted and unique (\"" + members[i] +
                             "\" after \"" + members[i - 1] + "\")");
    }
    auto by_id = [](const cluster::Member& m, const std::string& id) { return m.node_id < id; };
    auto it = std::lower_bound(all.begin(), all.end(), members[i], by_id);
    if (it == all.end() || it->node_id != members[i]) {
      return InvalidArgument("node " + members[i] +
                             ", a member of the step, is not in this agent's peer list (" + ring.Describe() +
                             "); add it to every agent's --peers");
    }
    const uint64_t pos = static_cast<uint64_t>(it - all.begin());
    if (i > 0 && pos == last + 1) {
      ++runs.back();
    } else {
      runs.push_back(pos);
      runs.push_back(1);
    }
    last = pos;
  }
  return runs;
}

Result<std::vector<std::string>> MembersOfRuns(const cluster::Membership& ring,
                                               const std::vector<uint64_t>& runs) {
  if (runs.size() % 2 != 0) {
    return InvalidArgument("the member runs are " + std::to_string(runs.size()) +
                           " numbers; they must be [start, count] pairs");
  }
  const uint64_t n = ring.size();
  std::vector<std::string> out;
  uint64_t end = 0;  // one past the previous run
  for (size_t i = 0; i < runs.size(); i += 2) {
    const uint64_t start = runs[i];
    const uint64_t count = runs[i + 1];
    if (count == 0 || start > n || count > n - start) {
      return InvalidArgument("member run [" + std::to_string(start) + ", " + std::to_string(count) +
                             "] is empty or past the end of a ring of " + std::to_string(n) + " agents");
    }
    if (i > 0 && start <= end) {
      return InvalidArgument("member run [" + std::to_string(start) + ", " + std::to_string(count) +
                             "] overlaps, touches or precedes the run before it");
    }
    if (out.size() + count > wire::kMaxCommitMembers) {
      return InvalidArgument("the member runs name more than " + std::to_string(wire::kMaxCommitMembers) +
                             " members");
    }
    for (uint64_t p = start; p < start + count; ++p) out.push_back(ring.members()[p].node_id);
    end = start + count;
  }
  return out;
}

}  // namespace tierckpt::agent
