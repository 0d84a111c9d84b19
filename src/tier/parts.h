// parts.h — how the parts of a step spanning nodes add up to one manifest
// (docs/multinode.md): each member node commits its own objects as a part;
// the coordinator, and the persister writing the durable copy, merge them.
//
// MergeParts: one manifest listing the objects of every part, each with its
// writer node. Every part must be of the same step with the same members,
// and there must be one part per member; the same object name in two parts
// is kCorruption (two nodes wrote it).
//
// PartMerger: the same merge, one part at a time (decision 112). Each part
// is checked against the first part's members as it is added, and only its
// objects and four numbers are kept; its member list is dropped. So merging
// N parts of p objects holds O(N + N·p), not N member lists of N ids each
// (the durable merger, Persister::AwaitParts, reads N part records).
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

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tier/part_record.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// node: the node id the merged manifest names as its writer.
Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node);

// Not thread-safe; one merge per instance.
class PartMerger {
 public:
  // reference: a part of the step (the merging node's own); its ns, step,
  // members and placement are the merged manifest's (an added part's
  // placement is not read: records carry none). It is not added.
  explicit PartMerger(const Manifest& reference);

  // Checks part against the reference (same step, same members, a member
  // not added yet, no object name already added) and keeps its objects; on
  // error (kCorruption, naming both nodes) nothing of part is kept.
  Status Add(Manifest part) { return Add(PartRecord{std::move(part), std::nullopt}); }
  // The same for a part record of either format (part_record.h): the
  // members are checked by their list (format 1) or by its count and digest
  // (format 2) against the reference's list.
  Status Add(PartRecord record);
  // Whether the part of node was added.
  bool Has(const std::string& node) const { return added_.count(node) != 0; }
  // The members whose parts are not added yet, in the members' order.
  std::vector<std::string> Missing() const;
  // Member ids held now: the reference's list plus one per added part.
  // O(N) whatever was added (each part's own list is dropped in Add).
  size_t HeldMemberIds() const { return members_.size() + added_.size(); }

  // The merged manifest, written by node. kFailedPrecondition naming the
  // missing members unless every member's part was added.
  Result<Manifest> Finish(std::string_view node) const;

 private:
  std::string ns_;
  uint64_t step_ = 0;
  std::string label_;
  std::vector<std::string> members_;
  MemberListDigest members_digest_;  // of members_
  std::set<std::string> added_;
  Manifest totals_;  // world_size, created_unix_ms, checksums_pending, placement
  std::map<std::string, ObjectEntry> objects_;
};

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
