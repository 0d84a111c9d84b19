// parity_accumulator.cc — see parity_accumulator.h.
#include "ec/parity_accumulator.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "common/checksum.h"
#include "common/mutex.h"
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

// Nanoseconds since t0 (a steady_clock point), added to *sum.
void AddElapsed(std::chrono::steady_clock::time_point t0, uint64_t* sum) {
  *sum += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace

// The accumulator's state and its two locks. mu_ guards which indices are
// folded or being folded; parity_mu_ guards the parity bytes, held for one
// chunk's GF update at a time (and to grow or shrink the pieces). Order:
// mu_ before parity_mu_.
class ParityAccumulator::State {
 public:
  State(ParityAccumulatorConfig config, ReedSolomon rs, std::vector<std::unique_ptr<PieceMemory>> pieces);

  Status Fold(uint32_t index, const Manifest& part, ObjectSource& source, FoldTimings* timings) EXCLUDES(mu_);
  std::vector<uint32_t> Missing() const EXCLUDES(mu_);
  bool broken() const EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return broken_;
  }
  uint64_t length() const EXCLUDES(parity_mu_) {
    MutexLock lock(&parity_mu_);
    return length_;
  }
  std::span<const uint8_t> Parity(uint32_t j) const EXCLUDES(parity_mu_);
  Result<ParityRecord> Seal() EXCLUDES(mu_);
  Status Publish(uint32_t j, int dir_fd, const std::string& name, const std::string& path) EXCLUDES(mu_, parity_mu_);

 private:
  // Where a pass over a part stopped, and the hash of what it read of each
  // object (a prefix for the object it stopped in).
  struct Pass {
    uint64_t folded = 0;
    std::vector<Checksum> hashes;
    Status status;
  };

  // Reads the part's first `upto` piece bytes and folds them in, one chunk
  // at a time under parity_mu_; with verify, stops after the first object
  // whose hash differs from the manifest's.
  Pass FoldBytes(uint32_t index, const Manifest& part, ObjectSource& source, uint64_t upto, bool verify,
                 FoldTimings* timings) EXCLUDES(parity_mu_);
  // Cancels a failed first pass; sets broken_ when it cannot. Releases the
  // index's claim either way.
  Status Undo(uint32_t index, const Manifest& part, ObjectSource& source, const Pass& first) EXCLUDES(mu_);
  // Why index (and node, when given) cannot be claimed now; Ok when it can.
  Status RefuseLocked(uint32_t index, const std::string* node) const REQUIRES(mu_);
  // The longest piece folded or claimed now.
  uint64_t LongestLocked() const REQUIRES(mu_);
  // Grows or shrinks every held piece to length. A growth that fails leaves
  // every piece at length_ and is returned; a shrink that fails leaves that
  // piece longer, its tail zeros (a shrink follows an exact cancel), and
  // sets length_ all the same.
  Status ResizeLocked(uint64_t length) REQUIRES(parity_mu_);

  // Const after construction.
  const ParityAccumulatorConfig config_;
  const ReedSolomon rs_;
  std::vector<bool> held_;  // by parity index

  mutable Mutex mu_ ACQUIRED_BEFORE(parity_mu_);
  std::vector<std::optional<DataPiece>> folded_ GUARDED_BY(mu_);   // by data index
  std::vector<std::optional<DataPiece>> folding_ GUARDED_BY(mu_);  // claimed, in flight
  bool sealed_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;

  mutable Mutex parity_mu_;
  // By parity index; null when not held (or published).
  std::vector<std::unique_ptr<PieceMemory>> parity_ GUARDED_BY(parity_mu_);
  std::vector<std::vector<uint8_t>> scratch_ GUARDED_BY(parity_mu_);  // a chunk for each row not held
  uint64_t length_ GUARDED_BY(parity_mu_) = 0;                        // of every held parity piece
};

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
  std::vector<std::unique_ptr<PieceMemory>> pieces(config.m);
  for (uint32_t j : config.held) {
    if (!config.memory) {
      pieces[j] = MakeHeapPieceMemory();
      continue;
    }
    Result<std::unique_ptr<PieceMemory>> made = config.memory(j);
    if (!made.ok()) {
      return made.status().WithContext(Where(config) + ": making the memory of parity piece " + std::to_string(j));
    }
    pieces[j] = std::move(made).value();
  }
  return ParityAccumulator(std::make_unique<State>(std::move(config), std::move(rs), std::move(pieces)));
}

