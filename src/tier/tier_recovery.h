// tier_recovery.h — the memory tier's start-up scan: re-indexes a tmpfs
// root after a restart or a kill -9, and returns what it found.
//
// Run walks the root (never following a symbolic link: tier/layout.h) and
// builds, from nothing but what is on disk: a StepIndex of the committed
// steps that survive (manifest parses, names its step, every object file
// is there with its manifest size; checksums are verified lazily, not
// here, except that a record committed before its hash is hashed now),
// their bytes, and the report. Partial steps, the trash, damaged steps and
// leftovers are recycled into the SegmentPool it is given (Loaded
// first) while the budget allows, else unlinked. It holds no lock and
// touches no MemoryTier: the tier hands the result over under its own lock
// (MemoryTier::Recover), then applies the budget.
//
// Thread-compatible: one Run at a time, on a pool no one else uses yet.
// Errors: the root or its namespaces dir cannot be opened or listed, or the
// pool cannot be loaded (the tier must not serve); problems with single
// steps are dropped steps and land in RecoveryReport::errors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tier/layout.h"
#include "tier/read_mappings.h"
#include "tier/segment_pool.h"
#include "tier/step_index.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct RecoveryReport {
  size_t committed_steps = 0;
  size_t partial_dropped = 0;
  size_t damaged_dropped = 0;
  uint64_t bytes = 0;
  std::vector<std::pair<std::string, uint64_t>> persist_pending;  // re-enqueue these
  std::vector<Status> errors;  // damaged steps dropped, leftovers that could not be removed
};

struct RecoveredTier {
  StepIndex index;            // committed steps (persist kQueued where a marker was found)
  uint64_t object_bytes = 0;  // their bytes
  uint64_t next_id = 1;       // past every instance id handed out
  RecoveryReport report;      // persist_pending is left to the tier (after its evictions)
};

class TierRecovery {
 public:
  // mappings: told of every file unlinked (must outlive the call).
  TierRecovery(const Layout& layout, ReadMappings* mappings, uint64_t budget_bytes, bool has_durable);

  // Loads pool (its dir under the root), then scans the root.
  Result<RecoveredTier> Run(SegmentPool* pool);

 private:
  void RecoverNamespace(int namespaces_fd, const std::string& ns, RecoveryReport* report);
  // Fills the empty checksums of a record committed before its hash
  // (Manifest::checksums_pending) from the files in dir and rewrites it.
  Status HashPending(const std::string& dir, Manifest* m);
  void RecoverStepDir(int ns_fd, const std::string& ns, const std::string& entry, uint64_t step,
                      RecoveryReport* report);
  // Recycles the files of the tree `name` in parent_fd into the pool
  // (Pool::kNo: unlinks them) and removes it; links in it are removed as
  // links. A .partial step's files and the trash's are never pooled: a
  // writer that outlived the agent may still write through a mapping of
  // them (decision 77).
  enum class Pool { kYes, kNo };
  void RecycleTreeAt(int parent_fd, const std::string& name, const std::string& path, Pool pool);
  // Into the pool when allowed and the budget allows, else unlinked.
  void RecycleFile(const std::string& path, Pool pool);

  const Layout& layout_;
  ReadMappings* const mappings_;
  const uint64_t budget_bytes_;
  const bool has_durable_;
  SegmentPool* pool_ = nullptr;
  RecoveredTier found_;
};

}  // namespace tierckpt::agent
