// reed_solomon.cc — see reed_solomon.h.
#include "ec/reed_solomon.h"

#include <isa-l/erasure_code.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace tierckpt::ec {

namespace {

// ISA-L takes lengths as int: larger pieces go through in chunks.
constexpr size_t kChunk = size_t{1} << 30;

Status CheckLen(std::string_view what, size_t count, size_t want) {
  if (count == want) return Status::Ok();
  return InvalidArgument(std::string(what) + ": " + std::to_string(count) + " buffers given, " +
                         std::to_string(want) + " expected");
}

template <typename T>
Status CheckNotNull(std::string_view what, std::span<T* const> bufs, size_t len) {
  if (len == 0) return Status::Ok();
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i] == nullptr) return InvalidArgument(std::string(what) + " buffer " + std::to_string(i) + " is null");
  }
  return Status::Ok();
}

// Runs f(offset, n) over [0, len) in chunks ISA-L's int lengths can take.
template <typename F>
void Chunked(size_t len, F f) {
  for (size_t off = 0; off < len; off += kChunk) f(off, static_cast<int>(std::min(kChunk, len - off)));
}

}  // namespace

Result<ReedSolomon> ReedSolomon::Create(uint32_t k, uint32_t m) {
  if (k < 1 || m < 1 || k + m > kMaxPieces) {
    return InvalidArgument("Reed-Solomon " + std::to_string(k) + "+" + std::to_string(m) +
                           ": needs at least 1 data and 1 parity piece and at most " + std::to_string(kMaxPieces) +
                           " pieces in all");
  }
  std::vector<uint8_t> matrix(static_cast<size_t>(k + m) * k);
  gf_gen_cauchy1_matrix(matrix.data(), static_cast<int>(k + m), static_cast<int>(k));
  std::vector<uint8_t> tables(static_cast<size_t>(32) * k * m);
  ec_init_tables(static_cast<int>(k), static_cast<int>(m), matrix.data() + static_cast<size_t>(k) * k, tables.data());
  return ReedSolomon(k, m, std::move(matrix), std::move(tables));
}

Status ReedSolomon::Encode(std::span<const uint8_t* const> data, std::span<uint8_t* const> parity, size_t len) const {
  TC_RETURN_IF_ERROR(CheckLen("Reed-Solomon encode: data", data.size(), k_));
  TC_RETURN_IF_ERROR(CheckLen("Reed-Solomon encode: parity", parity.size(), m_));
  TC_RETURN_IF_ERROR(CheckNotNull("Reed-Solomon encode: data", data, len));
  TC_RETURN_IF_ERROR(CheckNotNull("Reed-Solomon encode: parity", parity, len));
  std::vector<uint8_t*> src(k_), dst(m_);
  Chunked(len, [&](size_t off, int n) {
    for (uint32_t i = 0; i < k_; ++i) src[i] = const_cast<uint8_t*>(data[i]) + off;  // ISA-L only reads them
    for (uint32_t j = 0; j < m_; ++j) dst[j] = parity[j] + off;
    ec_encode_data(n, static_cast<int>(k_), static_cast<int>(m_), const_cast<uint8_t*>(parity_tables_.data()),
                   src.data(), dst.data());
  });
  return Status::Ok();
}

Status ReedSolomon::Update(uint32_t index, const uint8_t* data, std::span<uint8_t* const> parity, size_t len) const {
  if (index >= k_) {
    return InvalidArgument("Reed-Solomon update: data piece " + std::to_string(index) + " of a code with " +
                           std::to_string(k_) + " data pieces");
  }
  TC_RETURN_IF_ERROR(CheckLen("Reed-Solomon update: parity", parity.size(), m_));
  TC_RETURN_IF_ERROR(CheckNotNull("Reed-Solomon update: parity", parity, len));
  if (len > 0 && data == nullptr) return InvalidArgument("Reed-Solomon update: data buffer is null");
  std::vector<uint8_t*> dst(m_);
  Chunked(len, [&](size_t off, int n) {
    for (uint32_t j = 0; j < m_; ++j) dst[j] = parity[j] + off;
    ec_encode_data_update(n, static_cast<int>(k_), static_cast<int>(m_), static_cast<int>(index),
                          const_cast<uint8_t*>(parity_tables_.data()), const_cast<uint8_t*>(data) + off, dst.data());
  });
  return Status::Ok();
}