ParityAccumulator::ParityAccumulator(std::unique_ptr<State> state) : state_(std::move(state)) {}
ParityAccumulator::ParityAccumulator(ParityAccumulator&&) noexcept = default;
ParityAccumulator& ParityAccumulator::operator=(ParityAccumulator&&) noexcept = default;
ParityAccumulator::~ParityAccumulator() = default;

Status ParityAccumulator::Fold(uint32_t index, const Manifest& part, ObjectSource& source, FoldTimings* timings) {
  return state_->Fold(index, part, source, timings);
}
bool ParityAccumulator::Complete() const { return state_->Missing().empty(); }
std::vector<uint32_t> ParityAccumulator::Missing() const { return state_->Missing(); }
bool ParityAccumulator::broken() const { return state_->broken(); }
uint64_t ParityAccumulator::length() const { return state_->length(); }
std::span<const uint8_t> ParityAccumulator::Parity(uint32_t j) const { return state_->Parity(j); }
Result<ParityRecord> ParityAccumulator::Seal() { return state_->Seal(); }
Status ParityAccumulator::Publish(uint32_t j, int dir_fd, const std::string& name, const std::string& path) {
  return state_->Publish(j, dir_fd, name, path);
}

ParityAccumulator::State::State(ParityAccumulatorConfig config, ReedSolomon rs,
                                std::vector<std::unique_ptr<PieceMemory>> pieces)
    : config_(std::move(config)),
      rs_(std::move(rs)),
      held_(config_.m, false),
      folded_(config_.members),
      folding_(config_.members),
      parity_(std::move(pieces)),
      scratch_(config_.m) {
  for (uint32_t j : config_.held) held_[j] = true;
  MutexLock lock(&parity_mu_);
  for (uint32_t j = 0; j < config_.m; ++j) {
    if (!held_[j]) scratch_[j].resize(config_.chunk_bytes);
  }
}

std::vector<uint32_t> ParityAccumulator::State::Missing() const {
  MutexLock lock(&mu_);
  std::vector<uint32_t> out;
  for (uint32_t i = 0; i < folded_.size(); ++i) {
    if (!folded_[i]) out.push_back(i);
  }
  return out;
}

std::span<const uint8_t> ParityAccumulator::State::Parity(uint32_t j) const {
  if (j >= config_.m || !held_[j]) return {};
  MutexLock lock(&parity_mu_);
  if (parity_[j] == nullptr || length_ == 0) return {};
  return {parity_[j]->data(), static_cast<size_t>(length_)};
}

uint64_t ParityAccumulator::State::LongestLocked() const {
  uint64_t longest = 0;
  for (const auto* pieces : {&folded_, &folding_}) {
    for (const std::optional<DataPiece>& d : *pieces) {
      if (d) longest = std::max(longest, d->length);
    }
  }
  return longest;
}

Status ParityAccumulator::State::ResizeLocked(uint64_t length) {
  for (uint32_t j = 0; j < config_.m; ++j) {
    if (parity_[j] == nullptr) continue;
    Status resized = parity_[j]->Resize(length);  // grows zero-filled
    if (resized.ok() || length < length_) continue;
    for (uint32_t i = 0; i < j; ++i) {
      if (parity_[i] != nullptr) parity_[i]->Resize(length_).IgnoreError();  // back: only what it added goes
    }
    return resized.WithContext(Where(config_) + ": growing parity piece " + std::to_string(j) + " to " +
                               std::to_string(length) + " bytes");
  }
  length_ = length;
  return Status::Ok();
}

