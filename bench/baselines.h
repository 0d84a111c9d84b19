// baselines.h — the reference copies every client number is divided by,
// measured in the same run over the same bytes and the same object layout.
//
//   memcpy_whole         src → a resident destination, one memcpy per object,
//                        `threads` threads over objects (the client's
//                        parallelism); best of 3.
//   memcpy_pieces        the same in 256 KiB memcpy calls (glibc switches to
//                        non-temporal stores above a size threshold, so the
//                        two take different paths; either may be faster);
//                        best of 3.
//   memcpy_whole_1thread, memcpy_pieces_1thread: the same on one thread.
//   memcpy_warm          the fastest of the memcpy variants above: the
//                        reference every ratio is taken against.
//   copy_checksum_warm   CopyAndChecksum (the client's one-pass copy + xxh3)
//                        into the resident destination; best of 3. The
//                        ceiling for a verified load (and a client-checksum
//                        save).
//   checksum_only        xxh3 of the source, no copy (the agent's hash of a
//                        sealed object); best of 3.
//   memcpy_cold_anon     into fresh anonymous memory (first-touch faults;
//                        transparent huge pages apply if enabled); once.
//   memcpy_cold_shmem    into a fresh memfd (shmem pages, like a new tmpfs
//                        file: what a save into fresh segments pays); once.
//
// Thread safety: the functions are thread-safe but meant to run alone, since
// they measure memory bandwidth.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tierckpt/status.h"

namespace tierckpt::bench {

struct Measurement {
  std::string name;
  double seconds = 0;  // the reported run (best, or the only one)
  int threads = 1;
  int runs = 1;
  std::string detail;  // for memcpy_warm: which variant it is
};

// Runs every baseline above. src and dst hold layout.total_bytes each; dst
// must be resident. Fails only if memory for the cold runs cannot be had.
Result<std::vector<Measurement>> RunBaselines(const Layout& layout, const HostBuffer& src,
                                              const HostBuffer& dst, int threads);

// The measurement called name in list; nullptr if absent.
const Measurement* Find(const std::vector<Measurement>& list, const std::string& name);

}  // namespace tierckpt::bench
