// rebuild.h — rebuilds a lost data member's part of an erasure-coded group
// from any K surviving pieces (issue 23, decision 123): the other members'
// parts (data pieces) and the parity holders' pieces, described by the
// group's ParityRecord (ec/parity_record.h).
//
// The rebuild streams in chunks of chunk_bytes: for each chunk of the lost
// piece it reads that chunk of K survivors, decodes it (ReedSolomon::
// Reconstruct) and writes the lost objects' bytes to the sink, hashing each
// object; only the lost piece's length is read of each survivor. A short last
// group's missing data pieces are zeros and survive for free.
//
// Which survivors: the data pieces first (no decoding cost in a systematic
// code), then the parity pieces by index. The result is trusted only when
// every rebuilt object matches its checksum in the record. When one does not
// (or a survivor's read fails), each survivor used is checked in full against
// the record (a data piece's objects against their checksums, a parity piece
// against its checksum), those that do not match are set aside, and the
// rebuild runs again from offset 0 with others, so a corrupt parity piece is
// detected and not used as long as K good survivors remain. A parity piece
// the record does not describe is never used (merge the holders' records
// first: ParityRecord::Merge).
//
// Thread safety: a free function; the sources and the sink are used by one
// thread, this one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ec/parity_record.h"
#include "ec/piece_io.h"
#include "tierckpt/status.h"

namespace tierckpt::ec {

struct Survivor {
  // 0..k-1: the data piece of that index (its member's part, read through
  // `part`); k..k+m-1: parity piece (piece - k), read through `parity`.
  uint32_t piece = 0;
  ObjectSource* part = nullptr;
  PieceSource* parity = nullptr;
};

struct RebuildOptions {
  size_t chunk_bytes = size_t{4} << 20;  // read and decoded at once, per survivor
};

struct RebuildReport {
  std::vector<uint32_t> used;  // the pieces the successful pass decoded from (zero pieces included)
  // The survivors set aside, and why (bad bytes, a failed read, not described).
  std::vector<std::pair<uint32_t, Status>> rejected;
};

// Rebuilds data piece `lost` of record's group into sink: every object of
// record.data[lost], each verified against its checksum. Errors:
//   kInvalidArgument: the record does not validate; lost is not a data index
//     of the group; a survivor names the lost piece, a piece twice, a piece
//     outside the code or a zero piece of a short group, or lacks its source;
//   kFailedPrecondition: fewer than K usable survivors (those given or left
//     after rejecting bad ones), naming the counts and each rejected one;
//   kCorruption: every survivor used matches the record yet a rebuilt object
//     does not (the record does not describe these pieces);
//   the sink's error, with context.
Result<RebuildReport> RebuildPiece(const ParityRecord& record, uint32_t lost,
                                   std::span<const Survivor> survivors, ObjectSink& sink,
                                   const RebuildOptions& options = {});

}  // namespace tierckpt::ec
