// hostlist.h — Slurm's compressed host lists ("node[001-004,007],gpu-a[1-2]"),
// expanded the way `scontrol show hostnames` expands them, so that an agent
// started inside a Slurm job finds its peers from SLURM_JOB_NODELIST without a
// hostfile (cluster/peer_source.h, `--peers slurm:PORT`).
//
// Syntax: comma-separated items (commas inside brackets belong to the
// bracket). An item is literal text with zero or more bracket groups; each
// group is a comma-separated list of numbers and inclusive ranges "lo-hi";
// an item with several groups expands to their product, left to right
// ("r[1-2]n[1-2]" → r1n1 r1n2 r2n1 r2n2). A range keeps the width of its low
// bound with leading zeros ("[08-10]" → 08 09 10), as Slurm does. Names keep
// the order written; a name written twice is an error (two agents cannot have
// one name).
//
// Limits: at most kMaxHostlistNames names and kMaxHostlistBytes of input;
// numbers of at most 9 digits. Errors are kInvalidArgument quoting the list,
// saying what is wrong and how to write it. Pure; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::cluster {

inline constexpr size_t kMaxHostlistNames = 65536;
inline constexpr size_t kMaxHostlistBytes = 1u << 20;

Result<std::vector<std::string>> ExpandHostlist(std::string_view list);

}  // namespace tierckpt::cluster
