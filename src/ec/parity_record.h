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
// JSON (format "tierckpt.parity", version 1; docs/decisions.md 123):
//   {"format", "version", "namespace", "step", "group", "k", "m",
//    "data": [{"member", "piece_length", "objects": [{"name", "size",
//              "checksum"}]}],
//    "parity": [{"index", "length", "checksum"}]}
// Parse is strict: any malformed or inconsistent field is kCorruption naming
// the source, the field and where, so a damaged record is never half-used.
//
// Values; thread-compatible. No ISA-L here: the fuzz target compiles this
// file alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

struct DataPiece {
  std::string member;                // node id of the member whose part this is
  uint64_t length = 0;               // sum of the objects' sizes
  std::vector<PieceObject> objects;  // sorted by name, unique
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

  // Pretty JSON (2-space indent), newline-terminated.
  std::string ToJson() const;
  // source names where the bytes came from, for error messages. kCorruption
  // on anything malformed, naming source, field and position.
  static Result<ParityRecord> Parse(std::string_view json, std::string_view source);
  // kInvalidArgument naming the field and position: names, ids and
  // checksums valid; 1 ≤ k, 1 ≤ m, k + m ≤ 256; 1..k data pieces, members
  // distinct; objects sorted and unique with sizes summing to the piece
  // length; parity indices < m, increasing, lengths equal to PieceLength().
  Status Validate() const;
  // Adds the parity pieces `other` describes (another holder's record of the
  // same group and step). kInvalidArgument when anything but the parity list
  // differs, or when both describe piece j with different checksums; this
  // record is unchanged then.
  Status Merge(const ParityRecord& other);

  bool operator==(const ParityRecord&) const = default;
};

}  // namespace tierckpt::ec
