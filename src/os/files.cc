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
    TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600));
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
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return ErrnoStatus("stat " + path);
  }
  if (S_ISDIR(st.st_mode)) {
    TC_ASSIGN_OR_RETURN(auto names, ListDir(path));
    for (const auto& n : names) TC_RETURN_IF_ERROR(RemoveTree(JoinPath(path, n)));
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("rmdir " + path);
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus("unlink " + path);
  }
  return Status::Ok();
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

Result<FileInfo> StatPath(const std::string& path) {
  struct stat st;
  FileInfo info;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return info;
    return ErrnoStatus("stat " + path);
  }
  info.exists = true;
  info.is_dir = S_ISDIR(st.st_mode);
  info.is_regular = S_ISREG(st.st_mode);
  info.size = static_cast<uint64_t>(st.st_size);
  return info;
}

std::string JoinPath(std::string_view a, std::string_view b) {
  if (a.empty()) return std::string(b);
  std::string out(a);
  if (out.back() != '/') out += '/';
  out += b;
  return out;
}

std::string DirName(std::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  size_t slash = path.rfind('/');
  if (slash == std::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(path.substr(0, slash));
}

}  // namespace tierckpt
