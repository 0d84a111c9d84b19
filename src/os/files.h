// files.h — small, Status-returning wrappers over POSIX file calls.
//
// Every function names the path in its error. Thread-safe (no shared state);
// the usual POSIX rules apply to concurrent use of the same paths.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

Result<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode = 0600);

// Writes or reads exactly size bytes at offset, retrying on EINTR and short
// transfers. ReadExact fails with kCorruption on early EOF.
Status PwriteAll(int fd, const void* data, size_t size, uint64_t offset, std::string_view what);
Status PreadExact(int fd, void* data, size_t size, uint64_t offset, std::string_view what);

// Whole-file helpers. ReadFileToString fails with kResourceExhausted if the
// file is larger than max_size.
Result<std::string> ReadFileToString(const std::string& path, size_t max_size);
// Writes path via "<path>.tmp.<pid>.<n>" + fsync + rename + fsync(dir) when
// durable is true (tmp + rename alone otherwise). Readers see the old file or
// the whole new one, never a mix. exclusive=true fails with kAlreadyExists if
// path already exists (checked with link(2), so it is atomic).
Status WriteFileAtomic(const std::string& path, std::string_view data, bool durable,
                       bool exclusive = false);

Status MakeDirs(const std::string& path, mode_t mode = 0700);
// Removes path and everything below it; ok if it does not exist.
Status RemoveTree(const std::string& path);
Status FsyncPath(const std::string& path);  // opens with O_RDONLY and fsyncs
Status RenamePath(const std::string& from, const std::string& to);

// Entry names of a directory, without "." and "..", sorted.
Result<std::vector<std::string>> ListDir(const std::string& path);

struct FileInfo {
  bool exists = false;
  bool is_dir = false;
  bool is_regular = false;
  uint64_t size = 0;
};
// exists=false (and ok) when the path does not exist.
Result<FileInfo> StatPath(const std::string& path);

// "a/b" + "c" → "a/b/c".
std::string JoinPath(std::string_view a, std::string_view b);
// Parent directory of a path ("a/b/c" → "a/b"; "c" → ".").
std::string DirName(std::string_view path);

}  // namespace tierckpt
