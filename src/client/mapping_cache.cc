#include "client/mapping_cache.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "os/fs_stat.h"

namespace tierckpt::client {
namespace {

// A sweep may take at most this share of the time between two sweeps.
constexpr int kSweepCostShare = 50;  // sweep time * 50 = next interval
constexpr auto kMinSweepInterval = std::chrono::milliseconds(10);
// Entries keep an fd and a VMA each: stay well inside both limits.
constexpr size_t kMaxEntriesCap = 16384;

size_t DefaultMaxEntries() {
  struct rlimit rl {};
  size_t soft = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    soft = static_cast<size_t>(rl.rlim_cur);
  } else if (rl.rlim_cur == RLIM_INFINITY) {
    soft = kMaxEntriesCap * 4;
  }
  return std::clamp<size_t>(soft / 4, 16, kMaxEntriesCap);  // leave most fds to the application
}

}  // namespace

struct MappingCache::Entry {
  Key key;
  Mapping mapping;
  UniqueFd fd;
  bool writable = false;
  std::atomic<bool> writer_busy{false};
  // The writable mapping is PROT_READ now (MakeReadOnly). Touched only by the
  // holder of writer_busy, so it needs no lock of its own.
  bool read_only_now = false;
};

uint8_t* MappingCache::Lease::data() const { return entry_ ? entry_->mapping.data() : nullptr; }
size_t MappingCache::Lease::size() const { return entry_ ? entry_->mapping.size() : 0; }
int MappingCache::Lease::fd() const { return entry_ ? entry_->fd.get() : -1; }

Status MappingCache::Lease::MakeReadOnly(std::string_view what) {
  if (entry_ == nullptr || !entry_->writable || entry_->read_only_now) return Status::Ok();
  TC_RETURN_IF_ERROR(entry_->mapping.Protect(Mapping::Access::kReadOnly, what));
  entry_->read_only_now = true;
  return Status::Ok();
}

void MappingCache::Lease::Reset() {
  if (entry_ != nullptr && entry_->writable) entry_->writer_busy.store(false, std::memory_order_release);
  entry_.reset();
  reused_ = false;
}

MappingCache::MappingCache(const Options& options) : options_(options) {
  if (options_.max_entries == 0) options_.max_entries = DefaultMaxEntries();
}

MappingCache::~MappingCache() = default;

Result<MappingCache::Lease> MappingCache::Acquire(UniqueFd fd, uint64_t expected_size, Mapping::Access access,
                                                  std::string_view what) {
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(fd.get(), "fstat the fd of " + std::string(what)));
  if (st.size != expected_size) {
    return ProtocolError("the agent passed a file of " + std::to_string(st.size) + " bytes for " +
                         std::string(what) + ", expected " + std::to_string(expected_size) +
                         " bytes; the agent and client disagree (check both are the same version)");
  }
  const bool writable = access == Mapping::Access::kReadWrite;
  const Key key{static_cast<dev_t>(st.dev), static_cast<ino_t>(st.ino), expected_size, writable ? 1 : 0};
  const bool cacheable =
      options_.capacity_bytes > 0 && expected_size > 0 && expected_size <= options_.capacity_bytes;

  if (cacheable) {
    Lease hit;
    {
      MutexLock lock(&mu_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        std::shared_ptr<Entry> entry = *it->second;
        bool expected = false;
        if (!writable || entry->writer_busy.compare_exchange_strong(expected, true)) {
          lru_.splice(lru_.begin(), lru_, it->second);
          ++stats_.hits;
          hit.entry_ = std::move(entry);
          hit.reused_ = true;
        }
        // Otherwise another writer holds this mapping: fall through to a private one.
      }
    }
    if (hit.valid()) {
      if (writable && hit.entry_->read_only_now) {
        // A recycled segment handed out for a new object (outside mu_: a
        // syscall): its old bytes are no step's any more, so writing is
        // allowed again. On failure the lease's release clears writer_busy.
        TC_RETURN_IF_ERROR(hit.entry_->mapping.Protect(Mapping::Access::kReadWrite, what));
        hit.entry_->read_only_now = false;
      }
      return hit;  // fd is dropped: the cached one stays
    }
    MutexLock lock(&mu_);
    // Mappings of the same file at another size are stale (the file was
    // resized for reuse): drop them so their address space is released.
    for (auto s = index_.lower_bound(Key{std::get<0>(key), std::get<1>(key), 0, 0});
         s != index_.end() && std::get<0>(s->first) == std::get<0>(key) &&
         std::get<1>(s->first) == std::get<1>(key);) {
      auto next = std::next(s);
      if (std::get<2>(s->first) != expected_size) EraseLocked(s);
      s = next;
    }
  }

  // Map outside the lock: populating a large mapping takes a while.
  bool populate = writable ? options_.populate_writes : options_.populate_reads;
  TC_ASSIGN_OR_RETURN(Mapping mapping, Mapping::Map(fd.get(), expected_size, access, populate, what));
  auto entry = std::make_shared<Entry>();
  entry->key = key;
  entry->mapping = std::move(mapping);
  entry->fd = std::move(fd);
  entry->writable = writable;
  entry->writer_busy.store(writable);

  MutexLock lock(&mu_);
  ++stats_.misses;
  if (cacheable && index_.find(key) == index_.end()) {
    lru_.push_front(entry);
    index_.emplace(key, lru_.begin());
    bytes_ += expected_size;
    EvictLocked();
  }
  Lease lease;
  lease.entry_ = std::move(entry);
  return lease;
}

void MappingCache::MaybeSweep() {
  MutexLock lock(&mu_);
  MaybeSweepLocked();
}

void MappingCache::MaybeSweepLocked() {
  auto now = std::chrono::steady_clock::now();
  if (now < next_sweep_) return;
  SweepLocked();
  auto took = std::chrono::steady_clock::now() - now;
  next_sweep_ =
      now + std::max<std::chrono::steady_clock::duration>(kMinSweepInterval, took * kSweepCostShare);
}

size_t MappingCache::SweepLocked() {
  size_t dropped = 0;
  for (auto it = index_.begin(); it != index_.end();) {
    auto next = std::next(it);
    const Entry& e = **it->second;
    // An fstat failure on an fd we own means the fd is unusable: drop it too.
    Result<FileStat> st = StatOpenFd(e.fd.get(), "stat a cached mapping's fd");
    if (!st.ok() || st->nlink == 0) {
      EraseLocked(it);
      ++dropped;
    }
    it = next;
  }
  stats_.swept += dropped;
  return dropped;
}

size_t MappingCache::SweepDeleted() {
  MutexLock lock(&mu_);
  size_t n = SweepLocked();
  next_sweep_ = std::chrono::steady_clock::now() + kMinSweepInterval;
  return n;
}

void MappingCache::Clear() {
  MutexLock lock(&mu_);
  while (!index_.empty()) EraseLocked(index_.begin());
}

void MappingCache::EraseLocked(std::map<Key, LruList::iterator>::iterator it) {
  bytes_ -= std::get<2>(it->first);
  lru_.erase(it->second);  // a Lease still holding the entry keeps the mapping alive
  index_.erase(it);
}

void MappingCache::EvictLocked() {
  while (!lru_.empty() && (bytes_ > options_.capacity_bytes || index_.size() > options_.max_entries)) {
    auto it = index_.find(lru_.back()->key);
    EraseLocked(it);
    ++stats_.evictions;
  }
}

MappingCache::Stats MappingCache::stats() const {
  MutexLock lock(&mu_);
  Stats s = stats_;
  s.entries = index_.size();
  s.bytes = bytes_;
  return s;
}

}  // namespace tierckpt::client
