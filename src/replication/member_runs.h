// member_runs.h — the members of a step spanning nodes named by their places
// in the ring every agent shares, not by their ids (issue 21 item 2, decision
// 108): what a commit request down the tree carries in place of the member
// list, so that its size does not grow with N.
//
// The ring is the agents' common membership (--peers: a hostfile, `slurm:` or
// `dns:`), sorted by node id. Every agent of a job already loads the same
// one, since replica placement is computed from it on every node
// (docs/placement.md), and its node ids are fixed for the agent's lifetime
// (an address may move, decision 95; an id may not). A step's members,
// sorted, are a subset of it, so they are runs of consecutive ring positions,
// written as [start, count] pairs: one pair when the step spans a contiguous
// range of the ring (a job on every agent: 16 bytes whatever N); at worst,
// members on every other agent, one pair per member.
//
// A RingId (the ring's size and the XXH3-64 of its node ids in order) travels
// with the runs, so a receiver whose ring differs refuses the request, naming
// both rings, instead of reading the positions as other nodes.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/membership.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct RingId {
  uint32_t size = 0;    // agents in the ring
  uint64_t digest = 0;  // XXH3-64 of the node ids in ring order, each followed by '\n'

  bool operator==(const RingId&) const = default;
  // "5 agents, digest 0123456789abcdef", for messages.
  std::string ToString() const;
};

RingId RingIdOf(const cluster::Membership& ring);

// members (sorted by node id, unique) as [start, count] pairs of positions
// in ring, ascending, each run as long as it can be (so the encoding of a
// set is unique). kInvalidArgument naming the first member that is not in
// the ring (add it to every agent's --peers), or when members are not sorted
// and unique.
Result<std::vector<uint64_t>> MemberRuns(const cluster::Membership& ring,
                                         const std::vector<std::string>& members);

// The node ids that runs names in ring, sorted. kInvalidArgument when runs
// has an odd length, an empty run, a run past the ring's end, or runs out of
// order or touching (not the encoding MemberRuns makes).
Result<std::vector<std::string>> MembersOfRuns(const cluster::Membership& ring,
                                               const std::vector<uint64_t>& runs);

}  // namespace tierckpt::agent
