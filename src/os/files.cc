#include "os/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>

namespace tierckpt {

Result<UniqueFd> OpenFile(const std::string& path, int flags, mode_t mode) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("open " + path);
  return UniqueFd(fd);
}

Status PwriteAll(int fd, const void* data, size_t size, uint64_t offset, std::string_view what) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::pwrite(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + std::string(what));
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Status PreadExact(int fd, void* data, size_t size, uint64_t offset, std::string_view what) {
  auto* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, size, static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("read " + std::string(what));
    }
    if (n == 0) {
      return Corruption("read " + std::string(what) + ": file ends " + std::to_string(size) +
                        " bytes early at offset " + std::to_string(offset) + " (truncated)");
    }
    p += n;
    size -= static_cast<size_t>(n);
    offset += static_cast<uint64_t>(n);
  }
  return Status::Ok();
}

Result<std::string> ReadFileToString(const std::string& path, size_t max_size) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDONLY));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (static_cast<uint64_t>(st.st_size) > max_size) {
    return ResourceExhausted(path + " is " + std::to_string(st.st_size) + " bytes, above the limit of " +
                             std::to_string(max_size));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  TC_RETURN_IF_ERROR(PreadExact(fd.get(), out.data(), out.size(), 0, path));
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view data, bool durable, bool exclusive) {
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  {
    // O_NOFOLLOW: a link planted at the (predictable) temporary name is not
    // truncated through.
    TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600));
    Status s = PwriteAll(fd.get(), data.data(), data.size(), 0, tmp);
    if (s.ok() && durable && ::fsync(fd.get()) != 0) s = ErrnoStatus("fsync " + tmp);
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
  }
  if (exclusive) {
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      Status s = ErrnoStatus("link " + tmp + " to " + path);
      ::unlink(tmp.c_str());
      return s;
    }
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoStatus("rename " + tmp + " to " + path);
    ::unlink(tmp.c_str());
    return s;
  }
  if (durable) TC_RETURN_IF_ERROR(FsyncPath(DirName(path)));
  return Status::Ok();
}

Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return Status::Ok();
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Status::Ok();
    return AlreadyExists(path + " exists and is not a directory");
  }
  std::string parent = DirName(path);
  if (parent != path && parent != "." && parent != "/") TC_RETURN_IF_ERROR(MakeDirs(parent, mode));
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  return Status::Ok();
}

Status RemoveTree(const std::string& path) {
  std::string_view p = path;
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  size_t slash = p.rfind('/');
  std::string name(slash == std::string_view::npos ? p : p.substr(slash + 1));
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgument("RemoveTree needs a path that names an entry, not " + path);
  }
  std::string parent = DirName(p);
  int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("open " + parent + " to remove " + path);
  }
  UniqueFd dir(fd);
  return RemoveTreeAt(dir.get(), name, path);
}

Status FsyncPath(const std::string& path) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(path, O_RDONLY));
  if (::fsync(fd.get()) != 0 && errno != EINVAL) return ErrnoStatus("fsync " + path);
  return Status::Ok();
}

Status RenamePath(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename " + from + " to " + to);
  return Status::Ok();
}

Status RemoveFile(const std::string& path, IfMissing if_missing, std::string_view what) {
  if (::unlink(path.c_str()) == 0) return Status::Ok();
  if (errno == ENOENT && if_missing == IfMissing::kOk) return Status::Ok();
  return ErrnoStatus(std::string(what) + " " + path);
}

Status WriteFileVia(const std::string& tmp, const std::string& path, mode_t mode, bool sync_data,
                    const std::function<Status(int fd)>& fill) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, mode));
  Status st = fill(fd.get());
  if (st.ok() && sync_data) st = FsyncFd(fd.get(), "syncing " + tmp);
  fd.Reset();
  if (st.ok()) st = RenamePath(tmp, path);
  if (!st.ok()) RemoveFile(tmp, IfMissing::kOk).IgnoreError();  // the first failure is the one to report
  return st;
}

