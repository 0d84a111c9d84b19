// direct_write.h — writing a large buffer into a new file without passing it
// through the page cache (O_DIRECT), where the filesystem takes it.
//
// A buffered write of a checkpoint copies every byte into page-cache pages the
// kernel then writes back: a CPU copy per byte on the agent's cores, next to
// training, and pages that push the training data's own cache out. With
// O_DIRECT the device reads the bytes straight from the caller's buffer (the
// memory tier's mapping of the object). Measured on the 2-core VM: the
// persist's buffered writes were nearly all the agent's CPU during training
// (bench/interference.py under perf; decision 172).
//
// WriteBypassingCache(fd, data, size, what) writes data at offset 0 of fd, a
// file opened for writing and empty:
//   * the body (size rounded down to kDirectAlignment) with O_DIRECT set on fd
//     (fcntl F_SETFL), when data is aligned to kDirectAlignment; then O_DIRECT
//     is cleared and the tail (< kDirectAlignment bytes) is written buffered;
//   * everything buffered instead, from where it stood, when the filesystem
//     refuses O_DIRECT (fcntl fails: FUSE without direct I/O; tmpfs before
//     Linux 6.6), when an O_DIRECT write fails with EINVAL (a device whose
//     block is larger than kDirectAlignment), or after a short O_DIRECT write.
// Returns whether O_DIRECT carried the body; the file's bytes are the same
// either way. It does not fsync: the caller syncs as it would after a
// buffered write (O_DIRECT does not make the file's metadata durable).
//
// Errors: ErrnoStatus naming `what` for a failed write or fcntl (O_DIRECT
// left cleared where it can be). Thread-safe as pwrite(2) is; fd's status
// flags are changed while it runs, so no other thread may use fd meanwhile.
#pragma once

#include <cstddef>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

inline constexpr size_t kDirectAlignment = 4096;

Result<bool> WriteBypassingCache(int fd, const void* data, size_t size, std::string_view what);

}  // namespace tierckpt
