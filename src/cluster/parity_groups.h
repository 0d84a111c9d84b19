// parity_groups.h — how a cluster's nodes form the groups of an erasure-coded
// memory tier (issue 23, decision 122): `--redundancy rs:K+M` instead of
// replicas.
//
// Redundancy is the scheme a cluster keeps committed steps under: R copies of
// each part (replicas:R, today's behaviour) or a Reed-Solomon K+M code over
// groups of nodes (rs:K+M; src/ec/reed_solomon.h), where each node's part is
// one of K data pieces and M other nodes hold the group's parity pieces.
//
// The groups (PlaceParity). On the placement ring (cluster/placement.h; with
// failure domains it is arranged so that consecutive positions differ in
// domain), group g's data members are the K consecutive positions gK ..
// gK+K-1 (the last group may have fewer: its missing pieces count as zeros,
// which a systematic code never stores). Its M parity holders are chosen
// walking the ring from the position after the group, skipping the group's
// own members, taking the nodes that hold the fewest parity pieces so far
// (ties: the nearest on the ring), so every node holds ⌊GM/N⌋ or ⌈GM/N⌉
// parity pieces. Each node is at most once among a group's K + M pieces, so
// losing any M nodes erases at most M pieces of every group: every committed
// step stays recoverable.
//
// Deterministic: the same ring and code give the same groups on every node.
// Values; thread-compatible. The free functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::cluster {

struct Redundancy {
  enum class Kind { kReplicas, kReedSolomon };
  Kind kind = Kind::kReplicas;
  uint32_t replicas = 2;  // kReplicas: copies of each part, the primary's included
  uint32_t k = 0;         // kReedSolomon: data pieces per group
  uint32_t m = 0;         // kReedSolomon: parity pieces per group

  // "replicas:2", "rs:4+2".
  std::string ToString() const;
  // Host memory per byte of state once a step is redundant: R, or (K + M) / K.
  double MemoryFactor() const;
  bool operator==(const Redundancy&) const = default;
};

// "replicas:R" (1 ≤ R ≤ 64) or "rs:K+M" (1 ≤ K, 1 ≤ M, K + M ≤ 256); "xor:K"
// is "rs:K+1". kInvalidArgument naming the text and the accepted forms.
Result<Redundancy> ParseRedundancy(std::string_view text);

struct ParityGroup {
  uint32_t index = 0;
  std::vector<std::string> data;    // piece i is data[i]'s part; fewer than K in a short last group
  std::vector<std::string> parity;  // parity piece j is held by parity[j]; M of them

  bool operator==(const ParityGroup&) const = default;
};

struct ParityLayout {
  uint32_t k = 0;
  uint32_t m = 0;
  std::vector<ParityGroup> groups;  // by index

  // The group node_id's part belongs to; nullptr when not placed.
  const ParityGroup* GroupOf(std::string_view node_id) const;
  // The groups whose parity node_id holds, with the piece held: (group, j).
  std::vector<std::pair<uint32_t, uint32_t>> ParityHeldBy(std::string_view node_id) const;

  bool operator==(const ParityLayout&) const = default;
};

// The groups of an rs:K+M code over ring (node ids in placement ring order,
// unique). kInvalidArgument when the ring has fewer than K + M nodes (a node
// would hold two pieces of one group), naming the counts.
Result<ParityLayout> PlaceParity(const std::vector<std::string>& ring, uint32_t k, uint32_t m);

}  // namespace tierckpt::cluster
