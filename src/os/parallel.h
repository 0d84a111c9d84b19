// parallel.h — the one fork-join: run n independent tasks on a few threads
// (the client's object copies, the CLI's save and restore, S3 parts, ranged
// GETs, delete batches, the replicator's calls to several nodes, directory
// sync).
//
// ParallelFor(n, threads, fn) calls fn(i) at most once for each i in [0, n),
// on at most `threads` threads counting the caller's (threads < 1 counts as
// 1; with one thread, or n == 1, everything runs on the caller's thread in
// index order, so the first failure is the last call). Indices are taken from
// a shared counter, so with several threads their order is unspecified. After
// the first failure no new index is started; calls already running finish.
// Returns when every started call has returned: Ok when all succeeded,
// otherwise the failure of the lowest index that failed (with one thread, the
// first failure). n == 0 returns Ok without calling fn.
//
// Thread safety: fn must be safe to call from several threads at once; the
// function itself keeps no state between calls.
#pragma once

#include <cstddef>
#include <functional>

#include "tierckpt/status.h"

namespace tierckpt {

Status ParallelFor(size_t n, int threads, const std::function<Status(size_t)>& fn);

}  // namespace tierckpt
