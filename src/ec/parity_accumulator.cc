// parity_accumulator.cc — see parity_accumulator.h.
#include "ec/parity_accumulator.h"

#include <algorithm>

#include "common/checksum.h"
#include "common/names.h"

namespace tierckpt::ec {
namespace {

std::string Where(const ParityAccumulatorConfig& c) {
  return "parity of " + c.ns + " step " + std::to_string(c.step) + " group " + std::to_string(c.group) +
         " (rs:" + std::to_string(c.k) + "+" + std::to_string(c.m) + ")";
}

std::string JoinIndices(const std::vector<uint32_t>& v) {
  std::string out;
  for (uint32_t i : v) out += (out.empty() ? "" : ", ") + std::to_string(i);
  return out;
}

}  // namespace

Result<ParityAccumulator> ParityAccumulator::Create(ParityAccumulatorConfig config) {
  TC_ASSIGN_OR_RETURN(ReedSolomon rs, ReedSolomon::Create(config.k, config.m));
  if (config.members < 1 || config.members > config.k) {
    return InvalidArgument(Where(config) + ": a group has 1 to " + std::to_string(config.k) +
                           " data members, not " + std::to_string(config.members));
  }
  if (config.chunk_bytes == 0) return InvalidArgument(Where(config) + ": chunk_bytes must be above 0");
  if (config.held.empty()) {
    for (uint32_t j = 0; j < config.m; ++j) config.held.push_back(j);
  }
  std::sort(config.held.begin(), config.held.end());
  for (size_t i = 0; i < config.held.size(); ++i) {
    if (config.held[i] >= config.m || (i > 0 && config.held[i] == config.held[i - 1])) {
      return InvalidArgument(Where(config) + ": held parity pieces " + JoinIndices(config.held) +
                             " must be distinct and below m = " + std::to_string(config.m));
    }
  }
  return ParityAccumulator(std::move(config), std::move(rs));
}

ParityAccumulator::ParityAccumulator(ParityAccumulatorConfig config, ReedSolomon rs)
    : config_(std::move(config)),
      rs_(std::move(rs)),
      held_(config_.m, false),
      parity_(config_.m),
      scratch_(config_.m),
      folded_(config_.members) {
  for (uint32_t j : config_.held) held_[j] = true;
  for (uint32_t j = 0; j < config_.m; ++j) {
    if (!held_[j]) scratch_[j].resize(config_.chunk_bytes);
  }
}

bool ParityAccumulator::Complete() const { return Missing().empty(); }

std::vector<uint32_t> ParityAccumulator::Missing() const {
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < folded_.size(); ++i) {
    if (!folded_[i]) out.push_back(i);
  }
  return out;
}

std::span<const uint8_t> ParityAccumulator::Parity(uint32_t j) const {
  if (j >= config_.m || !held_[j]) return {};
  return parity_[j];
}

void ParityAccumulator::Resize(uint64_t length) {
  for (uint32_t j = 0; j < config_.m; ++j) {
    if (held_[j]) parity_[j].resize(length);  // grows zero-filled
  }
  length_ = length;
}

ParityAccumulator::Pass ParityAccumulator::FoldBytes(uint32_t index, const Manifest& part,
                                                     ObjectSource& source, uint64_t upto, bool verify) {
  Pass pass;
  pass.hashes.resize(part.objects.size());
  if (chunk_.size() < config_.chunk_bytes) chunk_.resize(config_.chunk_bytes);
  std::vector<uint8_t*> dst(config_.m);
  uint64_t start = 0;  // of the object in the piece
  for (size_t o = 0; o < part.objects.size() && start < upto; ++o) {
    const ObjectEntry& obj = part.objects[o];
    const uint64_t end = std::min(upto, start + obj.size);
    Hasher hasher;
    for (uint64_t at = start; at < end;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(config_.chunk_bytes, end - at));
      pass.status = source.Read(obj.name, at - start, chunk_.data(), n);
      if (!pass.status.ok()) {
        pass.hashes[o] = hasher.Finish();
        pass.status = pass.status.WithContext(Where(config_) + ": reading data piece " +
                                              std::to_string(index) + " (node " + part.node + ")");
        return pass;
      }
      hasher.Update(chunk_.data(), n);
      for (uint32_t j = 0; j < config_.m; ++j)
        dst[j] = held_[j] ? parity_[j].data() + at : scratch_[j].data();
      pass.status = rs_.Update(index, chunk_.data(), dst, n);
      if (!pass.status.ok()) {  // only on a bug: the shapes are ours
        pass.hashes[o] = hasher.Finish();
        return pass;
      }
      at += n;
      pass.folded = at;
    }
    pass.hashes[o] = hasher.Finish();
    if (verify && end == start + obj.size && pass.hashes[o].ToString() != obj.checksum) {
      pass.status = Corruption(Where(config_) + ": object " + obj.name + " of data piece " +
                               std::to_string(index) + " (node " + part.node + ") hashes to " +
                               pass.hashes[o].ToString() + " but its manifest says " + obj.checksum +
                               "; the part was not folded in, send it again from an intact copy");
      return pass;
    }
    start += obj.size;
  }
  return pass;
}

