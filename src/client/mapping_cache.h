// mapping_cache.h — the client's cache of shared-memory mappings.
//
// The agent recycles shared-memory segment files by renaming them (same
// inode), and touching fresh tmpfs pages costs ~60x a memcpy. So the client
// keeps its mappings across saves: when the agent hands over an fd whose file
// (st_dev, st_ino, st_size, access) is already mapped here, the existing
// mapping is reused and the new fd is dropped. A steady-state save then costs
// one memcpy and no page faults.
//
// Acquire() returns a Lease: a shared reference to a mapping that stays valid
// while the Lease lives, even after the entry was evicted or the cache
// destroyed. A writable mapping is handed to one Lease at a time (an in-use
// mark cleared when that Lease is released); a second writer of the same file
// gets a private, uncached mapping. Read-only mappings may be shared freely.
//
// Sealed bytes stay read-only: Lease::MakeReadOnly() (Client::Seal calls it
// once the agent sealed the object) mprotects a writable mapping to
// PROT_READ, so a stray write through a kept mapping faults instead of
// changing a committed step. The cache makes the mapping writable again only
// when it hands it to a new writer, i.e. when the agent passed the same file
// (a recycled segment) for a new object.
//
// Memory release: entries beyond capacity_bytes or max_entries are evicted
// least-recently-used first. SweepDeleted() drops entries whose file was
// unlinked (st_nlink == 0 on the kept fd) so their tmpfs pages can be freed.
// MaybeSweep() does the same, rate-limited so that its cost (one fstat per
// entry) stays a small fraction of the time between sweeps: the client calls
// it on every CreateObject/Open answer (before mapping: the agent may just
// have deleted segments to make room), where an unthrottled sweep would cost
// O(entries) per object and O(n^2) for a step of many small objects. An idle
// client relies on client::Sweeper (sweeper.h) instead.
//
// Thread-safe: every method may be called concurrently.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "common/mutex.h"
#include "os/fd.h"
#include "os/mapping.h"
#include "tierckpt/status.h"

namespace tierckpt::client {

class MappingCache {
 public:
  struct Options {
    uint64_t capacity_bytes = 16ull << 30;  // 0 disables caching
    size_t max_entries = 0;                 // 0 = RLIMIT_NOFILE/4, at most 16384 (each entry keeps an fd)
    // Measured on a resident 64 MiB tmpfs file (2-core VM): map + memcpy in
    // takes ~15 ms with MAP_POPULATE against ~20-40 ms faulting page by page;
    // reads fault around 16 pages at a time, so populating gains nothing
    // there (~12-16 ms either way). A kept mapping copies in ~3 ms.
    bool populate_writes = true;  // MAP_POPULATE new writable mappings
    bool populate_reads = false;  // MAP_POPULATE new read-only mappings
  };

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
    uint64_t swept = 0;  // entries dropped because their file was deleted
    size_t entries = 0;
    uint64_t bytes = 0;
  };

 private:
  struct Entry;

 public:
  // A held mapping. Move-only; releasing it (destruction or Reset) clears
  // the writable in-use mark.
  class Lease {
   public:
    Lease() = default;
    ~Lease() { Reset(); }
    Lease(Lease&& o) noexcept = default;
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        Reset();
        entry_ = std::move(o.entry_);
        reused_ = o.reused_;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;

    uint8_t* data() const;
    size_t size() const;
    bool valid() const { return entry_ != nullptr; }
    // The mapped file's fd (kept by the entry while the lease lives); -1 if none.
    int fd() const;
    // True when the mapping came from the cache rather than a fresh mmap.
    bool reused() const { return reused_; }
    // Makes a writable mapping read-only (no-op for a read-only one); a later
    // Acquire of the same file for writing makes it writable again. Only the
    // holder of a writable lease may call it. what names the object for errors.
    Status MakeReadOnly(std::string_view what);
    void Reset();

   private:
    friend class MappingCache;
    std::shared_ptr<Entry> entry_;
    bool reused_ = false;
  };

  explicit MappingCache(const Options& options);
  ~MappingCache();
  MappingCache(const MappingCache&) = delete;
  MappingCache& operator=(const MappingCache&) = delete;

  // Maps fd (the whole file, size from fstat) or reuses a cached mapping of
  // the same file. Takes ownership of fd. what names the object for errors.
  // expected_size: the size the file must have (kProtocolError otherwise).
  Result<Lease> Acquire(UniqueFd fd, uint64_t expected_size, Mapping::Access access, std::string_view what);

  // Drops every entry whose file has been unlinked. Returns how many.
  size_t SweepDeleted();
  // SweepDeleted() unless one ran recently (see the file comment).
  void MaybeSweep();
  // Drops every entry (live leases keep their mappings until released).
  void Clear();

  Stats stats() const;

 private:
  using Key = std::tuple<dev_t, ino_t, uint64_t, int>;  // dev, ino, size, access
  using LruList = std::list<std::shared_ptr<Entry>>;

  void MaybeSweepLocked() REQUIRES(mu_);
  size_t SweepLocked() REQUIRES(mu_);
  void EraseLocked(std::map<Key, LruList::iterator>::iterator it) REQUIRES(mu_);
  void EvictLocked() REQUIRES(mu_);

  // Const after construction.
  Options options_;

  mutable Mutex mu_;
  // Guarded by mu_.
  LruList lru_ GUARDED_BY(mu_);  // most recently used first
  std::map<Key, LruList::iterator> index_ GUARDED_BY(mu_);
  uint64_t bytes_ GUARDED_BY(mu_) = 0;
  Stats stats_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point next_sweep_ GUARDED_BY(mu_){};
};

}  // namespace tierckpt::client
