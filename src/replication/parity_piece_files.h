// parity_piece_files.h — the parity holder's piece files (decision 163): each
// held parity piece of a group being folded is a tmpfs file, mapped and
// folded in place, that the seal renames into the group's directory (no copy
// of the piece); a dropped group's piece files come back here and are reused
// for the next group, so a holder in steady state folds into pages that are
// already faulted in, as the memory tier's segment pool (tier/segment_pool.h)
// does for objects. Measured on the bench VM before it: fresh pages (the
// anonymous parity, zero-filled, then written out to fresh tmpfs pages at the
// seal, each fold's receive buffer) were most of a holder's CPU.
//
//   <agent root>/parity_pool/seg_<n>   a piece being folded, or a recycled one
//
// The directory is a SegmentPool's: at its first use it is made (or opened
// without following a link) and every seg_* file in it is adopted as
// recycled, the pieces of folds an earlier agent did not finish included;
// anything else there is removed. A piece file taken from the pool is zeroed
// (memset over its resident pages) before the accumulator folds into it; the
// bytes it grows by are given their pages at once (fallocate), so a full
// mount is kResourceExhausted then, never a SIGBUS in the fold.
//
// Pool bytes are memory the holder uses: ParityHolder counts them against
// its budget and releases them (Release) before refusing a fold.
//
// Thread-safe: one mutex, a leaf (taken under the holder's and the
// accumulator's locks, never the other way round), guards the pool's index.
// A PieceFile is the accumulator's (thread-compatible, under its lock).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "common/mutex.h"
#include "ec/piece_memory.h"
#include "os/fd.h"
#include "tier/segment_pool.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class ParityPieceFiles {
 public:
  // dir: <agent root>/parity_pool (its parent must exist at first use).
  explicit ParityPieceFiles(std::string dir);
  ParityPieceFiles(const ParityPieceFiles&) = delete;
  ParityPieceFiles& operator=(const ParityPieceFiles&) = delete;

  // An empty piece: its file is taken from the pool (best fit) or made at
  // its first Resize. Must not outlive this object. Unpublished, it goes back
  // to the pool when destroyed (with its pages); published, it is gone.
  std::unique_ptr<ec::PieceMemory> Make();

  // Moves the regular file `name` of dir_fd (a dropped group's piece; path
  // names it) into the pool, its pages kept. Returns the bytes it added; 0
  // and nothing done for anything but a non-empty regular file (a link is
  // never followed: the caller removes what is left).
  Result<uint64_t> Recycle(int dir_fd, const std::string& name, const std::string& path);

  // Unlinks pool files, largest first, until at least `bytes` are freed or
  // the pool is empty; returns the bytes freed.
  uint64_t Release(uint64_t bytes);

  // Makes or opens the pool dir and adopts its files (SegmentPool::Load),
  // once; Make's pieces and Recycle do it at their first use otherwise.
  Status Load();

  // Bytes of the recycled files waiting in the pool.
  uint64_t pool_bytes() const;
  const std::string& dir() const { return dir_; }

 private:
  class PieceFile;
  // A file for a piece of `size` bytes: a recycled one (its former size in
  // *recycled, > 0) or a fresh one (0), opened read-write.
  struct Taken {
    uint64_t id = 0;
    UniqueFd fd;
    uint64_t recycled = 0;
  };
  Result<Taken> Take(uint64_t size);
  // A taken file not published: back into the pool's index at size bytes
  // (unlinked when 0).
  void Return(uint64_t id, uint64_t size);
  // Renames taken file id to `name` of dir_fd.
  Status PublishTaken(uint64_t id, int dir_fd, const std::string& name, const std::string& path);
  std::string SegName(uint64_t id) const;
  // Loads the pool at first use; the pool dir's fd.
  Status LoadLocked() REQUIRES(mu_);

  const std::string dir_;
  mutable Mutex mu_;
  bool loaded_ GUARDED_BY(mu_) = false;
  UniqueFd dir_fd_ GUARDED_BY(mu_);
  SegmentPool pool_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