Status ParityAccumulator::Undo(uint32_t index, const Manifest& part, ObjectSource& source, const Pass& first,
                               uint64_t old_length) {
  if (first.folded > 0) {
    Pass again = FoldBytes(index, part, source, first.folded, /*verify=*/false);
    bool same = again.status.ok() && again.folded == first.folded;
    uint64_t start = 0;
    for (size_t o = 0; same && o < part.objects.size() && start < first.folded; ++o) {
      if (part.objects[o].size > 0 && again.hashes[o] != first.hashes[o]) same = false;
      start += part.objects[o].size;
    }
    if (!same) {
      broken_ = true;
      return Aborted(Where(config_) + ": data piece " + std::to_string(index) + " (node " + part.node +
                     ") was refused (" + first.status.message() +
                     ") and reading it again to take it out gave other bytes" +
                     (again.status.ok() ? std::string() : " (" + again.status.message() + ")") +
                     "; this parity is lost, compute it again from every member's part");
    }
  }
  Resize(old_length);  // the cancelled tail is zeros again
  return first.status;
}

Status ParityAccumulator::Fold(uint32_t index, const Manifest& part, ObjectSource& source) {
  if (broken_)
    return Aborted(Where(config_) + " is broken by an earlier fold; compute it again from scratch");
  if (sealed_)
    return FailedPrecondition(Where(config_) + " is sealed; data piece " + std::to_string(index) +
                              " comes too late");
  if (index >= config_.members) {
    return InvalidArgument(Where(config_) + ": data index " + std::to_string(index) + " of a group of " +
                           std::to_string(config_.members) + " data members");
  }
  if (folded_[index]) {
    return AlreadyExists(Where(config_) + ": data piece " + std::to_string(index) + " (node " +
                         folded_[index]->member + ") was folded already; folding it again would cancel it");
  }
  if (part.ns != config_.ns || part.step != config_.step) {
    return InvalidArgument(Where(config_) + ": the part of data piece " + std::to_string(index) + " is of " +
                           part.ns + " step " + std::to_string(part.step));
  }
  if (part.checksums_pending) {
    return FailedPrecondition(Where(config_) + ": the part of node " + part.node +
                              " is still being hashed; fold it once its checksums are in");
  }
  TC_RETURN_IF_ERROR(
      part.Validate().WithContext(Where(config_) + ": the part of data piece " + std::to_string(index)));
  TC_RETURN_IF_ERROR(ValidateNamespace(part.node).WithContext(Where(config_) + ": the part's node id"));
  for (uint32_t i = 0; i < folded_.size(); ++i) {
    if (folded_[i] && folded_[i]->member == part.node) {
      return AlreadyExists(Where(config_) + ": node " + part.node +
                           "'s part was folded already as data piece " + std::to_string(i) + ", not " +
                           std::to_string(index));
    }
  }
  DataPiece piece{.member = part.node, .part = HeaderOf(part)};
  for (const ObjectEntry& o : part.objects) {
    if (o.size > UINT64_MAX - piece.length) {
      return InvalidArgument(Where(config_) + ": the part of node " + part.node +
                             " is longer than 2^64 bytes");
    }
    piece.length += o.size;
    piece.objects.push_back(PieceObject{o.name, o.size, o.checksum});
  }
  const uint64_t old_length = length_;
  if (piece.length > length_) Resize(piece.length);
  Pass pass = FoldBytes(index, part, source, piece.length, /*verify=*/true);
  if (!pass.status.ok()) return Undo(index, part, source, pass, old_length);
  folded_[index] = std::move(piece);
  return Status::Ok();
}

Result<ParityRecord> ParityAccumulator::Seal() {
  if (broken_)
    return Aborted(Where(config_) + " is broken by an earlier fold; compute it again from scratch");
  if (std::vector<uint32_t> missing = Missing(); !missing.empty()) {
    return FailedPrecondition(Where(config_) + ": data pieces " + JoinIndices(missing) + " of " +
                              std::to_string(config_.members) +
                              " are not folded in yet; seal once every member's part is");
  }
  ParityRecord r;
  r.ns = config_.ns;
  r.step = config_.step;
  r.group = config_.group;
  r.k = config_.k;
  r.m = config_.m;
  for (const auto& d : folded_) r.data.push_back(*d);
  for (uint32_t j : config_.held) {
    r.parity.push_back(
        ParityPiece{j, length_, ComputeChecksum(parity_[j].data(), parity_[j].size()).ToString()});
  }
  TC_RETURN_IF_ERROR(r.Validate().WithContext(Where(config_) + ": sealing"));
  sealed_ = true;
  return r;
}

}  // namespace tierckpt::ec
