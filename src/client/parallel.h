// parallel.h — run independent per-object work on a few threads.
//
// ParallelFor(n, threads, fn) calls fn(i) once for each i in [0, n), on up
// to `threads` threads including the caller's (indices are taken from a
// shared counter, so the order is unspecified). After the first failure no
// new index is started; calls already running finish. Returns the first
// failure (in time) or ok. Thread-safe; fn must be safe to call concurrently.
#pragma once

#include <cstddef>
#include <functional>

#include "tierckpt/status.h"

namespace tierckpt::client {

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn);

}  // namespace tierckpt::client
