// tier_files.h — the memory tier's file-system side: every file and
// directory operation of the save, drop and restore paths on the tmpfs root.
//
// Owns no state of its own: the index, the pool's accounting and the byte
// budget belong to MemoryTier, which decides under its lock what is to
// happen (which name an object gets, which pool segment it takes, which
// dropped step's files go to which seg_<n> name, which paths are reserved
// while they move) and then calls TierFiles WITHOUT its lock. The decisions
// travel as plain values (FileJobs below); what happened comes back as
// values for the tier to record under its lock (FileOutcomes).
//
// Paths are reserved by the caller for as long as a call works on them: a
// step's .partial dir while it is made or moved aside, step_<n> while a
// dropped committed step moves aside. Objects are created beneath the open
// fd of their step's directory (os/tier_io.h), so an object of a dropped
// step never lands in the next instance's directory of the same name.
//
// Thread-safe: no lock of its own, and no state but what is const after
// construction (the layout, the root, the read mappings, themselves
// thread-safe). Errors name the path, the call and what to do.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "os/fd.h"
#include "tier/layout.h"
#include "tier/read_mappings.h"
#include "tier/step_state.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// An object file of a dropped step, and where it goes.
struct RecycledFile {
  std::string name;            // relative to its step dir
  uint64_t recorded_size = 0;  // the bytes the tier accounted for it
  // The pool segment name reserved for it (SegmentPool::NewId), or nullopt:
  // unlinked (the pool may not keep it).
  std::optional<uint64_t> pool_id;
  std::string affinity;  // SegmentAffinity of the object, kept by the pool (set with pool_id)
};

// A dropped step whose files are recycled: its dir moves to `aside` (a name
// no step uses: pool/dropped_<n>), then its files go to the pool or away,
// then the dir is removed. aside empty: dir is private already (a trash
// entry) and stays where it is until removed.
struct RecycleJob {
  std::string dir;
  std::string aside;
  std::vector<RecycledFile> files;
  bool reserved = false;  // dir is a reserved layout path: the tier releases it
  bool keep_dir = false;  // a live step's dir: only the files go (aside empty)
  // A dropped step's files: Run waits for its creators (StepFiles::creating)
  // before it looks at the files. Null for a live step's file (keep_dir).
  std::shared_ptr<StepFiles> files_of;
};

// A dropped step still pinned: its dir moves to a trash entry, recycled on
// the last unpin. files: the step's StepFiles, for the tier to record the
// move in (under its lock; TierFiles never reads or writes it).
struct TrashJob {
  std::string dir;
  std::string trash;
  std::shared_ptr<StepFiles> files;
};

// The I/O a locked section of the tier decided, run once the lock is released.
struct FileJobs {
  std::vector<RecycleJob> recycles;
  std::vector<TrashJob> trash;
  std::vector<std::string> unlink_segments;   // released pool segments (already out of its index)
  std::vector<std::string> namespace_rmdirs;  // namespace dirs that may be empty now
  std::vector<std::string> remove_trees;      // leftovers to remove (reserved paths included)
  std::vector<std::string> release_paths;     // reserved paths to release once the above ran
  bool empty() const {
    return recycles.empty() && trash.empty() && unlink_segments.empty() && namespace_rmdirs.empty() &&
           remove_trees.empty() && release_paths.empty();
  }
  void Append(FileJobs&& o);
};

struct FileOutcomes {
  struct Adopted {
    uint64_t id = 0;  // now seg_<id> in the pool
    uint64_t bytes = 0;
    std::string affinity;
  };
  std::vector<Adopted> adopted;
  uint64_t recycled_recorded = 0;  // recorded bytes of the files that were bound for the pool
  std::vector<std::pair<std::shared_ptr<StepFiles>, Status>> trashed;  // TrashJob.files, and whether it moved
  std::vector<std::string> released;                                   // reserved paths free again
  bool needs_record() const {
    return !adopted.empty() || recycled_recorded > 0 || !trashed.empty() || !released.empty();
  }
};

class TierFiles {
 public:
  TierFiles(const Layout* layout, ReadMappings* mappings) : layout_(layout), mappings_(mappings) {}

  // Makes a step's partial dir (removing what a crash left there) and opens
  // it. The namespace dir is made too; a concurrent removal of an empty
  // namespace dir (namespace_rmdirs) is retried over.
  Result<UniqueFd> MakeStepDir(const std::string& dir) const;

  // The one way an object file is made: `name` beneath the step dir fd,
  // exactly size bytes, mode 0600, exclusively (kAlreadyExists: another
  // call made that name meanwhile). Nothing is left on failure.
  Result<UniqueFd> CreateObjectFile(int step_dir_fd, const std::string& step_dir, std::string_view name,
                                    uint64_t size) const;
  // Moves the pool segment at seg_path (out of the pool's index, seg_size
  // bytes) to `name` beneath the step dir fd, truncated to size bytes, and
  // opens it O_RDWR. On failure *size_now is the segment's size on disk
  // (for SegmentPool::Return) and it is still at seg_path.
  Result<UniqueFd> PlaceSegment(const std::string& seg_path, uint64_t seg_size, int step_dir_fd,
                                const std::string& step_dir, std::string_view name, uint64_t size,
                                uint64_t* size_now) const;
  // Gives every page of an object's file its memory now (fallocate): a full
  // mount is then an error here, not a SIGBUS in a writer's mapping. A file
  // that holds every page already (a recycled segment, reused at its size
  // or smaller: its pages were reserved when it was first created) is left
  // as it is: fallocate would walk all of its pages to find nothing to do,
  // ~28 ms per 512 MiB of 4 KiB pages on the bench VM, on every steady save.
  // "Holds every page" is fstat's allocated bytes equal to size rounded up
  // to the page; anything else (holes, blocks past the end, a file system
  // that counts its own metadata) is reserved. Returns false when the file
  // held every page already (nothing done), true when fallocate was called
  // (and succeeded, or the file system does not support it: EOPNOTSUPP).
  Result<bool> ReserveFile(int fd, uint64_t size, const std::string& what) const;

  // A commit's records (manifest, persist marker) into a partial step dir;
  // on failure neither is left.
  static Status WriteStepRecords(const std::string& partial, const Manifest& manifest, bool persist_marker);
  static void RemoveStepRecords(const std::string& partial);
  // Replaces the manifest of a committed step dir (its checksums filled in
  // after a commit before the hash); on failure the old record stays.
  static Status RewriteManifest(const std::string& dir, const Manifest& manifest);
  // The atomic publish: partial → final. On failure the records go.
  Status Publish(const std::string& partial, const std::string& final_dir) const;

  // Runs what a locked section decided. Never fails as a whole: what cannot
  // be done is logged (a leftover is removed at the next start).
  FileOutcomes Run(FileJobs jobs) const;

 private:
  void Recycle(const RecycleJob& job, FileOutcomes* out) const;
  // Unlinks a file, forgetting its read mapping first.
  void Unlink(const std::string& path) const;

  const Layout* const layout_;
  ReadMappings* const mappings_;
};

}  // namespace tierckpt::agent
