// fs_stat.h — what is at a path or behind an fd (stat(2), lstat(2),
// fstat(2), statvfs(3)), and the few metadata changes callers make
// (mkdir(2) of one directory, chmod(2)/fchmod(2), readlink(2)).
//
// files.h's StatPath/StatFd answer "is it a file, how big"; FileStat here
// carries what the security and cache checks need as well (owner, mode,
// device and inode, links, allocated blocks, mtime).
//
// Errors: ErrnoStatus("<what> <path>") (fd.h), where `what` defaults to the
// system call's name; callers pass their own ("checking the socket path")
// so that a message says why the call was made. Thread-safe: no state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "os/files.h"
#include "tierckpt/status.h"

namespace tierckpt {

struct FileStat {
  EntryType type = EntryType::kMissing;  // kMissing only with IfMissing::kOk
  bool is_socket = false;                // type is kOther and it is a Unix socket
  mode_t mode = 0;                       // st_mode & 07777: permissions, setuid/setgid/sticky
  uid_t uid = 0;
  uint64_t nlink = 0;  // 0: the file was unlinked (an fd still holds it)
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t size = 0;             // st_size
  uint64_t allocated_bytes = 0;  // st_blocks * 512: what the file holds on its device
  int64_t mtime_ns = 0;          // st_mtim in nanoseconds since the epoch
  int64_t ctime_ns = 0;          // st_ctim (inode change: rename, truncate, chmod) in nanoseconds
};

// Whether StatPath-like calls follow a symbolic link at the last component.
enum class Follow { kYes, kNo };

// stat(2) (Follow::kYes) or lstat(2) (Follow::kNo) of path. When nothing is
// there (ENOENT): IfMissing::kOk returns type kMissing (ok), kFail returns
// ErrnoStatus("<what> <path>") with kNotFound. Any other failure is
// ErrnoStatus("<what> <path>").
Result<FileStat> StatFile(const std::string& path, Follow follow, IfMissing if_missing,
                          std::string_view what = "stat");

// fstat(2) of an open descriptor; a failure is ErrnoStatus(what), `what`
// naming the file ("stat /x/y").
Result<FileStat> StatOpenFd(int fd, std::string_view what);

struct FsSpace {
  uint64_t free_bytes = 0;   // f_bavail * f_frsize: what an unprivileged writer may use
  uint64_t total_bytes = 0;  // f_blocks * f_frsize
};
// statvfs(3) of the file system holding path; a failure is
// ErrnoStatus("statvfs <path>").
Result<FsSpace> StatFsSpace(const std::string& path);

// mkdir(2) of path alone (its parent must exist; see MakeDirs for parents).
// Ok when something, of any type, is already at path (EEXIST): the caller
// looks at what it is. Other failures: ErrnoStatus("<what> <path>").
Status MakeDir(const std::string& path, mode_t mode, std::string_view what = "mkdir");

// chmod(2) of path (follows a symbolic link: use ChmodFd on an fd already
// checked when the path is not trusted); ErrnoStatus("<what> <path>").
Status ChmodPath(const std::string& path, mode_t mode, std::string_view what = "chmod");
// fchmod(2); ErrnoStatus(what), `what` naming the file.
Status ChmodFd(int fd, mode_t mode, std::string_view what);

// Sets the modification time (nanoseconds since the epoch) of an open file
// (futimens(2)) or of path without following a final symbolic link
// (utimensat(2), AT_SYMLINK_NOFOLLOW); the access time is left as it is.
// A failure is ErrnoStatus("<what>"), `what` naming the file.
Status SetMtimeFd(int fd, int64_t mtime_ns, std::string_view what);
Status SetMtimePath(const std::string& path, int64_t mtime_ns, std::string_view what);

// The target of the symbolic link at path (readlink(2)); a failure is
// ErrnoStatus("readlink <path>") (EINVAL: not a link).
Result<std::string> ReadLink(const std::string& path);

// Whether path is (after following links) a regular file this process may
// execute (stat(2) + access(X_OK)). Any failure is false.
bool IsExecutableFile(const std::string& path);

}  // namespace tierckpt
