// MemoryTier::Preallocate: the segment pool filled at start with written
// pages, so the first saves and restores skip the cost of fresh tmpfs pages.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "common/log.h"
#include "os/files.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {
namespace {

// Writes size zero bytes into a new file at path. Written, not fallocated:
// fallocated tmpfs pages are not "up to date", so the first mapping of them
// zeroes every page again (measured: slower than a fresh file).
Status WriteZeros(const std::string& path, uint64_t size) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDWR | O_CREAT | O_TRUNC, 0600));
  if (::fchmod(fd.get(), 0600) != 0) return ErrnoStatus("chmod " + path);
  static const std::vector<char> zeros(1u << 20, 0);
  for (uint64_t off = 0; off < size; off += zeros.size()) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), size - off));
    TC_RETURN_IF_ERROR(PwriteAll(fd.get(), zeros.data(), n, off, path));
  }
  return Status::Ok();
}

}  // namespace

Result<uint64_t> MemoryTier::Preallocate(uint64_t bytes, uint64_t segment) {
  if (segment == 0) return InvalidArgument("Preallocate: the segment size must be at least 1 byte");
  const auto t0 = std::chrono::steady_clock::now();
  // In pool_.dir(); not seg_*: Load removes it after a crash.
  const std::string tmp = layout_.PoolDir() + "/preallocating";
  uint64_t added = 0;
  uint64_t segments = 0;
  std::string stopped = "done";
  Status error = Status::Ok();
  for (;;) {
    uint64_t n = 0;
    uint64_t id = 0;
    std::string seg;
    {
      MutexLock lock(&mu_);
      if (shutting_down_) {
        stopped = "shutdown";
        break;
      }
      if (pool_.bytes() >= bytes) break;
      if (index_.WritingSteps() > 0) {
        stopped = "a step is being written";
        break;
      }
      const uint64_t used = UsedLocked();
      const uint64_t free = options_.budget_bytes > used ? options_.budget_bytes - used : 0;
      n = std::min({segment, bytes - pool_.bytes(), free});
      if (n == 0) {
        stopped = "budget full";
        break;
      }
      preallocating_bytes_ = n;
      id = pool_.NewId();
      seg = pool_.PathOf(id);
    }
    // Written and moved into the pool outside mu_; recorded under it.
    Status wrote = WriteZeros(tmp, n);
    if (wrote.ok()) wrote = RenamePath(tmp, seg);
    MutexLock lock(&mu_);
    preallocating_bytes_ = 0;
    if (wrote.ok()) pool_.Adopt(id, n);
    Result<uint64_t> put = wrote.ok() ? Result<uint64_t>(n) : Result<uint64_t>(wrote);
    if (!put.ok()) {
      RemoveFile(tmp, IfMissing::kOk).IgnoreError();  // a leftover is removed at the next start
      error = put.status().WithContext(
          "preallocating a segment of " + std::to_string(n) + " bytes in " + pool_.dir() +
          " (the segments written before stay in the pool; if the tmpfs is full, lower --preallocate or "
          "--memory-budget, or free the mount)");
      stopped = "error";
      break;
    }
    added += *put;
    ++segments;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  Log log(error.ok() ? LogLevel::kInfo : LogLevel::kWarn, "preallocated");
  log.Kv("bytes", added)
      .Kv("segments", segments)
      .Kv("ms", ms)
      .Kv("mb_per_s", ms > 0 ? static_cast<double>(added) / 1e6 / (ms / 1e3) : 0.0)
      .Kv("stopped", stopped);
  if (!error.ok()) {
    log.Err(error);
    return error;
  }
  return added;
}

}  // namespace tierckpt::agent
