// commit_tree.h — the shape of a commit spanning nodes (issue 21, decision
// 102): the members of the step, sorted, form a k-ary tree rooted at the
// coordinator (the node whose writer commits), so that no node sends more
// than k requests and the commit reaches every member in O(log_k N) hops.
//
// The tree is a function of (members, root, fan-out) alone, which every
// commit request down it carries (the members as runs of places in the
// agents' common ring, member_runs.h, decision 108), so each node computes
// its own children and its parent without asking anyone: the members are rotated so that the root
// is at position 0 (position p = (index - root index) mod N), and position p
// has the children k·p+1 … k·p+k (those below N) and the parent (p−1)/k. With
// k ≥ N−1 it is today's flat fan-out from the root.
//
// SubtreeSum is what a node answers its parent: the count, the bytes and a
// digest of the names of the objects of its subtree's parts, added up
// (peer message SubtreeCommitted). It is
// the same size at every node (issue 21 item 2: O(1) up the tree), and it is
// associative and commutative, so the root's sum does not depend on the
// tree's shape. NamesDigest is the sum of the XXH3-64 of each name (mod
// 2^64): a writer that knows which names it expects computes the same value
// (SpanNamesDigest, tierckpt/manifest.h; Python: tierckpt._tierckpt.names_digest).
//
// Values; pure functions; thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peer/peer_messages.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// The fan-out of a commit tree unless --commit-fan-out says otherwise: up to
// 17 members the coordinator asks every other member itself (depth 1), as
// before the tree; 4,369 members are 3 levels deep, 69,905 are 4.
inline constexpr uint32_t kDefaultCommitFanOut = 16;

class CommitTree {
 public:
  // members: sorted, unique, with root among them; fan_out >= 1. Errors
  // (kInvalidArgument) name what is wrong.
  static Result<CommitTree> Create(std::vector<std::string> members, std::string_view root, uint32_t fan_out);

  size_t size() const { return members_.size(); }
  uint32_t fan_out() const { return fan_out_; }
  const std::string& root() const { return members_[root_]; }
  bool Contains(std::string_view node) const { return PositionOf(node).has_value(); }
  // node's children, in position order; empty for a leaf or a non-member.
  std::vector<std::string> ChildrenOf(std::string_view node) const;
  // node's parent; nullopt for the root and for a non-member.
  std::optional<std::string> ParentOf(std::string_view node) const;
  // The hops from the root to node (0 for the root); nullopt for a non-member.
  std::optional<size_t> LevelOf(std::string_view node) const;
  // The hops from the root to the deepest member: 0 for one member,
  // ceil(log_k(N·(k−1)+1)) − 1 in general (N−1 for k = 1).
  size_t Depth() const;

 private:
  CommitTree(std::vector<std::string> members, size_t root, uint32_t fan_out)
      : members_(std::move(members)), root_(root), fan_out_(fan_out) {}
  std::optional<size_t> PositionOf(std::string_view node) const;
  const std::string& AtPosition(size_t p) const { return members_[(root_ + p) % members_.size()]; }

  std::vector<std::string> members_;  // sorted
  size_t root_ = 0;                   // the root's index in members_
  uint32_t fan_out_ = kDefaultCommitFanOut;
};

// The sum of the XXH3-64 of every name, mod 2^64.
uint64_t NamesDigest(const std::vector<std::string>& names);

// What a subtree of a commit tree committed, added up: the peer message
// SubtreeCommitted (peer/peer_messages.h), declared once there.
using SubtreeSum = peer::SubtreeCommitted;
// Adds one committed part (a member's own part manifest) at sum's node.
void AddPart(SubtreeSum* sum, const Manifest& part);
// Adds a child's sum to sum (the child's depth one hop further down).
void AddChild(SubtreeSum* sum, const SubtreeSum& child);

}  // namespace tierckpt::agent
