// testing/page_cache.h — what of a file sits in the page cache, for tests of
// writes that bypass it (os/direct_write.h). Test-only; header-only.
#pragma once

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cstddef>
#include <string>
#include <vector>

namespace tierckpt::testing_util {

// Whether the filesystem of dir takes O_DIRECT at all (creates and removes dir/probe).
inline bool TakesDirectIo(const std::string& dir) {
  const std::string probe = dir + "/probe";
  const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0600);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// Whether a write that bypasses the page cache leaves dir's files out of it:
// O_DIRECT taken, and not tmpfs (whose files are the page cache).
inline bool HasSeparatePageCache(const std::string& dir) {
  struct statfs fs;
  return ::statfs(dir.c_str(), &fs) == 0 && fs.f_type != TMPFS_MAGIC && TakesDirectIo(dir);
}

// Pages of the first size bytes of fd resident in the page cache, the last
// page not counted (a bypassing write's buffered tail); -1 if it cannot tell.
// Nothing is read: mincore(2) over a mapping that is never touched.
inline long CachedPagesBeforeTheLast(int fd, size_t size) {
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return -1;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size + page - 1) / page);
  const int rc = ::mincore(map, size, resident.data());
  ::munmap(map, size);
  if (rc != 0) return -1;
  long cached = 0;
  for (size_t i = 0; i + 1 < resident.size(); ++i) cached += resident[i] & 1;
  return cached;
}

}  // namespace tierckpt::testing_util
