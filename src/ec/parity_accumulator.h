// parity_accumulator.h — a parity holder's parity of one group and one step
// (issue 23, decision 123): the group's data members' parts are folded in as
// they arrive (several at once, decision 148), never more than one bounded
// chunk of each part in the accumulator's memory, and once every member's is
// in, Seal gives the record that describes the parity (ec/parity_record.h).
//
// A member's piece is its part's objects back to back in manifest order; the
// parity pieces grow (zero-filled) to the longest piece folded so far, and a
// shorter piece is folded over its own bytes only (zero padding contributes
// nothing, decision 121).
//
// Fold streams the part from an ObjectSource in chunks of chunk_bytes,
// folding each chunk into the parity (ReedSolomon::Update at the chunk's
// piece offset) and hashing each object as it goes. A source that holds the
// bytes already (ObjectSource::View) is folded in place, without a chunk;
// an object whose source vouches that its bytes hash to the manifest's
// checksum (ObjectSource::VerifiedChecksum: a peer stream checked on
// arrival) is not hashed again (decision 149). A part whose bytes do not
// match its manifest's checksums, or whose source fails mid-way, is taken out
// again: the bytes folded so far are read and folded a second time, which
// cancels them (GF(2^8) addition is XOR), and the second reading's hashes must
// equal the first's, so the cancel is exact. The accumulator is then as
// before the Fold and the index can be folded again. Why cancel rather than
// verify first: the good case, by far the common one, reads each part once
// (a part arriving from a peer is read as it streams); only a refused part is
// read twice. Should the second reading differ from the first or fail (the
// source changed under it), the parity is unknown: the accumulator is broken
// and refuses everything after with kAborted; its parity must be computed
// again from scratch.
//
// Each parity row is computed for every Fold (ISA-L updates all M rows in one
// pass); a holder that keeps only some (`held`) gives the others a chunk of
// scratch, so it holds only its own pieces. Each held piece's bytes live in a
// PieceMemory (ec/piece_memory.h) made by the config's maker: process memory
// by default, the parity holder's recycled tmpfs files in the agent
// (decision 163), which Publish makes the sealed piece's file without a copy.
//
// Thread-safe (decision 148): Folds of distinct data indices run at once,
// each reading, hashing and checking its own part on its caller's thread
// (with its own chunk buffer when it needs one); only the GF(2^8) update of each chunk into the
// parity is serialised (one short lock per chunk), so parts arriving from
// several members stream in together instead of one after the other.
// Addition in GF(2^8) commutes, so the parity does not depend on the order
// in which chunks of different parts are folded, and a refused part is
// cancelled the same way while others fold. An index (or a node) is claimed
// when its Fold begins: a second Fold of it, while the first is in flight,
// is kAlreadyExists as after it. Parity() hands out the bytes themselves:
// read them only while no Fold is in flight (once Complete, or from the one
// caller). The accumulator may be moved only while no call is in flight.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "ec/parity_record.h"
#include "ec/piece_io.h"
#include "ec/piece_memory.h"
#include "ec/reed_solomon.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::ec {

// Where a Fold's time went (each a sum over its chunks, in nanoseconds):
// claiming the index (growing the pieces, zero-filled, for a longer part),
// reading from the source, hashing, waiting for the parity's lock, and the
// GF update itself. For the holder's log line (parity_folded).
struct FoldTimings {
  uint64_t claim_ns = 0;
  uint64_t read_ns = 0;
  uint64_t hash_ns = 0;
  uint64_t lock_wait_ns = 0;
  uint64_t update_ns = 0;
};

struct ParityAccumulatorConfig {
  std::string ns;
  uint64_t step = 0;
  uint32_t group = 0;
  uint32_t k = 0;  // the code: rs:k+m
  uint32_t m = 0;
  // The group's data members, 1..k: fewer than k in a short last group,
  // whose missing pieces are zeros.
  uint32_t members = 0;
  // The parity pieces this holder keeps, each in [0, m); empty: all m.
  std::vector<uint32_t> held;
  // The bytes read and folded at once. Default 4 MiB.
  size_t chunk_bytes = size_t{4} << 20;
  // Where each held piece's bytes live; empty: process memory
  // (MakeHeapPieceMemory).
  PieceMemoryMaker memory;
};

class ParityAccumulator {
 public:
  // kInvalidArgument on a bad code (ReedSolomon::Create), members outside
  // 1..k, a held index ≥ m or repeated, or chunk_bytes 0; the maker's error
  // (with context) when a piece's memory cannot be made.
  static Result<ParityAccumulator> Create(ParityAccumulatorConfig config);

  ParityAccumulator(ParityAccumulator&&) noexcept;
  ParityAccumulator& operator=(ParityAccumulator&&) noexcept;
  ~ParityAccumulator();
  ParityAccumulator(const ParityAccumulator&) = delete;
  ParityAccumulator& operator=(const ParityAccumulator&) = delete;

  // Folds data member `index`'s part, reading its objects from source.
  // Errors, after which the parity is as before the call:
  //   kInvalidArgument: index ≥ members (or ≥ k); the part is of another
  //     namespace or step; the part does not validate or its node id is not
  //     a valid id;
  //   kAlreadyExists: index, or the part's node, was folded already;
  //   kFailedPrecondition: the part's checksums are pending, or Seal ran;
  //   the piece memory's error (kResourceExhausted) when the held pieces
  //     cannot grow to the part's length;
  //   kCorruption: an object's bytes do not match its checksum (named);
  //   the source's error (with context) when a read fails.
  // kAborted when a refused part could not be taken out again (see above):
  // the accumulator is broken from then on (a Fold in flight beside it
  // still ends, but Seal refuses).
  // Folds of distinct indices may run at once (see above); timings, when
  // given, receives where this Fold's time went.
  Status Fold(uint32_t index, const Manifest& part, ObjectSource& source, FoldTimings* timings = nullptr);

  // True once every data index in [0, members) was folded.
  bool Complete() const;
  // The data indices not folded yet, increasing.
  std::vector<uint32_t> Missing() const;
  bool broken() const;
  // The held parity pieces' length now: the longest piece folded or being
  // folded.
  uint64_t length() const;

  // Parity piece j's bytes so far (as long as the longest piece folded);
  // empty when j is not held. Valid until the next Fold: read it while none
  // is in flight.
  std::span<const uint8_t> Parity(uint32_t j) const;

  // The record of the held parity pieces (their checksums computed now).
  // kFailedPrecondition naming the missing data indices before Complete;
  // kAborted when broken. After Seal, Fold is refused; Seal may be called
  // again and gives the same record.
  Result<ParityRecord> Seal();

  // After Seal: makes held piece j the file `name` of dir_fd (path names it
  // for messages) through its PieceMemory's Publish; Parity(j) is empty
  // after. kFailedPrecondition before Seal or for a piece not held (or
  // published already); the memory's error otherwise (the piece is kept).
  Status Publish(uint32_t j, int dir_fd, const std::string& name, const std::string& path);

 private:
  class State;  // parity_accumulator.cc: the locks and what they guard
  explicit ParityAccumulator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tierckpt::ec
