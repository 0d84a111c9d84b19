// part_record.h — the durable part record of a step spanning nodes
// (`_tierckpt_part.<node>.json`, docs/multinode.md "Persisting"): what one
// member uploads beside its objects so that the merger can write the step's
// manifest (decision 113).
//
// Format 2, written now: a small JSON object
//   {"format": "tierckpt.part_record", "version": 1,
//    "members": {"count": N, "digest": "xxh3-64:<16 hex>"[, "ids": [...]]},
//    "part": <the member's part manifest without its "members" list (or
//             "member_ref") and, but for the coordinator's, its
//             "placement" (the whole ring, O(M))>}
// so a non-coordinator's record is O(its own part) whatever N. The
// coordinator's record (any part whose manifest lists the members: the
// coordinator's since decision 116, every part before) keeps the list as
// "ids" and its placement: a merger whose own part names the members only
// by count and digest (decision 116) takes them from it; every merger checks
// each record's count and digest against its list.
// Format 1, written by agents before decision 113 and still read: the part
// manifest itself (a "tierckpt.manifest" with the full "members" list).
// Readers of the durable step (stock DCP, `tierckpt` readers) ignore records.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr std::string_view kPartRecordFormat = "tierckpt.part_record";
inline constexpr int kPartRecordVersion = 1;

// A member list named by its size and the XXH3-64 of its ids, in order,
// each followed by '\n' (as the ring's digest, decision 108).
struct MemberListDigest {
  uint64_t count = 0;
  uint64_t digest = 0;
  bool operator==(const MemberListDigest&) const = default;
};
MemberListDigest DigestMembers(const std::vector<std::string>& members);
// The members' digest of a part manifest of either form (its member_ref,
// or its list).
MemberListDigest DigestOfPart(const Manifest& part);
// "<count> members, digest xxh3-64:<16 hex>", for error messages.
std::string DescribeMembers(const MemberListDigest& d);

struct PartRecord {
  // The member's part. In a format-2 record its `members` and `placement`
  // are empty and `members_digest` names the members; in a format-1 record
  // `members` is the list.
  Manifest part;
  std::optional<MemberListDigest> members_digest;
  // The members, sorted, when a format-2 record lists them ("ids": the
  // coordinator's record); checked against members_digest on parse.
  std::vector<std::string> member_ids;
};

// The format-2 record of part (a part of a step spanning nodes).
std::string EncodePartRecord(const Manifest& part);

// Either format. kCorruption naming `where` and the field when malformed, of
// an unknown version, or when a format-2 record's part spans nodes itself.
Result<PartRecord> ParsePartRecord(std::string_view text, std::string_view where);

}  // namespace tierckpt::agent
