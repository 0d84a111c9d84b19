// files.h — small, Status-returning wrappers over POSIX file calls.
//
// Every function names the path in its error. Thread-safe (no shared state);
// the usual POSIX rules apply to concurrent use of the same paths.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
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
// path already exists (checked with link(2), so it is atomic). Never writes
// through a symbolic link: the temporary file is opened O_NOFOLLOW and the
// rename or link replaces (never follows) a link at path.
Status WriteFileAtomic(const std::string& path, std::string_view data, bool durable,
                       bool exclusive = false);

// Creates path and its missing parents. Follows symbolic links (for paths the
// user chose); under a tree that is not trusted use MakeDirAt.
Status MakeDirs(const std::string& path, mode_t mode = 0700);
// Removes path and everything below it; ok if it does not exist. Never
// follows a symbolic link: a link at path or below it is removed as a link,
// its target untouched (RemoveTreeAt from path's parent directory).
Status RemoveTree(const std::string& path);
Status FsyncPath(const std::string& path);  // opens with O_RDONLY and fsyncs
Status RenamePath(const std::string& from, const std::string& to);

// What RemoveFile does when there is nothing at the path.
enum class IfMissing {
  kOk,    // already gone is what the caller wanted: Ok
  kFail,  // the caller expected a file: kNotFound
};
// Removes the file at path with unlink(2); a symbolic link is removed as a
// link, never followed. A missing path follows `if_missing`. Any other
// failure (a directory: EISDIR/EPERM; EACCES, EBUSY, EROFS, ...) is
// ErrnoStatus("<what> <path>"). Callers that ignore a failure say so
// (IgnoreError) at the call.
Status RemoveFile(const std::string& path, IfMissing if_missing, std::string_view what = "removing");

// Writes path through the temporary file tmp (the caller names it, so that
// readers of the directory can recognise a partial file): creates tmp with
// O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC and mode (before umask), calls
// fill(fd) to write it, fsyncs it when sync_data is true (the directory is
// not synced), closes it and renames it over path. Readers see the old file
// or the whole new one. On any failure tmp is removed (that removal's own
// failure is dropped: the first failure is the one returned) and path is
// untouched; fill's failure is returned as is.
Status WriteFileVia(const std::string& tmp, const std::string& path, mode_t mode, bool sync_data,
                    const std::function<Status(int fd)>& fill);

// ftruncate(2) and fsync(2) on an open descriptor; a failure is
// ErrnoStatus(what) ("what" names the file and the purpose).
Status TruncateFd(int fd, uint64_t size, std::string_view what);
Status FsyncFd(int fd, std::string_view what);

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
// What the open descriptor is (fstat); `path` names it in the error.
Result<FileInfo> StatFd(int fd, const std::string& path);

// ---- Trees that are not trusted: never follow a symbolic link ----
//
// What the agent finds under its root is not trusted: a symbolic link planted
// there (by mistake, by a restored archive, by a careless script) must never
// lead a walk, a recycling or a removal outside it. These functions work from
// directory fds with openat(O_NOFOLLOW | O_DIRECTORY),
// fstatat(AT_SYMLINK_NOFOLLOW) and unlinkat, and none follows a symbolic link
// at or below the fd (or the last component of the path) it starts from. A
// `path` argument next to a dir_fd only names the entry in messages. A link
// found where a directory or file is expected fails with
// kFailedPrecondition: "<path> is a symbolic link (to <target>) ...".

enum class EntryType { kMissing, kDirectory, kRegular, kSymlink, kOther };
// "missing", "directory", "regular file", "symbolic link", "special file".
std::string_view EntryTypeName(EntryType type);

struct DirEntry {
  std::string name;
  EntryType type = EntryType::kMissing;
  uint64_t size = 0;  // st_size of a regular file
};

// Opens the directory at path. Components before the last resolve as usual
// (they are the caller's choice); the last must be a directory itself, not
// a symbolic link to one.
Result<UniqueFd> OpenDirNoFollow(const std::string& path);
// Opens the directory `name` (one component) inside dir_fd, same rule.
Result<UniqueFd> OpenDirAt(int dir_fd, const std::string& name, const std::string& path);
// rel split at '/' into its components, empty ones skipped (so "" gives
// none); "." and ".." are kInvalidArgument naming `what`: a walk below a
// directory never climbs out of it.
Result<std::vector<std::string>> SplitPathComponents(std::string_view rel, const std::string& what);
// Opens rel ("a/b/c", relative, no "." or "..") below dir_fd with flags,
// walking it one component at a time: no component may be a symbolic link.
// kNotFound when a component is missing.
Result<UniqueFd> OpenBeneath(int dir_fd, std::string_view rel, int flags, const std::string& path);
// What rel (as for OpenBeneath) below dir_fd is, its last component not
// followed; kMissing when it or a directory on the way does not exist. A
// directory on the way that is a symbolic link fails (kFailedPrecondition).
Result<DirEntry> StatBeneath(int dir_fd, std::string_view rel, const std::string& path);
// Reads the regular file rel (as for OpenBeneath) below dir_fd. Anything
// but a regular file fails with kFailedPrecondition (a FIFO does not block);
// kResourceExhausted when it is larger than max_size.
Result<std::string> ReadFileBeneath(int dir_fd, std::string_view rel, size_t max_size,
                                    const std::string& path);
// What `name` inside dir_fd is (fstatat AT_SYMLINK_NOFOLLOW); type kMissing
// (and ok) when it does not exist.
Result<DirEntry> StatAt(int dir_fd, const std::string& name, const std::string& path);
// What the last component of path is, without following it (lstat).
Result<DirEntry> StatNoFollow(const std::string& path);
// Entries of the open directory (without "." and ".."), sorted by name, each
// typed without following links. Entries that vanish while listed are left out.
Result<std::vector<DirEntry>> ListDirAt(int dir_fd, const std::string& path);
// Removes `name` inside dir_fd and, when it is a real directory, everything
// below it; a symbolic link is removed as a link. Ok when absent.
Status RemoveTreeAt(int dir_fd, const std::string& name, const std::string& path);
// Opens directory `name` inside dir_fd, creating it with mode when absent.
// An entry there that is not a directory (a symbolic link included) fails
// with kFailedPrecondition naming what it is; nothing is changed.
Result<UniqueFd> MakeDirAt(int dir_fd, const std::string& name, mode_t mode, const std::string& path);
// The target of the symbolic link `name` inside dir_fd, for messages ("?"
// when it cannot be read).
std::string LinkTargetAt(int dir_fd, const std::string& name);

// "a/b" + "c" → "a/b/c".
std::string JoinPath(std::string_view a, std::string_view b);
// Parent directory of a path ("a/b/c" → "a/b"; "c" → ".").
std::string DirName(std::string_view path);
// Last component of a path, trailing slashes ignored ("a/b/c/" → "c"; "c" → "c").
std::string BaseName(std::string_view path);

// Gives [offset, offset + len) of the open file its blocks now (fallocate,
// mode 0, retried on EINTR), so that a full tmpfs is an error here rather
// than a SIGBUS in a mapping later. Ok also when the file system cannot
// (EOPNOTSUPP). Otherwise ErrnoStatus("<what>"): kResourceExhausted for
// ENOSPC, so callers can say what to free.
Status AllocateFileRange(int fd, uint64_t offset, uint64_t len, std::string_view what);

}  // namespace tierckpt
