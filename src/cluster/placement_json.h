// placement_json.h — a Placement as JSON, the shape it will take inside a
// step's manifest (docs/placement.md, "JSON").
//
//   {
//     "format": "tierckpt.placement",
//     "version": 1,
//     "replicas": 2,
//     "spacing": 1,
//     "ring": ["n1", "n3", "n2", "n4"],
//     "nodes": [
//       {"node": "n1", "domain": "rack1", "replicas": ["n3"]},
//       ...
//     ]
//   }
//
// "nodes" is sorted by node id; "domain" is omitted when the node has none.
// Parsing accepts only this format and version, ignores unknown keys (so a
// later version can add fields), and then runs Placement::Validate, so a
// parsed placement always satisfies its invariants (holders follow from ring
// and spacing). Errors are kCorruption "placement <source>: <field>: <what>".
// No exceptions: nlohmann is used with allow_exceptions = false and checked
// accessors only. Pure and thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cluster/placement.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

inline constexpr std::string_view kPlacementFormat = "tierckpt.placement";
inline constexpr int kPlacementVersion = 1;
// Placement texts larger than this are rejected before parsing.
inline constexpr size_t kMaxPlacementJsonBytes = 16u << 20;

// The JSON value, to embed in another document (the manifest).
nlohmann::json PlacementToJson(const Placement& placement);
// Compact JSON text.
std::string PlacementToJsonText(const Placement& placement);

// source names where the JSON came from, for error messages.
Result<Placement> PlacementFromJson(const nlohmann::json& value, std::string_view source);
Result<Placement> ParsePlacementJson(std::string_view text, std::string_view source);

}  // namespace tierckpt::cluster
