// names.h — validation and on-disk spelling of namespaces, steps and object
// names. Every name that reaches a path goes through here first.
//
// Rules (docs/format.md repeats them for users):
//   namespace    [A-Za-z0-9_.-]{1,128}, not "." or "..".
//   step         0 <= step <= kMaxStep (10^10 - 1), spelled "step_%010llu"
//                so that lexicographic order equals numeric order.
//   object name  1..768 bytes of '/'-separated components; each component is
//                1..200 bytes of [A-Za-z0-9_.-], not "." or ".."; no leading
//                or trailing '/', no "//". Names starting with "_tierckpt" are
//                reserved for the system (manifests, markers).
//
// The limits leave room for what the tiers add, so that every name accepted
// here can be written and read back in every tier: filesystems allow 255
// bytes per component and the filesystem store writes "<name>.tmp.<pid>.<n>"
// first (at most 33 bytes more); an S3 key is at most 1024 bytes, and
// "<prefix>/<namespace>/step_<10 digits>/<name>" then leaves 110 bytes for the
// prefix (S3ObjectStore::Open refuses a longer one).
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
inline constexpr size_t kMaxObjectNameLength = 768;
inline constexpr size_t kMaxNameComponentLength = 200;
inline constexpr std::string_view kReservedPrefix = "_tierckpt";

Status ValidateNamespace(std::string_view ns);
Status ValidateStep(uint64_t step);
// Both of the above: the namespace first, then the step.
Status ValidateStepRef(std::string_view ns, uint64_t step);
// Parses a step as typed by a person (the CLI): decimal digits only, leading
// zeros allowed and meaning the decimal number ("0000000100" is 100, as in
// the step_0000000100 directory names), at most kMaxStep. Anything else
// ("0x10", "-1", "1e3", " 7", "", 2^64) is kInvalidArgument quoting the input
// and stating the range. Never octal or hexadecimal.
Result<uint64_t> ParseStep(std::string_view text);
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