Status ReedSolomon::Reconstruct(std::span<const uint8_t* const> pieces, std::span<uint8_t* const> out,
                                size_t len) const {
  const uint32_t n = k_ + m_;
  TC_RETURN_IF_ERROR(CheckLen("Reed-Solomon reconstruct: pieces", pieces.size(), n));
  TC_RETURN_IF_ERROR(CheckLen("Reed-Solomon reconstruct: outputs", out.size(), n));
  std::vector<uint32_t> survivors, wanted;
  for (uint32_t i = 0; i < n; ++i) {
    if (pieces[i] != nullptr) {
      if (out[i] != nullptr) {
        return InvalidArgument("Reed-Solomon reconstruct: piece " + std::to_string(i) +
                               " survives and is asked for too");
      }
      if (survivors.size() < k_) survivors.push_back(i);
    } else if (out[i] != nullptr) {
      wanted.push_back(i);
    }
  }
  if (survivors.size() < k_) {
    return FailedPrecondition("Reed-Solomon " + std::to_string(k_) + "+" + std::to_string(m_) + ": " +
                              std::to_string(survivors.size()) + " of " + std::to_string(n) +
                              " pieces survive, and any " + std::to_string(k_) + " are needed to rebuild the others");
  }
  if (wanted.empty() || len == 0) return Status::Ok();
  // The rows of the survivors, inverted, map the survivors back to the data.
  std::vector<uint8_t> rows(static_cast<size_t>(k_) * k_), inverse(static_cast<size_t>(k_) * k_);
  for (uint32_t r = 0; r < k_; ++r) {
    std::memcpy(&rows[static_cast<size_t>(r) * k_], &matrix_[static_cast<size_t>(survivors[r]) * k_], k_);
  }
  if (gf_invert_matrix(rows.data(), inverse.data(), static_cast<int>(k_)) != 0) {
    return Internal("Reed-Solomon " + std::to_string(k_) + "+" + std::to_string(m_) +
                    ": the survivors' rows are singular; this is a tierckpt bug, please report it");
  }
  // Each wanted piece is its generator row times the data: (row · inverse) times the survivors.
  std::vector<uint8_t> decode(wanted.size() * k_);
  for (size_t w = 0; w < wanted.size(); ++w) {
    const uint8_t* row = &matrix_[static_cast<size_t>(wanted[w]) * k_];
    for (uint32_t c = 0; c < k_; ++c) {
      uint8_t s = 0;
      for (uint32_t j = 0; j < k_; ++j) s ^= gf_mul(row[j], inverse[static_cast<size_t>(j) * k_ + c]);
      decode[w * k_ + c] = s;
    }
  }
  std::vector<uint8_t> tables(32 * decode.size());
  ec_init_tables(static_cast<int>(k_), static_cast<int>(wanted.size()), decode.data(), tables.data());
  std::vector<uint8_t*> src(k_), dst(wanted.size());
  Chunked(len, [&](size_t off, int chunk) {
    for (uint32_t r = 0; r < k_; ++r) src[r] = const_cast<uint8_t*>(pieces[survivors[r]]) + off;
    for (size_t w = 0; w < wanted.size(); ++w) dst[w] = out[wanted[w]] + off;
    ec_encode_data(chunk, static_cast<int>(k_), static_cast<int>(wanted.size()), tables.data(), src.data(),
                   dst.data());
  });
  return Status::Ok();
}

void ZeroTail(uint8_t* buf, size_t from, size_t len) {
  if (from < len) std::memset(buf + from, 0, len - from);
}

}  // namespace tierckpt::ec
