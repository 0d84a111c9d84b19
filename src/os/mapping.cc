#include "os/mapping.h"

#include <sys/mman.h>

#include <string>

#include "os/fd.h"

namespace tierckpt {

Result<Mapping> Mapping::Map(int fd, size_t size, Access access, bool populate, std::string_view what) {
  Mapping m;
  if (size == 0) return m;
  int prot = access == Access::kReadWrite ? (PROT_READ | PROT_WRITE) : PROT_READ;
  int flags = MAP_SHARED | (populate ? MAP_POPULATE : 0);
  void* p = ::mmap(nullptr, size, prot, flags, fd, 0);
  if (p == MAP_FAILED) {
    return ErrnoStatus("mmap " + std::to_string(size) + " bytes of " + std::string(what));
  }
  m.data_ = p;
  m.size_ = size;
  return m;
}

Status Mapping::Protect(Access access, std::string_view what) {
  if (data_ == nullptr) return Status::Ok();
  int prot = access == Access::kReadWrite ? (PROT_READ | PROT_WRITE) : PROT_READ;
  if (::mprotect(data_, size_, prot) != 0) {
    return ErrnoStatus(std::string(access == Access::kReadWrite ? "make writable again" : "make read-only") +
                       " the mapping of " + std::string(what));
  }
  return Status::Ok();
}

void Mapping::Reset() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tierckpt
