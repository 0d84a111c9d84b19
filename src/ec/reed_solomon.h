// reed_solomon.h — a systematic Reed-Solomon erasure code over GF(2^8), on
// Intel ISA-L (decision 121; issue 23): K data pieces and M parity pieces of
// one length, any K of the K+M enough to rebuild every other.
//
// The code is a Cauchy generator (gf_gen_cauchy1_matrix): the first K rows are
// the identity (the data pieces are stored as they are), the M rows below
// give the parity; every K×K submatrix of a Cauchy-extended identity is
// invertible, so any M erasures are recoverable for every K + M ≤ 256. XOR
// parity is the special case M = 1 in cost, not in coefficients.
//
// A parity holder receives the data pieces one at a time and from different
// nodes: Update folds one piece into the parity (which starts zeroed), so it
// never holds more than one data piece and the parity (ISA-L's
// ec_encode_data_update); Encode does all K at once. Both give the same bytes.
//
// Pieces of different lengths (a group's parts differ in size) are the
// caller's: it encodes the shorter ones as if zero-padded to the longest
// (a zero byte contributes nothing to any parity), which ZeroTail helps with.
//
// Thread safety: a ReedSolomon is immutable after Create; its methods are
// const and may run concurrently. Buffers are the caller's, never retained.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::ec {

class ReedSolomon {
 public:
  // The largest K + M: GF(2^8) has 256 elements and the Cauchy rows need
  // distinct ones.
  static constexpr uint32_t kMaxPieces = 256;

  // kInvalidArgument unless 1 ≤ k, 1 ≤ m and k + m ≤ kMaxPieces.
  static Result<ReedSolomon> Create(uint32_t k, uint32_t m);

  uint32_t k() const { return k_; }
  uint32_t m() const { return m_; }

  // parity[j] (m buffers of len bytes) = the j-th parity of data (k buffers
  // of len bytes). kInvalidArgument on a count that is not k (data) or m
  // (parity), or a null buffer with len > 0.
  Status Encode(std::span<const uint8_t* const> data, std::span<uint8_t* const> parity, size_t len) const;

  // Adds data piece `index` (len bytes) into parity (m buffers of len bytes,
  // zeroed before the first Update of a group). After every index in [0, k)
  // was added once, parity is Encode's. Adding one twice cancels it (GF(2^8)
  // addition is XOR): a caller that may see a piece again must track which it
  // added. kInvalidArgument on index ≥ k or m parity buffers not given.
  Status Update(uint32_t index, const uint8_t* data, std::span<uint8_t* const> parity, size_t len) const;

  // Rebuilds lost pieces. pieces has k + m entries, data pieces first: the
  // bytes of each piece that survives, nullptr for one that is lost. out has
  // k + m entries too: where to write each lost piece that is wanted (nullptr:
  // not wanted; entries of surviving pieces must be nullptr). Uses the first k
  // survivors. kFailedPrecondition, naming the counts, when fewer than k
  // pieces survive; kInvalidArgument on the shapes.
  Status Reconstruct(std::span<const uint8_t* const> pieces, std::span<uint8_t* const> out, size_t len) const;

 private:
  ReedSolomon(uint32_t k, uint32_t m, std::vector<uint8_t> matrix, std::vector<uint8_t> parity_tables)
      : k_(k), m_(m), matrix_(std::move(matrix)), parity_tables_(std::move(parity_tables)) {}

  uint32_t k_;
  uint32_t m_;
  std::vector<uint8_t> matrix_;         // (k + m) × k generator, row-major; identity on top
  std::vector<uint8_t> parity_tables_;  // ec_init_tables of the m parity rows (32·k·m bytes)
};

// Zeroes buf[from, len): the padding of a piece shorter than the group's length.
void ZeroTail(uint8_t* buf, size_t from, size_t len);

}  // namespace tierckpt::ec
