// segment_pool.h — recycled tmpfs files ("segments") of the memory tier.
//
// Fresh tmpfs pages cost ~60x a memcpy to fault in (docs/agent.md,
// design.md), so the agent does not unlink the object files of evicted,
// deleted or aborted steps: it renames them into <root>/pool/seg_<n> (same
// inode, pages stay resident) and hands them out again for new objects. A
// client that keeps its mapping of an inode across saves then writes into
// already-faulted pages.
//
// Take picks the best fit: the smallest segment with size >= the request,
// else the largest one (grown); it is truncated to the exact size and renamed
// to its destination. Pool bytes count as used memory; the memory tier
// shrinks the pool first when it needs space (ReleaseOne).
//
// Affinity: a segment remembers the object it last held (SegmentAffinity:
// its namespace and object name, e.g. rank 0's "__0_0.distcp"), and Reserve
// prefers, among the segments of the best-fit size, one that held the same
// object. A rank's client keeps its mapping of the segment it wrote last
// (client/mapping_cache.h); two ranks whose objects are the same size would
// otherwise swap segments from save to save, and each would map and
// populate a whole file again (~40 ms for 270 MB on the 2-core VM, decision
// 170). Only a preference: the best fit's size is never given up for it.
//
// The agent keeps read mappings of these files (tier/read_mappings.h): a
// segment's mapping follows it into and out of the pool, and ReleaseOne tells
// the mappings before it unlinks one.
//
// Reserve/Return/NewId/Adopt/PickRelease split a move into and out of the
// pool into the index change (under the memory tier's lock) and the file's
// rename or unlink (by tier/tier_files.h, outside that lock): a reserved
// segment is out of the index while its file still sits at its seg_<n> path.
//
// Thread-compatible: the memory tier guards it with its mutex. Movable (the
// tier's recovery loads a pool of its own and hands it over).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

#include "tier/read_mappings.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// The affinity of a segment that held object `name` of namespace `ns`.
std::string SegmentAffinity(std::string_view ns, std::string_view name);

class SegmentPool {
 public:
  // mappings (may be null; must outlive the pool) is told of every segment
  // ReleaseOne unlinks.
  explicit SegmentPool(std::string dir, ReadMappings* mappings = nullptr)
      : dir_(std::move(dir)), mappings_(mappings) {}

  // Creates the pool dir (0700; its parent must exist) and adopts every
  // regular seg_* file in it; anything else there is removed. Never follows
  // a symbolic link: a link in place of the pool dir or of a segment is
  // logged and removed as a link, its target untouched (layout.h). Call once
  // before other methods.
  Status Load();

  // Moves the file at path (on the same filesystem) into the pool and returns
  // the bytes it adds (its real size). Empty or non-regular files are removed
  // instead (returns 0). kNotFound if path does not exist.
  Result<uint64_t> Put(const std::string& path);

  // Size of the segment Take(size, ...) would use; nullopt if the pool is empty.
  std::optional<uint64_t> BestFit(uint64_t size) const;

  // Moves the best-fit segment to dest (its parent dir must exist), truncated
  // to exactly size bytes, and returns the segment's previous size.
  // Precondition: !empty(). On failure the segment stays in the pool.
  Result<uint64_t> Take(uint64_t size, const std::string& dest);

  // A segment out of the index (Reserve, PickRelease); its file is at path.
  struct Segment {
    uint64_t id = 0;
    uint64_t size = 0;
    std::string path;
    std::string affinity;  // of the object it last held ("" if unknown)
  };
  // Takes the best-fit segment (as Take would) out of the index, leaving its
  // file where it is for the caller to move; nullopt if the pool is empty.
  // Among the segments of the best-fit size, one whose affinity equals
  // `affinity` (when not empty) is taken first.
  std::optional<Segment> Reserve(uint64_t size, std::string_view affinity = {});
  // Puts a reserved segment back (its move failed), with its affinity;
  // size_now: its size on disk.
  void Return(const Segment& seg, uint64_t size_now);
  // A fresh seg_<id> name for a file the caller will rename there, then Adopt.
  uint64_t NewId() { return next_id_++; }
  std::string PathOf(uint64_t id) const { return SegPath(id); }
  // Records the file renamed to PathOf(id), size bytes, last holding the
  // object of `affinity` ("" if unknown).
  void Adopt(uint64_t id, uint64_t size, std::string affinity = {});
  // Takes the segment ReleaseOne would unlink out of the index, for the
  // caller to unlink (forgetting its mapping); nullopt if none.
  std::optional<Segment> PickRelease(std::optional<uint64_t> keep_for);

  // Unlinks one segment, the largest except the one BestFit(keep_for) names
  // (when keep_for is set); returns the bytes freed, 0 if nothing to release.
  Result<uint64_t> ReleaseOne(std::optional<uint64_t> keep_for);

  uint64_t bytes() const { return bytes_; }
  size_t count() const { return segs_.size(); }
  bool empty() const { return segs_.empty(); }
  const std::string& dir() const { return dir_; }

 private:
  using Seg = std::pair<uint64_t, uint64_t>;  // (size, id)
  std::set<Seg>::const_iterator Pick(uint64_t size) const;
  std::string SegPath(uint64_t id) const;
  // Every change of segs_ goes through these two, which keep the affinity
  // indexes and bytes_ with it. Erase returns the segment's affinity.
  void Insert(uint64_t size, uint64_t id, std::string affinity);
  std::string Erase(std::set<Seg>::const_iterator it);

  std::string dir_;
  ReadMappings* mappings_;
  std::set<Seg> segs_;
  std::map<uint64_t, std::string> affinity_of_;                    // id -> affinity (segments that have one)
  std::set<std::tuple<std::string, uint64_t, uint64_t>> by_affinity_;  // (affinity, size, id)
  uint64_t next_id_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace tierckpt::agent