ParityAccumulator::State::Pass ParityAccumulator::State::FoldBytes(uint32_t index, const Manifest& part,
                                                                   ObjectSource& source, uint64_t upto,
                                                                   bool verify, FoldTimings* timings) {
  FoldTimings unused;
  FoldTimings& t = timings != nullptr ? *timings : unused;
  Pass pass;
  pass.hashes.resize(part.objects.size());
  // Each Fold its own chunk (Folds run at once), made only when the source
  // has no bytes in place to View, and not zero-filled: every byte used is
  // read first.
  std::unique_ptr<uint8_t[]> chunk;
  std::vector<uint8_t*> dst(config_.m);
  uint64_t start = 0;  // of the object in the piece
  for (size_t o = 0; o < part.objects.size() && start < upto; ++o) {
    const ObjectEntry& obj = part.objects[o];
    const uint64_t end = std::min(upto, start + obj.size);
    Hasher hasher;
    // Set at the object's first chunk when the source vouches that its bytes
    // hash to the manifest's checksum (decision 149): not hashed again.
    std::optional<Checksum> vouched;
    auto finish = [&] { pass.hashes[o] = vouched ? *vouched : hasher.Finish(); };
    for (uint64_t at = start; at < end;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(config_.chunk_bytes, end - at));
      auto t0 = std::chrono::steady_clock::now();
      const uint8_t* data = nullptr;
      Result<const uint8_t*> view = source.View(obj.name, at - start, n);
      pass.status = view.status();
      if (pass.status.ok()) data = *view;
      if (pass.status.ok() && data == nullptr) {
        if (chunk == nullptr) chunk.reset(new uint8_t[config_.chunk_bytes]);
        pass.status = source.Read(obj.name, at - start, chunk.get(), n);
        data = chunk.get();
      }
      AddElapsed(t0, &t.read_ns);
      if (!pass.status.ok()) {
        finish();
        pass.status = pass.status.WithContext(Where(config_) + ": reading data piece " +
                                              std::to_string(index) + " (node " + part.node + ")");
        return pass;
      }
      if (at == start && !obj.checksum.empty() && source.VerifiedChecksum(obj.name) == obj.checksum) {
        Result<Checksum> sum = Checksum::Parse(obj.checksum);
        if (sum.ok()) vouched = *sum;
      }
      if (!vouched) {
        t0 = std::chrono::steady_clock::now();
        hasher.Update(data, n);
        AddElapsed(t0, &t.hash_ns);
      }
      t0 = std::chrono::steady_clock::now();
      {
        MutexLock lock(&parity_mu_);
        AddElapsed(t0, &t.lock_wait_ns);
        t0 = std::chrono::steady_clock::now();
        // The pointers are taken under the lock: a longer part's Fold may
        // have grown (moved) the pieces since the last chunk.
        for (uint32_t j = 0; j < config_.m; ++j)
          dst[j] = held_[j] ? parity_[j]->data() + at : scratch_[j].data();
        pass.status = rs_.Update(index, data, dst, n);
      }
      AddElapsed(t0, &t.update_ns);
      if (!pass.status.ok()) {  // only on a bug: the shapes are ours
        finish();
        return pass;
      }
      at += n;
      pass.folded = at;
    }
    finish();
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

Status ParityAccumulator::State::Undo(uint32_t index, const Manifest& part, ObjectSource& source,
                                      const Pass& first) {
  bool same = true;
  Status again_status = Status::Ok();
  if (first.folded > 0) {
    Pass again = FoldBytes(index, part, source, first.folded, /*verify=*/false, nullptr);
    again_status = again.status;
    same = again.status.ok() && again.folded == first.folded;
    uint64_t start = 0;
    for (size_t o = 0; same && o < part.objects.size() && start < first.folded; ++o) {
      if (part.objects[o].size > 0 && again.hashes[o] != first.hashes[o]) same = false;
      start += part.objects[o].size;
    }
  }
  MutexLock lock(&mu_);
  folding_[index].reset();
  if (!same) {
    broken_ = true;
    return Aborted(Where(config_) + ": data piece " + std::to_string(index) + " (node " + part.node +
                   ") was refused (" + first.status.message() + ") and reading it again to take it out gave other bytes" +
                   (again_status.ok() ? std::string() : " (" + again_status.message() + ")") +
                   "; this parity is lost, compute it again from every member's part");
  }
  // The cancelled tail past every other piece folded or in flight is zeros
  // again: the pieces shrink back to the longest of those.
  const uint64_t longest = LongestLocked();
  MutexLock parity(&parity_mu_);
  if (longest < length_) ResizeLocked(longest).IgnoreError();  // a shrink: never refused (see ResizeLocked)
  return first.status;
}

Status ParityAccumulator::State::RefuseLocked(uint32_t index, const std::string* node) const {
  if (broken_) return Aborted(Where(config_) + " is broken by an earlier fold; compute it again from scratch");
  if (sealed_)
    return FailedPrecondition(Where(config_) + " is sealed; data piece " + std::to_string(index) +
                              " comes too late");
  for (const auto* pieces : {&folded_, &folding_}) {
    const char* how = pieces == &folding_ ? " (its fold is in flight)" : "";
    if ((*pieces)[index]) {
      return AlreadyExists(Where(config_) + ": data piece " + std::to_string(index) + " (node " +
                           (*pieces)[index]->member + ") was folded already" + how +
                           "; folding it again would cancel it");
    }
    for (uint32_t i = 0; node != nullptr && i < pieces->size(); ++i) {
      if ((*pieces)[i] && (*pieces)[i]->member == *node) {
        return AlreadyExists(Where(config_) + ": node " + *node + "'s part was folded already as data piece " +
                             std::to_string(i) + how + ", not " + std::to_string(index));
      }
    }
  }
  return Status::Ok();
}

Status ParityAccumulator::State::Fold(uint32_t index, const Manifest& part, ObjectSource& source,
                                      FoldTimings* timings) {
  if (index >= config_.members) {
    return InvalidArgument(Where(config_) + ": data index " + std::to_string(index) + " of a group of " +
                           std::to_string(config_.members) + " data members");
  }
  {
    MutexLock lock(&mu_);
    TC_RETURN_IF_ERROR(RefuseLocked(index, nullptr));
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
  DataPiece piece{.member = part.node, .part = HeaderOf(part)};
  for (const ObjectEntry& o : part.objects) {
    if (o.size > UINT64_MAX - piece.length) {
      return InvalidArgument(Where(config_) + ": the part of node " + part.node +
                             " is longer than 2^64 bytes");
    }
    piece.length += o.size;
    piece.objects.push_back(PieceObject{o.name, o.size, o.checksum});
  }
  const auto claimed_at = std::chrono::steady_clock::now();
  {
    // The claim: checked again, since another Fold may have claimed the
    // index or the node while this one validated.
    MutexLock lock(&mu_);
    TC_RETURN_IF_ERROR(RefuseLocked(index, &part.node));
    MutexLock parity(&parity_mu_);
    if (piece.length > length_) {
      TC_RETURN_IF_ERROR(ResizeLocked(piece.length).WithContext("data piece " + std::to_string(index) + " (node " +
                                                                 part.node + ") was not folded"));
    }
    folding_[index] = piece;
  }
  if (timings != nullptr) AddElapsed(claimed_at, &timings->claim_ns);
  Pass pass = FoldBytes(index, part, source, piece.length, /*verify=*/true, timings);
  if (!pass.status.ok()) return Undo(index, part, source, pass);
  MutexLock lock(&mu_);
  folding_[index].reset();
  folded_[index] = std::move(piece);
  return Status::Ok();
}

Result<ParityRecord> ParityAccumulator::State::Seal() {
  MutexLock lock(&mu_);
  if (broken_)
    return Aborted(Where(config_) + " is broken by an earlier fold; compute it again from scratch");
  std::vector<uint32_t> missing;
  for (uint32_t i = 0; i < folded_.size(); ++i) {
    if (!folded_[i]) missing.push_back(i);
  }
  if (!missing.empty()) {
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
  {
    // Every index is folded, so no Fold is in flight (each would have been
    // refused as folded already): the pieces are final.
    MutexLock parity(&parity_mu_);
    for (uint32_t j : config_.held) {
      if (parity_[j] == nullptr) return FailedPrecondition(Where(config_) + ": parity piece " + std::to_string(j) + " was published already");
      r.parity.push_back(ParityPiece{j, length_, ComputeChecksum(parity_[j]->data(), length_).ToString()});
    }
  }
  TC_RETURN_IF_ERROR(r.Validate().WithContext(Where(config_) + ": sealing"));
  sealed_ = true;
  return r;
}

Status ParityAccumulator::State::Publish(uint32_t j, int dir_fd, const std::string& name, const std::string& path) {
  {
    MutexLock lock(&mu_);
    if (!sealed_) return FailedPrecondition(Where(config_) + ": parity piece " + std::to_string(j) + " is published only once the group is sealed");
  }
  MutexLock parity(&parity_mu_);
  if (j >= config_.m || parity_[j] == nullptr) {
    return FailedPrecondition(Where(config_) + ": parity piece " + std::to_string(j) + " is not held here (or was published already)");
  }
  // Sealed, so no Fold is in flight and length_ is final; a shrink that
  // failed (Undo) may have left the memory longer, with a zero tail.
  if (parity_[j]->size() != length_) TC_RETURN_IF_ERROR(parity_[j]->Resize(length_).WithContext(Where(config_) + ": trimming parity piece " + std::to_string(j)));
  TC_RETURN_IF_ERROR(parity_[j]->Publish(dir_fd, name, path).WithContext(Where(config_) + ": publishing parity piece " + std::to_string(j)));
  parity_[j].reset();
  return Status::Ok();
}

}  // namespace tierckpt::ec
