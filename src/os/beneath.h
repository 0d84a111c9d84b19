// beneath.h — a directory tree reached without following any symbolic link,
// at its root, on the path to its root, or below it.
//
// For trees whose root was checked once (a durable base, canonicalized when
// it was allowed) but whose path and contents can change afterwards: a link
// planted later as the root, as a directory above it or as one below it must
// not send writes or deletes elsewhere. Nothing is cached: each call opens
// the root afresh by its path (so a remount there is seen) with openat2(2)
// and RESOLVE_NO_SYMLINKS, reaches directories below it with RESOLVE_BENEATH
// | RESOLVE_NO_SYMLINKS, and the caller does the leaf operation with the *at
// calls below on the parent's fd (none follows the leaf). Where openat2
// fails (ENOSYS on an old kernel, a link met, a missing directory to make)
// the same is done one component at a time with openat(O_NOFOLLOW), which
// also names the component at fault.
//
// A symbolic link met fails with kFailedPrecondition (and only a link does):
// "<path of the link> is a symbolic link (to <target>); tierckpt does not
// follow links on the path to or below <root> ...; replace it with a
// directory". A non-directory where a directory is expected is kNotFound
// when reading, kAlreadyExists when making directories. `root` and `path`
// arguments only name things in messages.
//
// Thread-safe (no shared state but the testing switch); the usual POSIX
// rules apply to concurrent use of the same paths.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

// The absolute path with every symbolic link resolved (realpath(3)); the
// path must exist.
Result<std::string> CanonicalPath(const std::string& path);

// Opens the directory at the absolute path root, O_RDONLY, with no
// component a symbolic link. With make, missing directories (root's parents
// included) are created with mode; without, a missing one is kNotFound.
Result<UniqueFd> OpenRootNoLinks(const std::string& root, bool make, mode_t mode);

// Opens the directory rel ("a/b", relative, no "." or "..", empty
// components skipped; "" is root_fd itself, duplicated) below root_fd,
// O_RDONLY, no component a symbolic link. make: as OpenRootNoLinks.
Result<UniqueFd> OpenDirNoLinks(int root_fd, std::string_view rel, bool make, mode_t mode,
                                const std::string& root);

// The directory holding the last component of a relative path, opened
// without following links, and that component's name.
struct ParentDir {
  UniqueFd dir;      // the directory holding leaf
  std::string leaf;  // one component
};
// rel as for OpenDirNoLinks but naming an entry (kInvalidArgument when it
// names none).
Result<ParentDir> OpenParentNoLinks(int root_fd, std::string_view rel, bool make, mode_t mode,
                                    const std::string& root);

// The kFailedPrecondition for the symbolic link `name` inside dir_fd, whose
// path is `path`, met below (or on the way to) root.
Status LinkRefused(int dir_fd, const std::string& name, const std::string& path, const std::string& root);

// Opens `name` inside dir_fd with flags | O_NOFOLLOW | O_CLOEXEC (mode for
// O_CREAT). A symbolic link there fails with LinkRefused; other failures
// are ErrnoStatus("open <path>").
Result<UniqueFd> OpenFileAt(int dir_fd, const std::string& name, int flags, mode_t mode, const std::string& path,
                            const std::string& root);

// Writes `name` inside dir_fd through the temporary `tmp` (same directory):
// creates tmp with O_CREAT | O_TRUNC | O_RDWR | O_NOFOLLOW and mode (before
// umask), calls fill(fd), fsyncs it when sync_data, closes it, then renames
// it over name (renameat: a link at name is replaced, not followed) or, with
// exclusive, links it in (linkat: kAlreadyExists when anything is at name)
// and removes tmp. On failure tmp is removed and name untouched; fill's
// failure is returned as is. The directory is not synced. Messages name
// the files as JoinPath(dir_path, ...).
Status WriteFileViaAt(int dir_fd, const std::string& tmp, const std::string& name, mode_t mode, bool sync_data,
                      bool exclusive, const std::string& dir_path, const std::function<Status(int fd)>& fill);

// unlinkat(dir_fd, name, 0): a symbolic link is removed as a link. A
// missing entry is Ok; other failures are ErrnoStatus("<what> <path>").
Status UnlinkAt(int dir_fd, const std::string& name, std::string_view what, const std::string& path);

// fsync(2) of an open directory; EINVAL (a file system that cannot sync
// directories) is Ok, as for FsyncPath.
Status FsyncDir(int dir_fd, const std::string& path);

// Tests only: false makes the calls above skip openat2 and walk component by
// component, as on a kernel without it.
void UseOpenat2ForTesting(bool use);

}  // namespace tierckpt
