// placement.h — where each node's objects are replicated for one step.
//
// The coordinator fixes a Placement per step from the step's Membership and a
// PlacementPolicy; it travels in the step's manifest (JSON:
// cluster/placement_json.h) so restore and persistence see the same answer.
// docs/placement.md is the user-facing description.
//
// The ring. The n members are laid on a ring (Placement::ring). Replica i
// (i = 1..R-1) of the objects written on the node at ring position p is held
// by the node at position (p + spacing * i) mod n. The holders of an object are
// its primary (the node of the rank that wrote it) followed by the primary's
// R-1 replica holders.
//   - Without failure domains (or with fewer than two distinct ones) the ring
//     is the members in node-id order, so spacing > 1 jumps over neighbours
//     (node ids that sort together often share a rack).
//   - With failure domains the ring is arranged so that the walk
//     p, p+spacing, p+2*spacing, ... visits different domains in turn: the
//     nodes are dealt to the gcd(spacing, n) walks (cycles) domain by domain,
//     and each walk takes, at every position, the domain with the most nodes
//     left other than the domain of its previous position (ties: the larger
//     domain, then the domain name; within a domain, node-id order). With
//     spacing 1 this makes consecutive positions differ in domain whenever the
//     largest domain holds at most half the nodes; with even domains the walk
//     visits them round-robin, so every R consecutive positions span
//     min(R, domains) domains.
// Every node holds exactly R-1 replica sets (one per i), so load is even by
// construction.
//
// Validity. 1 <= R <= n, spacing >= 1, and replica i must not land back on
// the primary: spacing * i mod n != 0 for i = 1..R-1, i.e. R <= n / gcd(spacing,
// n). (Two replicas i < j collide only if spacing * (j - i) mod n == 0, so the
// same condition keeps the holders distinct.) Errors name the values that
// would work.
//
// Deterministic: the same Membership and policy give the same Placement on
// every node and every run (no randomness, no hashing, ties broken by name).
// Values; thread-compatible. The free functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/membership.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

struct PlacementPolicy {
  uint32_t replicas = 2;  // R: copies of each object including the primary's; 1 = no replication
  uint32_t spacing = 1;   // ring distance between consecutive replicas

  bool operator==(const PlacementPolicy&) const = default;
};

// Ok when policy can place node_count nodes; kInvalidArgument otherwise,
// naming the replica counts and spacings that would work.
Status ValidatePolicy(const PlacementPolicy& policy, size_t node_count);

struct PlacedNode {
  std::string node_id;
  std::string failure_domain;                // "" = none
  std::vector<std::string> replica_holders;  // R-1 node ids; replica 1 first

  bool operator==(const PlacedNode&) const = default;
};

struct Placement {
  PlacementPolicy policy;
  std::vector<std::string> ring;  // node ids in ring order
  std::vector<PlacedNode> nodes;  // one per ring member, sorted by node id

  // nullptr when node_id is not placed.
  const PlacedNode* Find(std::string_view node_id) const;
  // The primary followed by its replica holders; empty when not placed.
  std::vector<std::string> HoldersOf(std::string_view primary) const;
  // The primaries whose replica sets node_id holds (R-1 of them), in replica
  // order (replica 1 first); empty when not placed.
  std::vector<std::string> ReplicaSetsHeldBy(std::string_view node_id) const;

  // Checks every invariant: the policy is valid for the ring size, node ids
  // valid and unique, nodes sorted and the same set as the ring, and each
  // node's holders are exactly the ones the ring and spacing give.
  // kCorruption naming the node and the field when not.
  Status Validate() const;

  bool operator==(const Placement&) const = default;
};

// The placement of membership under policy (see the header comment).
// kInvalidArgument when the policy does not fit the membership.
Result<Placement> PlacePrimary(const Membership& membership, const PlacementPolicy& policy);

}  // namespace tierckpt::cluster
