// parity_record.h — what a parity holder keeps beside its parity pieces of
// one group and one step (issue 23, decision 123): enough to check the pieces
// and to rebuild any lost member's part from any K survivors.
//
// A data member's piece is its part's objects laid back to back in manifest
// order (sorted by name); its length is the sum of their sizes. The parity
// pieces of a group are as long as its longest data piece (shorter pieces
// count as zero-padded, decision 121). The record names, for each data index
// of the group (position in `data`; a short last group has fewer than K), the
// member's node id, its objects (name, size, checksum) and its piece length,
// and for each parity piece it describes (a holder describes the pieces it
// holds; Merge joins the records of several holders) the piece's index in
// [0, M), its length and the XXH3-64 of its bytes.
//
// Each data index also carries its part manifest's other fields (`part`,
// decision 141): world size, creation time and, for a part of a step spanning
// nodes, its membership (the member list and placement of the coordinator's
// part, or the member_ref of another's), so a lost part is published again
// exactly as its manifest was. Records written before decision 141 have no
// `part`; they still parse (part is then absent).
//
// JSON (format "tierckpt.parity", version 1; docs/decisions.md 123, 141):
//   {"format", "version", "namespace", "step", "group", "k", "m",
//    "data": [{"member", "piece_length", "objects": [{"name", "size",
//              "checksum"}],
//              "part": {"world_size", "created_unix_ms", "members"?,
//                       "member_ref"?, "placement"?}?}],
//    "parity": [{"index", "length", "checksum"}]}
// `part`'s fields are spelled as in the part manifest (tierckpt/manifest.h)
// and checked as the manifest's are (Manifest::Parse and Validate over the
// part's objects).
// Parse is strict: any malformed or inconsistent field is kCorruption naming
// the source, the field and where, so a damaged record is never half-used.
//
// Values; thread-compatible. No ISA-L here: the fuzz target compiles this
// file alone.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::ec {

inline constexpr std::string_view kParityRecordFormat = "tierckpt.parity";
inline constexpr int kParityRecordVersion = 1;
// Records larger than this are refused before parsing (K ≤ 255 parts' lists).
inline constexpr size_t kMaxParityRecordBytes = 256u << 20;

struct PieceObject {
  std::string name;      // a valid object name (common/names.h)
  uint64_t size = 0;     // bytes
  std::string checksum;  // "xxh3-64:<16 hex>" of its bytes
  bool operator==(const PieceObject&) const = default;
};

// A part manifest's fields besides its namespace, step, node and objects
// (which the record holds already): what republishing the part exactly as
// it was needs (decision 141).
struct PartHeader {
  uint32_t world_size = 0;
  uint64_t created_unix_ms = 0;
  std::vector<std::string> members;     // a step spanning nodes: the coordinator's (or an older) part
  std::optional<MemberRef> member_ref;  // a step spanning nodes: another member's part
  std::string placement;                // the coordinator's part: "tierckpt.placement" JSON, else ""
  bool SpansNodes() const { return members.size() > 1 || member_ref.has_value(); }
  bool operator==(const PartHeader&) const = default;
};

// The header of `part` (its objects, ns, step and node are not in it).
PartHeader HeaderOf(const Manifest& part);

struct DataPiece {
  std::string member;                // node id of the member whose part this is
  uint64_t length = 0;               // sum of the objects' sizes
  std::vector<PieceObject> objects;  // sorted by name, unique
  // The part manifest's other fields; absent in a record written before
  // decision 141 (its part can then be republished only when it is of a
  // step on one node, with world size 0 and the time of the rebuild).
  std::optional<PartHeader> part;
  bool operator==(const DataPiece&) const = default;
};

struct ParityPiece {
  uint32_t index = 0;    // in [0, m)
  uint64_t length = 0;   // the record's PieceLength()
  std::string checksum;  // "xxh3-64:<16 hex>" of the piece's bytes
  bool operator==(const ParityPiece&) const = default;
};

struct ParityRecord {
  std::string ns;
  uint64_t step = 0;
  uint32_t group = 0;
  uint32_t k = 0;
  uint32_t m = 0;
  std::vector<DataPiece> data;      // by data index; 1..k entries
  std::vector<ParityPiece> parity;  // by index, increasing, at least one

  // The longest data piece: every parity piece's length.
  uint64_t PieceLength() const;
  // nullptr when this record does not describe parity piece j.
  const ParityPiece* FindParity(uint32_t j) const;
  // The part manifest of data index i (< data.size()) as its member
  // committed it: the objects (written by the member), ns, step and the
  // header. nullopt when the record has no header for it (written before
  // decision 141).
  std::optional<Manifest> PartManifest(uint32_t i) const;

  // Pretty JSON (2-space indent), newline-terminated.
  std::string ToJson() const;
  // source names where the bytes came from, for error messages. kCorruption
  // on anything malformed, naming source, field and position.
  static Result<ParityRecord> Parse(std::string_view json, std::string_view source);
  // kInvalidArgument naming the field and position: names, ids and
  // checksums valid; 1 ≤ k, 1 ≤ m, k + m ≤ 256; 1..k data pieces, members
  // distinct; objects sorted and unique with sizes summing to the piece
  // length; parity indices < m, increasing, lengths equal to PieceLength();
  // each header, with its piece's objects, a valid part manifest
  // (Manifest::Validate) whose node is the member.
  Status Validate() const;
  // Adds the parity pieces `other` describes (another holder's record of the
  // same group and step). kInvalidArgument when anything but the parity list
  // differs (a header present in one record and absent in the other is not
  // a difference: the present one is kept, so a record written before
  // decision 141 merges with a newer holder's), or when both describe piece
  // j with different checksums; this record is unchanged then.
  Status Merge(const ParityRecord& other);

  bool operator==(const ParityRecord&) const = default;
};

}  // namespace tierckpt::ec
