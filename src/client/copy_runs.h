// copy_runs.h — the scatter/gather copy behind CopyIn and CopyOut.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/checksum.h"
#include "tierckpt/client.h"
#include "tierckpt/status.h"

namespace tierckpt::client_internal {

enum class CopyDirection { kIntoObject, kOutOfObject };

// Checks that every run lies within [0, object_size) of the object called
// `object_name` (kInvalidArgument naming the first that does not, nothing
// copied), then copies each run between object + run.offset and run.address
// in `direction`, splitting the bytes over `threads` threads (1..64).
Status CopyRuns(uint8_t* object, size_t object_size, std::string_view object_name, const CopyRun* runs,
                size_t count, int threads, CopyDirection direction);

// Copies every run out of the object and returns the checksum of the whole
// object, in one pass over its bytes (decision 156): each 64 KiB piece is
// hashed, then the runs' bytes within it are copied from cache, with
// non-temporal stores when the object is larger than a cache. Runs may come in
// any order and overlap in the object (not in the caller's memory). Checks the
// runs as CopyRuns does, before any byte is copied.
Result<Checksum> CopyOutAndChecksum(const uint8_t* object, size_t object_size, std::string_view object_name,
                                    const CopyRun* runs, size_t count);

}  // namespace tierckpt::client_internal
