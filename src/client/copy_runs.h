// copy_runs.h — the scatter/gather copy behind CopyIn and CopyOut.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

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

}  // namespace tierckpt::client_internal