Status TruncateFd(int fd, uint64_t size, std::string_view what) {
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

Status FsyncFd(int fd, std::string_view what) {
  if (::fsync(fd) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

Result<std::vector<std::string>> ListDir(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return ErrnoStatus("list " + path);
  std::vector<std::string> out;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    out.emplace_back(n);
  }
  int err = errno;
  ::closedir(d);
  if (err != 0) return ErrnoStatus("list " + path, err);
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

FileInfo InfoOf(const struct stat& st) {
  FileInfo info;
  info.exists = true;
  info.is_dir = S_ISDIR(st.st_mode);
  info.is_regular = S_ISREG(st.st_mode);
  info.size = static_cast<uint64_t>(st.st_size);
  return info;
}

}  // namespace

Result<FileInfo> StatPath(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return FileInfo{};
    return ErrnoStatus("stat " + path);
  }
  return InfoOf(st);
}

Result<FileInfo> StatFd(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus("stat " + path);
  return InfoOf(st);
}

// ---- Trees that are not trusted ----

namespace {

EntryType TypeOf(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return EntryType::kDirectory;
  if (S_ISREG(st.st_mode)) return EntryType::kRegular;
  if (S_ISLNK(st.st_mode)) return EntryType::kSymlink;
  return EntryType::kOther;
}

DirEntry EntryOf(std::string name, const struct stat& st) {
  DirEntry e;
  e.name = std::move(name);
  e.type = TypeOf(st);
  e.size = e.type == EntryType::kRegular ? static_cast<uint64_t>(st.st_size) : 0;
  return e;
}

// Why openat(O_NOFOLLOW) of name failed with err, as a Status: a symbolic
// link or another non-directory gets a message naming what it is.
Status OpenAtError(int dir_fd, const std::string& name, const std::string& path, int err) {
  if (err != ELOOP && err != ENOTDIR) return ErrnoStatus("open " + path, err);
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return ErrnoStatus("open " + path, err);
  if (S_ISLNK(st.st_mode)) {
    return FailedPrecondition(path + " is a symbolic link (to " + LinkTargetAt(dir_fd, name) +
                              "); it is not followed");
  }
  return FailedPrecondition(path + " is a " + std::string(EntryTypeName(TypeOf(st))) +
                            " where a directory is expected");
}

}  // namespace

std::string_view EntryTypeName(EntryType type) {
  switch (type) {
    case EntryType::kMissing:
      return "missing";
    case EntryType::kDirectory:
      return "directory";
    case EntryType::kRegular:
      return "regular file";
    case EntryType::kSymlink:
      return "symbolic link";
    case EntryType::kOther:
      break;
  }
  return "special file";
}

Result<UniqueFd> OpenDirNoFollow(const std::string& path) {
  // "link/" would follow the link: the last component is looked at as named.
  std::string_view p = path;
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  const std::string trimmed(p);
  int fd = ::open(trimmed.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) return UniqueFd(fd);
  int err = errno;
  if (err != ELOOP && err != ENOTDIR) return ErrnoStatus("open " + path, err);
  TC_ASSIGN_OR_RETURN(DirEntry e, StatNoFollow(trimmed));
  if (e.type == EntryType::kSymlink) {
    char buf[4096];
    ssize_t n = ::readlink(trimmed.c_str(), buf, sizeof(buf));
    std::string target = n < 0 ? "?" : std::string(buf, static_cast<size_t>(n));
    return FailedPrecondition(path + " is a symbolic link (to " + target + "); it is not followed");
  }
  return FailedPrecondition(path + " is a " + std::string(EntryTypeName(e.type)) +
                            " where a directory is expected");
}

Result<UniqueFd> OpenDirAt(int dir_fd, const std::string& name, const std::string& path) {
  int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return OpenAtError(dir_fd, name, path, errno);
  return UniqueFd(fd);
}

Result<std::vector<std::string>> SplitPathComponents(std::string_view rel, const std::string& what) {
  std::vector<std::string> parts;
  for (size_t start = 0; start <= rel.size();) {
    size_t end = rel.find('/', start);
    if (end == std::string_view::npos) end = rel.size();
    std::string part(rel.substr(start, end - start));
    if (part == "." || part == "..") {
      return InvalidArgument(what + ": component \"" + part + "\" is not allowed below a directory");
    }
    if (!part.empty()) parts.push_back(std::move(part));
    start = end + 1;
  }
  return parts;
}

namespace {

// SplitPathComponents, and at least one component.
Result<std::vector<std::string>> SplitRelative(std::string_view rel, const std::string& path) {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitPathComponents(rel, path));
  if (parts.empty()) return InvalidArgument("a relative path to open is needed, not \"" + path + "\"");
  return parts;
}

// Opens every directory of parts but the last below dir_fd, without
// following links; *at is where the last component is to be looked up (dir_fd
// itself when there is only one).
Status WalkParents(int dir_fd, const std::vector<std::string>& parts, const std::string& path, UniqueFd* held,
                   int* at) {
  *at = dir_fd;
  std::string prefix;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix = prefix.empty() ? parts[i] : prefix + "/" + parts[i];
    TC_ASSIGN_OR_RETURN(UniqueFd next, OpenDirAt(*at, parts[i], path + ": its directory " + prefix));
    *held = std::move(next);
    *at = held->get();
  }
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> OpenBeneath(int dir_fd, std::string_view rel, int flags, const std::string& path) {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRelative(rel, path));
  UniqueFd held;
  int at = -1;
  TC_RETURN_IF_ERROR(WalkParents(dir_fd, parts, path, &held, &at));
  int fd = ::openat(at, parts.back().c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) return OpenAtError(at, parts.back(), path, err);
    return ErrnoStatus("open " + path, err);
  }
  return UniqueFd(fd);
}

