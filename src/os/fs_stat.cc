// fs_stat.cc — see fs_stat.h.
#include "os/fs_stat.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>

#include "os/fd.h"

namespace tierckpt {
namespace {

std::string Join(std::string_view what, const std::string& path) { return std::string(what) + " " + path; }

FileStat FromStat(const struct stat& st) {
  FileStat s;
  if (S_ISDIR(st.st_mode)) {
    s.type = EntryType::kDirectory;
  } else if (S_ISREG(st.st_mode)) {
    s.type = EntryType::kRegular;
  } else if (S_ISLNK(st.st_mode)) {
    s.type = EntryType::kSymlink;
  } else {
    s.type = EntryType::kOther;
    s.is_socket = S_ISSOCK(st.st_mode);
  }
  s.mode = st.st_mode & 07777;
  s.uid = st.st_uid;
  s.nlink = static_cast<uint64_t>(st.st_nlink);
  s.dev = static_cast<uint64_t>(st.st_dev);
  s.ino = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.allocated_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000LL + st.st_ctim.tv_nsec;
  return s;
}

}  // namespace

Result<FileStat> StatFile(const std::string& path, Follow follow, IfMissing if_missing,
                          std::string_view what) {
  struct stat st;
  const int rc = follow == Follow::kYes ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st);
  if (rc != 0) {
    if (errno == ENOENT && if_missing == IfMissing::kOk) return FileStat{};
    return ErrnoStatus(Join(what, path));
  }
  return FromStat(st);
}

Result<FileStat> StatOpenFd(int fd, std::string_view what) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(what);
  return FromStat(st);
}

Result<FsSpace> StatFsSpace(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return ErrnoStatus("statvfs " + path);
  FsSpace m;
  m.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  m.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  return m;
}

Status MakeDir(const std::string& path, mode_t mode, std::string_view what) {
  if (::mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return ErrnoStatus(Join(what, path));
  return Status::Ok();
}

Status ChmodPath(const std::string& path, mode_t mode, std::string_view what) {
  if (::chmod(path.c_str(), mode) != 0) return ErrnoStatus(Join(what, path));
  return Status::Ok();
}

Status ChmodFd(int fd, mode_t mode, std::string_view what) {
  if (::fchmod(fd, mode) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

namespace {

void MtimeOnly(int64_t mtime_ns, struct timespec times[2]) {
  times[0] = {0, UTIME_OMIT};
  times[1] = {static_cast<time_t>(mtime_ns / 1000000000), static_cast<long>(mtime_ns % 1000000000)};
  if (times[1].tv_nsec < 0) {  // before 1970: the nanoseconds stay in [0, 1e9)
    times[1].tv_nsec += 1000000000;
    times[1].tv_sec -= 1;
  }
}

}  // namespace

Status SetMtimeFd(int fd, int64_t mtime_ns, std::string_view what) {
  struct timespec times[2];
  MtimeOnly(mtime_ns, times);
  if (::futimens(fd, times) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

Status SetMtimePath(const std::string& path, int64_t mtime_ns, std::string_view what) {
  struct timespec times[2];
  MtimeOnly(mtime_ns, times);
  if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) return ErrnoStatus(what);
  return Status::Ok();
}

Result<std::string> ReadLink(const std::string& path) {
  char buf[4096];
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof(buf));
  if (n < 0) return ErrnoStatus("readlink " + path);
  return std::string(buf, static_cast<size_t>(n));
}

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace tierckpt
