// read_mappings.h — read-only mappings of the memory tier's files, kept
// while the files live, for the agent's own reads: the hash at seal, Verify,
// and the persister's hash and copy.
//
// Why: setting up page tables costs more than reading the bytes. On the
// project's 2-core VM, for 1 GiB of resident tmpfs pages (4 KiB pages; shmem
// huge pages are off), XXH3 reads at 20.5 GB/s through a mapping that already
// exists, 7.7 GB/s through pread in 256 KiB chunks, and 6.3 GB/s through a
// fresh mmap(MAP_POPULATE). The memory tier recycles its files (same inode,
// segment pool: design.md "Recycle, don't reallocate"), so the agent keeps one
// mapping per file and reuses it, as clients do.
//
// Identity: files are keyed by inode (st_dev, st_ino). Renames keep the inode,
// so a mapping follows its file pool → step → pool → trash by construction. A
// kept mapping keeps its inode alive, so while an entry exists no other file
// can carry its key: the key of a freshly opened and fstat'ed file names the
// file the entry maps.
//
// Lifetime of an entry:
// * made by the first Open of a file of at least min_file_bytes, mapping the
//   file's size then (MAP_SHARED, PROT_READ, MAP_POPULATE);
// * reused by later Opens while the mapping covers the file's current size
//   (a file that shrank is read through the prefix of its longer mapping; one
//   that grew past it is mapped again);
// * dropped by Forget / ForgetPath, which the memory tier and the segment pool
//   call before they unlink a file (a kept mapping of an unlinked file would
//   pin its pages);
// * dropped least-recently-used first when a new one would pass max_bytes of
//   mapped address space or max_mappings entries. This also bounds what a file
//   removed behind the agent's back can keep pinned.
// Forgetting a file that lives on is harmless: its next Open maps it again.
// Files smaller than min_file_bytes are read with pread into a buffer instead
// (cheaper than mapping them, and thousands of small objects must not
// approach vm.max_map_count).
//
// Reads see the file's current bytes (MAP_SHARED): a client's later writes
// are visible, so verification through a kept mapping is as strict as through
// a new one. A file truncated below the offsets being read raises SIGBUS, as
// with any mapping; the memory tier reads only pinned files whose size it has
// just checked (docs/agent.md, "What clients must know about recycling").
//
// Thread safety: thread-safe. mu_ guards the index; mmap and munmap run
// outside it. A ReadView shares ownership of its mapping, so it stays valid
// after its entry is forgotten or evicted. Lock order: callers may hold their
// own locks (MemoryTier::mu_) around Forget; ReadMappings never calls out.
#pragma once

#include <sys/stat.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "os/fs_stat.h"
#include "os/mapping.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct FileKey {
  uint64_t dev = 0;
  uint64_t ino = 0;
  auto operator<=>(const FileKey&) const = default;
};
FileKey KeyOf(const struct stat& st);
FileKey KeyOf(const FileStat& st);

// The bytes of one file as they were sized when it was opened. Copyable;
// the bytes stay readable while any copy lives.
class ReadView {
 public:
  ReadView() = default;
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  FileKey key() const { return key_; }
  // True when read through a kept mapping (false: a buffer or, for a file
  // too large to keep, a mapping of its own).
  bool kept() const { return kept_; }

 private:
  friend class ReadMappings;
  std::shared_ptr<const void> owner_;  // a Mapping or a heap buffer
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  FileKey key_;
  bool kept_ = false;
};

struct ReadMappingsOptions {
  uint64_t max_bytes = 0;             // mapped address space kept (0: none kept)
  size_t max_mappings = 16384;        // entries kept (each is one VMA)
  uint64_t min_file_bytes = 1 << 20;  // smaller files are read with pread
};

struct ReadMappingsStats {
  size_t mappings = 0;       // entries kept now
  uint64_t mapped_bytes = 0;  // their total length
  uint64_t hits = 0;          // Opens served by a kept mapping
  uint64_t maps = 0;          // mmap calls (new files, files that grew, files too large to keep)
  uint64_t evictions = 0;     // entries dropped to stay within the bounds
  uint64_t forgotten = 0;     // entries dropped by Forget / ForgetPath
};

class ReadMappings {
 public:
  explicit ReadMappings(ReadMappingsOptions options) : options_(options) {}
  ReadMappings(const ReadMappings&) = delete;
  ReadMappings& operator=(const ReadMappings&) = delete;

  // Opens path read-only and returns a view of the whole file (its size at
  // open time; compare it with what you expect). Errors name the path: open,
  // fstat, mmap, or (small files) a read cut short.
  Result<ReadView> Open(const std::string& path);

  // The file is being unlinked: drop its entry (no-op if none).
  void Forget(FileKey key);
  // lstat(path) and Forget its key; no-op if path does not exist.
  void ForgetPath(const std::string& path);

  ReadMappingsStats Stats() const;
  const ReadMappingsOptions& options() const { return options_; }

 private:
  struct Entry {
    std::shared_ptr<const Mapping> mapping;
    std::list<FileKey>::iterator lru;  // position in lru_
  };
  // Makes room for bytes more (evicting into *dropped); false if it cannot.
  bool MakeRoomLocked(uint64_t bytes, std::vector<std::shared_ptr<const Mapping>>* dropped) REQUIRES(mu_);

  // Const after construction.
  const ReadMappingsOptions options_;

  mutable Mutex mu_;
  std::map<FileKey, Entry> entries_ GUARDED_BY(mu_);
  std::list<FileKey> lru_ GUARDED_BY(mu_);  // most recently used first
  uint64_t mapped_bytes_ GUARDED_BY(mu_) = 0;
  ReadMappingsStats counters_ GUARDED_BY(mu_);  // (hits, maps, evictions, forgotten)
};

// The checksum ("xxh3-64:...") of the object file at path, read through
// mappings; kCorruption when it no longer holds `size` bytes (resized after
// sealing), the open's error when it cannot be read.
Result<std::string> HashObjectFile(ReadMappings& mappings, const std::string& path, uint64_t size);

}  // namespace tierckpt::agent
