// names.h — validation and on-disk spelling of namespaces, steps and object
// names. Every name that reaches a path goes through here first.
//
// Rules (docs/format.md repeats them for users):
//   namespace    [A-Za-z0-9_.-]{1,128}, not "." or "..".
//   step         0 <= step <= kMaxStep (10^10 - 1), spelled "step_%010llu"
//                so that lexicographic order equals numeric order.
//   object name  1..1024 bytes of '/'-separated components; each component is
//                1..255 bytes of [A-Za-z0-9_.-], not "." or ".."; no leading
//                or trailing '/', no "//". Names starting with "_tierckpt" are
//                reserved for the system (manifests, markers).
//
// All functions are pure and thread-safe. Errors are kInvalidArgument with a
// message that quotes the offending input (escaped) and states the rule.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

inline constexpr uint64_t kMaxStep = 9'999'999'999ULL;
inline constexpr size_t kMaxNamespaceLength = 128;
inline constexpr size_t kMaxObjectNameLength = 1024;
inline constexpr size_t kMaxNameComponentLength = 255;
inline constexpr std::string_view kReservedPrefix = "_tierckpt";

Status ValidateNamespace(std::string_view ns);
Status ValidateStep(uint64_t step);
// Rejects reserved names too; use ValidateObjectName(name, true) for
// system-internal names.
Status ValidateObjectName(std::string_view name, bool allow_reserved = false);

// The part record a node writes into a durable step spanning nodes
// (docs/multinode.md): "_tierckpt_part.<node id>.json". Stores accept these
// reserved names (and only these) as objects.
std::string PartRecordName(std::string_view node_id);
// True for "_tierckpt_part.<id>.json" where <id> follows the node-id rule;
// sets *node_id (if given).
bool ParsePartRecordName(std::string_view name, std::string* node_id = nullptr);

// "step_0000000123". Precondition: ValidateStep(step).ok().
std::string StepDirName(uint64_t step);
// Parses "step_0000000123" (exactly 10 digits) into 123; false otherwise.
bool ParseStepDirName(std::string_view dir_name, uint64_t* step);

// Quotes s for an error message: printable ASCII kept, others as \xNN, and
// at most 80 characters shown.
std::string QuoteForMessage(std::string_view s);

}  // namespace tierckpt
