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
// (the durable merger, Persister::MergePass, reads N part records).
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
  // reference: a part of the step listing its members (the merging node's
  // own, or the coordinator's record with its ids, decision 116); its ns,
  // step and members are the merged manifest's, and so is its placement, or
  // else the first added part's that has one (the coordinator's record). It
  // is not added. Precondition: reference.members is not empty.
  explicit PartMerger(const Manifest& reference);
  // The merger of own, a part naming its members by member_ref (decision
  // 116), with the coordinator's record added: its reference is that
  // record's part with the member list the record carries. kCorruption
  // naming the record when it lists no members or they are not own's
  // (count and digest), or as Add.
  static Result<PartMerger> FromCoordinatorRecord(const Manifest& own, PartRecord coordinator);

  // Checks part against the reference (same step, same members, a member
  // not added yet, no object name already added) and keeps its objects; on
  // error (kCorruption, naming both nodes) nothing of part is kept.
  Status Add(Manifest part) { return Add(PartRecord{std::move(part), std::nullopt}); }
  // The same for a part record of either format (part_record.h): the
  // members are checked by their list (format 1) or by its count and digest
  // (format 2, or a part manifest with a member_ref) against the
  // reference's list.
  Status Add(PartRecord record);
  // The members, sorted.
  const std::vector<std::string>& members() const { return members_; }
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

// "" when `other` lists every object of `part` with its size and checksum (a
// part object whose checksum is still pending matches on size), else the
// first that does not: "its object NAME is missing" or "... differs". For
// telling another copy of this save of a step from another save of its
// number (the read path's repairs, verify of a step spanning nodes).
std::string PartDifference(const Manifest& other, const Manifest& part);

// Turns past this one all start merging together (after kMaxMergeTurn
// takeover periods), so a step whose first members are all gone is merged
// within bounded time.
inline constexpr size_t kMaxMergeTurn = 4;

// The member that merges the durable manifest of part's step: members[step
// % N], for logs (with its index, step % N). A part naming its members by
// member_ref (decision 116) knows only its own id: "" when another node
// merges, as for a part of a step on one node.
std::string MergerOf(const Manifest& part);

// node's turn to merge the durable manifest of part's step: 0 for the
// merger, k for the k-th member after it (capped at kMaxMergeTurn); the
// same on every member, as every part names the same members in the same
// order. A part with a member_ref gives its own node's turn from its index
// and the count; kMaxMergeTurn for any other node, or a non-member.
size_t MergeTurn(const Manifest& part, std::string_view node);

}  // namespace tierckpt::agent
