// client_workload.h — the timed part of tc_bench: save a step through the
// client and load it back, several times in one namespace.
//
// Each repetition r saves step first_step + r (BeginStep, WriteObjects of
// every object, Commit) and then loads that step with ReadObjects into the
// resident destination buffer, once per read mode in `loads` (ReadVerify:
// kAlways verifies every checksum in the copy pass; kAttested skips it for
// objects the agent verified recently), the modes' order rotated by one each
// repetition so that none always goes first (interleaved, same run).
// After each load, outside the timing, the destination is compared with the
// source byte for byte; before it, the first and last byte of every object
// in the destination are zeroed (the source has no zero byte), so a skipped
// object cannot go unnoticed.
//
// Phases: repetition 0 is "cold" (fresh shared-memory segments, fresh
// mappings); the next `warmup` repetitions are "warmup" (the agent's
// retention has not yet evicted a step, so they still get fresh segments);
// the rest are "steady" (segments of evicted steps recycled, mappings cached).
// warmup should be at least the agent's keep-last K.
//
// Thread safety: run one workload at a time (it measures memory bandwidth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tierckpt/client.h"
#include "tierckpt/status.h"

namespace tierckpt::bench {

struct WorkloadOptions {
  std::string ns;
  int warmup = 3;  // repetitions between the cold one and the steady ones
  int reps = 5;    // steady repetitions
  std::vector<ReadVerify> loads = {ReadVerify::Always()};  // one load per mode per repetition
};

struct Repetition {
  std::string phase;  // "cold", "warmup" or "steady"
  uint64_t step = 0;
  double begin_s = 0;       // BeginStep round trip
  double write_seal_s = 0;  // WriteObjects: every object created, copied, sealed
  double commit_s = 0;      // Commit: agent verdicts + manifest
  double save_s = 0;        // begin + write/seal + commit
  double load_s = 0;        // ReadObjects (open + copy + verify) with loads[0]
  std::vector<double> load_s_by_mode;  // the same for each of WorkloadOptions::loads
};

// Runs 1 + warmup + reps repetitions. The first step is one past the
// namespace's latest step (1 if it has none). Fails with the client's status,
// with context naming the step and the phase, or kCorruption if a loaded
// object differs from what was saved.
Result<std::vector<Repetition>> RunSaveLoad(Client& client, const Layout& layout,
                                            const HostBuffer& src, const HostBuffer& dst,
                                            const WorkloadOptions& options);

}  // namespace tierckpt::bench
