// hostfile.h — a static peer list, the membership fallback for the CLI and
// tests (the job's own rendezvous is the normal source: membership.h).
//
// Format (docs/placement.md):
//   # comment
//   node_id host:port [domain=<failure domain>] [ranks=<list>]
// One member per line; fields are separated by spaces or tabs; '#' starts a
// comment that runs to the end of the line; blank lines are ignored; a
// trailing '\r' (CRLF files) is ignored. <list> is comma-separated ranks or
// inclusive ranges, e.g. "ranks=0-7" or "ranks=0,2,4-5". Each option may
// appear once per line.
//
// Errors are kInvalidArgument "hostfile <source> line <n>: <what>; <fix>".
// Duplicate node ids, addresses or ranks name both lines. A file with no
// member is an error. Parsing throws nothing and allocates in proportion to
// the input. Thread-safe (pure).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "cluster/membership.h"
#include "tierckpt/status.h"

namespace tierckpt::cluster {

// Hostfiles larger than this are rejected by ReadHostfile.
inline constexpr size_t kMaxHostfileBytes = 4u << 20;

// source names the text in errors (usually the path).
Result<Membership> ParseHostfile(std::string_view text, std::string_view source);

// Reads path (at most kMaxHostfileBytes) and parses it.
Result<Membership> ReadHostfile(const std::string& path);

}  // namespace tierckpt::cluster
