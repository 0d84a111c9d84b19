// mapping.h — the owner of an mmap(2) region.
//
// Mapping is move-only and unmaps on destruction. Map() of size 0 yields an
// empty mapping (data() == nullptr) without calling mmap, since tmpfs objects
// may be empty. Thread-compatible; the bytes themselves are shared memory
// and follow the protocol's rules (written by one client before seal, read
// only after).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "tierckpt/status.h"

namespace tierckpt {

class Mapping {
 public:
  enum class Access { kReadOnly, kReadWrite };

  Mapping() = default;
  ~Mapping() { Reset(); }
  Mapping(Mapping&& o) noexcept : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      Reset();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // Maps [0, size) of fd with MAP_SHARED. populate=true asks the kernel to
  // fault in the pages now (MAP_POPULATE). what names the file for errors.
  static Result<Mapping> Map(int fd, size_t size, Access access, bool populate, std::string_view what);

  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }
  // Changes the protection of the whole mapping (mprotect): kReadOnly makes
  // every later write through it fault (SIGSEGV); kReadWrite undoes that for
  // a mapping made with kReadWrite. No-op on an empty mapping.
  Status Protect(Access access, std::string_view what);
  void Reset();

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tierckpt