Result<DirEntry> StatBeneath(int dir_fd, std::string_view rel, const std::string& path) {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitRelative(rel, path));
  UniqueFd held;
  int at = -1;
  Status walked = WalkParents(dir_fd, parts, path, &held, &at);
  if (walked.code() == Code::kNotFound) return DirEntry{std::string(rel), EntryType::kMissing, 0};
  TC_RETURN_IF_ERROR(walked);
  TC_ASSIGN_OR_RETURN(DirEntry e, StatAt(at, parts.back(), path));
  e.name = std::string(rel);
  return e;
}

Result<std::string> ReadFileBeneath(int dir_fd, std::string_view rel, size_t max_size,
                                    const std::string& path) {
  // O_NONBLOCK: a FIFO planted in place of the file must not hang the reader.
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenBeneath(dir_fd, rel, O_RDONLY | O_NONBLOCK, path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus("stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return FailedPrecondition(path + " is a " + std::string(EntryTypeName(TypeOf(st))) +
                              ", not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_size) {
    return ResourceExhausted(path + " is " + std::to_string(st.st_size) + " bytes, above the limit of " +
                             std::to_string(max_size));
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  TC_RETURN_IF_ERROR(PreadExact(fd.get(), out.data(), out.size(), 0, path));
  return out;
}

Result<DirEntry> StatAt(int dir_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return DirEntry{name, EntryType::kMissing, 0};
    return ErrnoStatus("stat " + path);
  }
  return EntryOf(name, st);
}

Result<DirEntry> StatNoFollow(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return DirEntry{path, EntryType::kMissing, 0};
    return ErrnoStatus("stat " + path);
  }
  return EntryOf(path, st);
}

Result<std::vector<DirEntry>> ListDirAt(int dir_fd, const std::string& path) {
  // A fresh open file description: readdir does not move dir_fd's offset.
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("list " + path);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    UniqueFd owner(fd);
    return ErrnoStatus("list " + path);
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    names.emplace_back(n);
  }
  int err = errno;
  ::closedir(d);  // closes fd
  if (err != 0) return ErrnoStatus("list " + path, err);
  std::sort(names.begin(), names.end());
  std::vector<DirEntry> out;
  out.reserve(names.size());
  for (auto& n : names) {
    struct stat st;
    if (::fstatat(dir_fd, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return ErrnoStatus("stat " + JoinPath(path, n));
    }
    out.push_back(EntryOf(std::move(n), st));
  }
  return out;
}

Status RemoveTreeAt(int dir_fd, const std::string& name, const std::string& path) {
  struct stat st;
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("stat " + path);
  }
  if (S_ISDIR(st.st_mode)) {
    int fd = ::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      UniqueFd dir(fd);
      TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(dir.get(), path));
      for (const DirEntry& e : entries)
        TC_RETURN_IF_ERROR(RemoveTreeAt(dir.get(), e.name, JoinPath(path, e.name)));
      if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
        return ErrnoStatus("rmdir " + path);
      return Status::Ok();
    }
    if (errno == ENOENT) return Status::Ok();
    if (errno != ELOOP && errno != ENOTDIR) return ErrnoStatus("open " + path);
    // Replaced by a link or a file since the stat: remove that instead.
  }
  if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) return ErrnoStatus("unlink " + path);
  return Status::Ok();
}

Result<UniqueFd> MakeDirAt(int dir_fd, const std::string& name, mode_t mode, const std::string& path) {
  if (::mkdirat(dir_fd, name.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus("mkdir " + path);
  return OpenDirAt(dir_fd, name, path);
}

std::string LinkTargetAt(int dir_fd, const std::string& name) {
  char buf[4096];
  ssize_t n = ::readlinkat(dir_fd, name.c_str(), buf, sizeof(buf));
  if (n < 0) return "?";
  return std::string(buf, static_cast<size_t>(n));
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string BaseName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path.substr(path.rfind('/') + 1));  // npos + 1 == 0
}

Status AllocateFileRange(int fd, uint64_t offset, uint64_t len, std::string_view what) {
  if (len == 0) return Status::Ok();
  int rc;
  do {
    rc = ::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(len));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0 || errno == EOPNOTSUPP) return Status::Ok();
  return ErrnoStatus(what);
}

std::string DirName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace tierckpt
