// beneath.cc — see beneath.h.
#include "os/beneath.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <utility>
#include <vector>

#include "os/files.h"

namespace tierckpt {
namespace {

std::atomic<bool> g_use_openat2{true};

std::string Joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out = out.empty() ? p : out + "/" + p;
  return out;
}

// openat2(2), which glibc does not wrap; -1 with errno on failure.
int Openat2(int dir_fd, const std::string& path, int flags, uint64_t resolve) {
  struct open_how how = {};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC);
  how.resolve = resolve;
  const int fd = static_cast<int>(::syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof(how)));
  if (fd < 0 && errno == ENOSYS) g_use_openat2.store(false, std::memory_order_relaxed);  // ask once
  return fd;
}

// Opens the directories parts below dir_fd (named dir_path) one at a time,
// each with O_NOFOLLOW, making missing ones with make; the last O_RDONLY,
// the others O_PATH (search permission is all they need).
Result<UniqueFd> WalkDirs(int dir_fd, const std::string& dir_path, const std::vector<std::string>& parts, bool make,
                          mode_t mode, const std::string& root) {
  UniqueFd held;
  int at = dir_fd;
  std::string at_path = dir_path;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    const std::string path = JoinPath(at_path, part);
    if (make && ::mkdirat(at, part.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
    const int how = i + 1 == parts.size() ? O_RDONLY : O_PATH;
    int fd = ::openat(at, part.c_str(), how | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      struct stat st;
      if ((err == ELOOP || err == ENOTDIR) && ::fstatat(at, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) return LinkRefused(at, part, path, root);
        if (!S_ISDIR(st.st_mode)) {
          if (make) return AlreadyExists(path + " exists and is not a directory");
          return NotFound(path + " is not a directory");
        }
      }
      return ErrnoStatus("open " + path, err);
    }
    held = UniqueFd(fd);  // closes the previous directory, no longer needed
    at = fd;
    at_path = path;
  }
  return held;
}

Result<UniqueFd> OpenDirParts(int root_fd, const std::vector<std::string>& parts, bool make, mode_t mode,
                              const std::string& root) {
  if (parts.empty()) {
    int fd = ::openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open " + root);
    return UniqueFd(fd);
  }
  if (g_use_openat2.load(std::memory_order_relaxed)) {
    int fd = Openat2(root_fd, Joined(parts), O_RDONLY | O_DIRECTORY, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
    if (fd >= 0) return UniqueFd(fd);
    // Any failure (ENOSYS, a link, a missing directory to make, EAGAIN after
    // a rename race): the walk does it again and names the component.
  }
  return WalkDirs(root_fd, root, parts, make, mode, root);
}

}  // namespace

Result<std::string> CanonicalPath(const std::string& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (resolved == nullptr) return ErrnoStatus("resolve " + path);
  std::string out(resolved);
  ::free(resolved);
  return out;
}

Result<UniqueFd> OpenRootNoLinks(const std::string& root, bool make, mode_t mode) {
  if (root.empty() || root.front() != '/') return InvalidArgument(root + " is not an absolute path");
  if (g_use_openat2.load(std::memory_order_relaxed)) {
    int fd = Openat2(AT_FDCWD, root, O_RDONLY | O_DIRECTORY, RESOLVE_NO_SYMLINKS);
    if (fd >= 0) return UniqueFd(fd);
  }
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPathComponents(std::string_view(root).substr(1), root));
  int fd = ::open("/", (parts.empty() ? O_RDONLY : O_PATH) | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("open /");
  UniqueFd slash(fd);
  if (parts.empty()) return slash;
  return WalkDirs(slash.get(), "/", parts, make, mode, root);
}

Result<UniqueFd> OpenDirNoLinks(int root_fd, std::string_view rel, bool make, mode_t mode,
                                const std::string& root) {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPathComponents(rel, JoinPath(root, rel)));
  return OpenDirParts(root_fd, parts, make, mode, root);
}

Result<ParentDir> OpenParentNoLinks(int root_fd, std::string_view rel, bool make, mode_t mode,
                                    const std::string& root) {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPathComponents(rel, JoinPath(root, rel)));
  if (parts.empty()) return InvalidArgument("\"" + std::string(rel) + "\" names no entry below " + root);
  ParentDir out;
  out.leaf = std::move(parts.back());
  parts.pop_back();
  TC_ASSIGN_OR_RETURN(out.dir, OpenDirParts(root_fd, parts, make, mode, root));
  return out;
}

Status LinkRefused(int dir_fd, const std::string& name, const std::string& path, const std::string& root) {
  return FailedPrecondition(path + " is a symbolic link (to " + LinkTargetAt(dir_fd, name) +
                            "); tierckpt does not follow links on the path to or below " + root +
                            " (a link planted after the directory was chosen could send writes or deletes "
                            "elsewhere); replace it with a directory");
}

Result<UniqueFd> OpenFileAt(int dir_fd, const std::string& name, int flags, mode_t mode, const std::string& path,
                            const std::string& root) {
  int fd = ::openat(dir_fd, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd >= 0) return UniqueFd(fd);
  const int err = errno;
  struct stat st;
  if (err == ELOOP && ::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
    return LinkRefused(dir_fd, name, path, root);
  }
  return ErrnoStatus("open " + path, err);
}

Status WriteFileViaAt(int dir_fd, const std::string& tmp, const std::string& name, mode_t mode, bool sync_data,
                      bool exclusive, const std::string& dir_path, const std::function<Status(int fd)>& fill) {
  const std::string tmp_path = JoinPath(dir_path, tmp);
  const std::string path = JoinPath(dir_path, name);
  Status st;
  {
    TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFileAt(dir_fd, tmp, O_CREAT | O_TRUNC | O_RDWR, mode, tmp_path, dir_path));
    st = fill(fd.get());
    if (st.ok() && sync_data) st = FsyncFd(fd.get(), "syncing " + tmp_path);
  }
  if (st.ok()) {
    if (exclusive) {
      if (::linkat(dir_fd, tmp.c_str(), dir_fd, name.c_str(), 0) != 0)
        st = ErrnoStatus("link " + tmp_path + " to " + path);
    } else if (::renameat(dir_fd, tmp.c_str(), dir_fd, name.c_str()) != 0) {
      st = ErrnoStatus("rename " + tmp_path + " to " + path);
    }
  }
  // The temporary goes on failure (the first failure is the one returned)
  // and after a link (the name holds the file now).
  if (!st.ok() || exclusive) ::unlinkat(dir_fd, tmp.c_str(), 0);
  return st;
}

Status UnlinkAt(int dir_fd, const std::string& name, std::string_view what, const std::string& path) {
  if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno == ENOENT) return Status::Ok();
  return ErrnoStatus(std::string(what) + " " + path);
}

Status FsyncDir(int dir_fd, const std::string& path) {
  if (::fsync(dir_fd) != 0 && errno != EINVAL) return ErrnoStatus("fsync " + path);
  return Status::Ok();
}

void UseOpenat2ForTesting(bool use) { g_use_openat2.store(use, std::memory_order_relaxed); }

}  // namespace tierckpt
