// s3_parallel.h — run N independent tasks on a few threads (multipart parts,
// ranged GETs, delete batches, HEADs).
//
// ParallelFor(count, concurrency, task) calls task(i) once for each i in
// [0, count), on at most `concurrency` threads (the caller's thread alone when
// that is 1 or count is 1). After the first failure no new task starts; tasks
// already running finish. Returns Ok, or the failure of the lowest index that
// failed. `task` must be safe to call from several threads at once.
#pragma once

#include <cstddef>
#include <functional>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

Status ParallelFor(size_t count, int concurrency, const std::function<Status(size_t)>& task);

}  // namespace tierckpt::s3
