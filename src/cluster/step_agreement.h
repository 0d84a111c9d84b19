// step_agreement.h — which step a restarted job loads, and where each object
// comes from (issue 5, "restore after node replacement").
//
// All ranks must load the same step: the newest step that is complete for the
// current membership, meaning every object of the step is available from
//   - the memory tier of a live node (a member of the current membership:
//     the reader itself, its primary, a replica holder, or any other member
//     that reports a copy), or
//   - the durable tier.
// Objects of one step may come from different tiers. Nodes that are not in
// the current membership count as dead: what they held is ignored.
//
// The chosen step depends only on the candidates, the holdings and the
// membership, never on the reader, so every node that calls this with the
// same inputs agrees. The per-object sources depend on the reader: for each
// object the reader picks
//   1. local   — the reader's own memory tier holds it;
//   2. peer    — a live member holds it: first the step's placement holders in
//                order (primary, replica 1, replica 2, ...), then any other
//                live member in node-id order;
//   3. durable — otherwise; ObjectSource::why then says why no memory copy is
//                used (for the "falls back to durable" log line).
//
// Inputs are plain structs gathered by the caller (agents report what their
// memory tier holds; the durable tier is listed once). A pure function:
// deterministic and thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/membership.h"
#include "cluster/placement.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

struct StepObject {
  std::string name;     // object name
  std::string primary;  // node id of the agent that wrote it (ObjectEntry::node)
};

// A step some tier has committed, as its manifest describes it.
struct StepCandidate {
  uint64_t step = 0;
  std::vector<StepObject> objects;     // every object of the step
  std::optional<Placement> placement;  // recorded for the step; nullopt = none (not replicated)
};

// step → names of the objects a tier holds (committed and verified by size).
using StepObjects = std::map<uint64_t, std::set<std::string, std::less<>>>;

struct TierHoldings {
  std::map<std::string, StepObjects, std::less<>> memory;  // node id → that node's memory tier
  StepObjects durable;                                     // objects readable from the durable tier
};

enum class SourceKind { kLocal, kPeer, kDurable };
// "local", "peer", "durable".
std::string_view ToString(SourceKind kind);

struct ObjectSource {
  std::string object;
  std::string primary;
  SourceKind kind = SourceKind::kDurable;
  std::string node;     // kLocal: the reader; kPeer: the peer's node id; kDurable: ""
  std::string address;  // kPeer: the peer's address in the membership; else ""
  std::string why;      // kDurable: why no memory copy is used; else ""
};

struct LoadPlan {
  uint64_t step = 0;
  std::vector<ObjectSource> sources;  // one per object, in the candidate's order
  // Newer candidates that are not loadable, newest first, each with the reason.
  std::vector<std::string> skipped;
};

// The newest loadable step among candidates (any order) and, for reader (a
// member's node id, or "" for a reader without a memory tier), where to read
// each of its objects.
// Errors: kInvalidArgument for malformed input (a step listed twice, an
// object listed twice in a step, an invalid placement, a reader that is not a
// member); kNotFound when no candidate is loadable, naming each step and the
// first object that has no copy.
Result<LoadPlan> NewestLoadableStep(const std::vector<StepCandidate>& candidates,
                                    const TierHoldings& holdings, const Membership& membership,
                                    std::string_view reader);

}  // namespace tierckpt::cluster
