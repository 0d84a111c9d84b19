// parts.h — how the parts of a step spanning nodes add up to one manifest
// (docs/multinode.md): each member node commits its own objects as a part;
// the coordinator, and the persister writing the durable copy, merge them.
//
// MergeParts: one manifest listing the objects of every part, each with its
// writer node. Every part must be of the same step with the same members,
// and there must be one part per member; the same object name in two parts
// is kCorruption (two nodes wrote it).
//
// MergeTurn: who writes the durable manifest of a step spanning nodes
// (decision 87). One member merges (turn 0: members[step % N]), reading the
// others' part records once; the others only wait for the manifest, and the
// k-th member after the merger in the members' order (turn k) merges too
// once min(k, kMaxMergeTurn) takeover periods passed without a manifest (a
// merger that died). So one step costs O(N) object-store requests, not each
// member reading every other member's record.
//
// Pure functions over their arguments; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// node: the node id the merged manifest names as its writer.
Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node);

// Whether `whole` (a merged manifest) lists every object of `part` with the
// same size and checksum.
bool ContainsPart(const Manifest& whole, const Manifest& part);

// Turns past this one all start merging together (after kMaxMergeTurn
// takeover periods), so a step whose first members are all gone is merged
// within bounded time.
inline constexpr size_t kMaxMergeTurn = 4;

// The member that merges the durable manifest of part's step: members[step % N].
// Precondition: part.members is not empty.
const std::string& MergerOf(const Manifest& part);

// node's turn to merge the durable manifest of part's step: 0 for the
// merger, k for the k-th member after it (capped at kMaxMergeTurn); the
// same on every member, as every part names the same members in the same
// order. kMaxMergeTurn for a node that is not a member.
size_t MergeTurn(const Manifest& part, std::string_view node);

}  // namespace tierckpt::agent
