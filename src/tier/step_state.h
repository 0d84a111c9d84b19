// step_state.h — the memory tier's index entries (internal to MemoryTier).
//
// One StepState per (namespace, step) present in memory, either being
// written (its files live in step_<n>.partial/) or committed (step_<n>/).
// All fields are guarded by MemoryTier::mu_; nothing here locks.
//
// StepFiles is shared with agent threads that read the step's files outside
// the lock (hash jobs, persist jobs, verify requests) through a pin: while
// pins > 0 the files are never recycled into the pool (which would truncate
// or overwrite them under a live mapping). Dropping a pinned step renames
// its directory into <root>/trash/ and recycles it on the last unpin.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// Durable-tier progress of a committed step, as known by this agent.
enum class PersistState {
  kNone,     // not requested (it may still be durable from an earlier run)
  kQueued,   // requested; marker on disk; waiting for a persist thread
  kRunning,  // a persist thread is copying it
  kDurable,  // committed in the durable tier
  kFailed,   // retries exhausted; StepState::persist_error says why
};
// "", "pending", "pending", "committed", "failed" (the List/Stats spelling).
const char* PersistStateName(PersistState s);

struct StepFiles {
  std::string ns;   // the step's namespace (its objects' segment affinity)
  std::string dir;  // current directory: partial, final, or trash entry
  // The partial dir, open: objects are created beneath it outside the
  // tier's lock (tier/tier_files.h). Set once when the dir is made, never
  // reset while the StepFiles lives (a creator may be using it); invalid for
  // recovered steps.
  UniqueFd dir_fd;
  int pins = 0;          // agent threads reading the files right now
  bool dropped = false;  // out of the index; recycle when pins reaches 0
  bool moving = false;   // dropped while pinned: its dir is moving to the trash
  bool retention_waits = false;  // retention skipped it for a pin: re-applied on the last unpin
  // Creators making an object file beneath dir_fd right now, outside the
  // tier's lock: counted up under it as the object is reserved, down (no
  // lock) once the file is made. The recycling of a dropped step waits for
  // 0 first, so no file lands in its dir after it was emptied.
  std::atomic<int> creating{0};
  std::string trash_name;  // its entry under <root>/trash once moved
  // Object files to recycle (MemoryTier::RecycleLocked).
  struct DroppedObject {
    std::string name;  // relative to dir
    uint64_t size = 0;  // recorded size
    // The writer had finished with it (sealed, committed, or never handed
    // out). An unsealed object's writer may still be writing through a
    // mapping of the file (a client process, an HTTP upload thread): its
    // file is unlinked, never recycled into the pool, where the next object
    // that takes it (another job's, perhaps committed) would receive the
    // late writes, or a smaller size would SIGBUS the writer.
    bool writer_done = true;
  };
  std::vector<DroppedObject> objects;
};

enum class CheckState { kNone, kPending, kOk, kMismatch, kError };

struct ObjectState {
  uint64_t id = 0;    // unique per created file; stale hash results are ignored
  uint64_t size = 0;  // created size (accounted bytes)
  uint64_t conn = 0;  // the connection that created it (0: the agent's own)
  bool sealed = false;
  CheckState check = CheckState::kNone;
  bool blocks_commit = false;  // its pending hash holds the commit back (StepState::blocking_checks)
  std::string expected;  // checksum the client gave ("" = agent computes)
  std::string actual;    // checksum computed (or trusted) at seal
  Status error;          // when check == kError
  // When the agent's hash of the bytes at rest that matched began (the hash
  // after seal); unset when the agent did not hash them (a client checksum
  // trusted without --verify-on-seal) or not yet.
  std::optional<std::chrono::steady_clock::time_point> verified_at;
};

struct StepState {
  uint64_t instance = 0;  // unique per life of (ns, step) in memory
  bool committed = false;
  // false while the first caller makes the partial dir outside the tier's
  // lock; others wait for it (MemoryTier::BeginLocked).
  bool dir_ready = true;
  std::shared_ptr<StepFiles> files;

  // While being written.
  std::map<std::string, ObjectState> objects;
  std::set<uint64_t> writers;  // connection ids that began or created in it
  std::string owner;           // the writer id that began it (MemoryTier: one writer per step)
  bool committing = false;
  // Its records are being written and its dir renamed into place, outside
  // the tier's lock (MemoryTier::PublishLocked): files->dir changes after.
  bool publishing = false;
  bool restoring = false;  // filled from the durable tier, no writers
  int pending_checks = 0;  // hashes not yet back, also after a commit (commit_before_hash)
  int blocking_checks = 0;  // those of them the commit waits for
  std::chrono::steady_clock::time_point begun;

  // Once committed. objects then holds only the objects whose hash is still
  // pending (a commit before the hash); their manifest entries' checksums
  // are "" until it lands (Manifest::checksums_pending).
  Manifest manifest;
  uint64_t commit_seq = 0;  // global commit order (recovered steps: by created time)
  PersistState persist = PersistState::kNone;
  Status persist_error;
  // The agent recorded the step durable, but a durable copy can be deleted
  // behind its back: before retention drops the memory copy of a kDurable
  // step, the persister checks (and if need be rewrites) the durable copy
  // (durable_recheck: retention asked; durable_confirmed: the check retention
  // asked for succeeded, so retention may drop it now).
  bool durable_recheck = false;
  bool durable_confirmed = false;
  // Per committed object: when the agent last found its bytes at rest
  // matching the manifest (the hash after seal, a restore's verification, a
  // scrub, a Verify, a repair's re-hash), as the time that hash began. An
  // object absent here was never verified in memory (recovered at start, or
  // sealed with a trusted client checksum): attested reads re-hash it.
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> verified;
  // Per committed object: when the latest hash that found it NOT matching
  // began (MemoryTier::MarkMismatch); a verification begun earlier is ignored.
  std::map<std::string, std::chrono::steady_clock::time_point, std::less<>> mismatched;

  uint64_t Bytes() const;  // object bytes (manifest if committed, created sizes if not)
};

// "ns/step" for messages.
std::string StepLabel(std::string_view ns, uint64_t step);
// "n1, n2, n3": node ids (or any names) for messages.
std::string JoinIds(const std::vector<std::string>& ids, std::string_view sep = ", ");

struct NamespaceState {
  std::map<uint64_t, std::unique_ptr<StepState>> steps;
};

}  // namespace tierckpt::agent
