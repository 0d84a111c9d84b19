// file_copy.h — kernel-side copies between open files and the access check
// of a directory, for the filesystem storage bottom (store/fs_blob_store.h).
//
// Status-returning like files.h; every error names `what`. Thread-safe (no
// shared state); the usual POSIX rules apply to concurrent use of one fd.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

// Copies [0, size) of in_fd into out_fd at [0, size) with sendfile(2): the
// kernel moves page cache to page cache, with no user copy and no zeroed
// destination pages. Seeks out_fd to 0 first (sendfile writes at its file
// offset) and reads in_fd from offset 0 (its own offset is untouched).
// kUnimplemented when the kernel cannot sendfile between these files
// (EINVAL/ENOSYS before any byte moved): the caller copies another way.
// kCorruption when in_fd ends before size bytes.
Status SendFileExact(int out_fd, int in_fd, uint64_t size, std::string_view what);

// Ok when the calling process may access path with mode (access(2):
// R_OK/W_OK/X_OK); otherwise ErrnoStatus("<what> <path>").
Status CheckAccess(const std::string& path, int mode, std::string_view what);

}  // namespace tierckpt
