// piece_memory.h — where a parity accumulator keeps each held parity piece's
// bytes while its group is folded (ec/parity_accumulator.h), and how they
// become the piece's file once the group is sealed (decision 163).
//
// The accumulator grows a piece zero-filled to the longest data piece folded,
// updates it in place a chunk at a time, and at the seal hands it to the
// holder, which Publishes it as a file of the group's directory. Two
// implementations: HeapPieceMemory (process memory; Publish writes the bytes
// out, one copy) and the parity holder's recycled tmpfs files
// (replication/parity_piece_files.h: the piece is folded in the file's own
// pages and Publish renames the file, no copy; a dropped group's files are
// reused, so a holder in steady state folds into pages that are already
// faulted in, as the memory tier's segment pool does for objects).
//
// Thread-compatible: the accumulator calls it under its parity lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tierckpt/status.h"

namespace tierckpt::ec {

class PieceMemory {
 public:
  virtual ~PieceMemory() = default;

  // Makes the piece `length` bytes long: bytes kept keep their value, bytes
  // added read as zero. The address may change (take data() again after).
  // On failure (kResourceExhausted when the memory is not there) the piece
  // is as before.
  virtual Status Resize(uint64_t length) = 0;
  // The bytes, size() of them; nullptr when size() is 0.
  virtual uint8_t* data() = 0;
  virtual uint64_t size() const = 0;

  // Makes the bytes the regular file `name` of the directory dir_fd (path
  // names it for messages), replacing what is there without following a
  // link; the memory is given up (size() 0) on success. On failure nothing
  // is at name that was not there before and the bytes are still here.
  virtual Status Publish(int dir_fd, const std::string& name, const std::string& path) = 0;
};

// Makes an empty piece's memory for parity piece j of the group the
// accumulator folds.
using PieceMemoryMaker = std::function<Result<std::unique_ptr<PieceMemory>>(uint32_t j)>;

// Process memory (a growable array). Publish writes the bytes through
// "<name>.tmp", then renames it over name (no fsync: the parity root is a
// tmpfs).
std::unique_ptr<PieceMemory> MakeHeapPieceMemory();

}  // namespace tierckpt::ec
