// parity_state.h — what an agent reports of the erasure-coded memory tier
// (issue 23, decision 135): each step's redundancy as this node's
// ParityMember knows it, and the "peers.parity" object of status
// (reports.h). Values only, so cluster.h can carry them without the parity
// path's headers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tierckpt::agent {

// One step's redundancy under the erasure code, as status reports it.
struct ParityStepState {
  enum class Kind { kPending, kRedundant, kIncomplete, kUnknown };
  std::string ns;
  uint64_t step = 0;
  Kind kind = Kind::kPending;
  std::string detail;  // the holders' answers (ParityReport::Describe) or the error

  bool redundant() const { return kind == Kind::kRedundant; }
  // "pending", "redundant", "incomplete", "unknown".
  static std::string_view Name(Kind k);
};

// What status shows of this node's parity (reports.h "peers.parity").
struct ParityStatsInput {
  std::string scheme;                // "rs:4+2"
  uint32_t group = 0;                // this node's group
  uint32_t index = 0;                // its data index there
  std::vector<std::string> holders;  // the group's parity holders, piece 0 first
  std::string ack = "none";          // --parity-ack: "all" | "none" (decision 146)
  uint64_t held_bytes = 0;           // parity pieces this node holds for groups (ParityHolder)
  std::vector<ParityStepState> steps;  // by (ns, step)
};

}  // namespace tierckpt::agent
