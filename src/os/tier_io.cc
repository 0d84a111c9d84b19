#include "os/tier_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "os/files.h"

namespace tierckpt {
namespace {

// Opens (making when missing) every directory of rel but its last component
// beneath dir_fd; *at is where the last component goes, *leaf its name.
Status WalkMakingParents(int dir_fd, std::string_view rel, const std::string& path, UniqueFd* held, int* at,
                         std::string* leaf) {
  *at = dir_fd;
  if (rel.empty() || rel.front() == '/')
    return InvalidArgument("a relative name is needed, not \"" + path + "\"");
  size_t start = 0;
  for (size_t slash = rel.find('/'); slash != std::string_view::npos; slash = rel.find('/', start)) {
    const std::string part(rel.substr(start, slash - start));
    start = slash + 1;
    if (part.empty() || part == "." || part == "..") {
      return InvalidArgument("\"" + path + "\" has an empty, . or .. component");
    }
    TC_ASSIGN_OR_RETURN(UniqueFd next, MakeDirAt(*at, part, 0700, path + ": its directory " + part));
    *held = std::move(next);
    *at = held->get();
  }
  *leaf = std::string(rel.substr(start));
  if (leaf->empty() || *leaf == "." || *leaf == "..")
    return InvalidArgument("\"" + path + "\" names no file");
  return Status::Ok();
}

}  // namespace

Result<UniqueFd> CreateFileBeneath(int dir_fd, std::string_view rel, uint64_t size, const std::string& path) {
  UniqueFd held;
  int at = -1;
  std::string leaf;
  TC_RETURN_IF_ERROR(WalkMakingParents(dir_fd, rel, path, &held, &at, &leaf));
  int raw = ::openat(at, leaf.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (raw < 0) {
    if (errno == EEXIST) {
      return AlreadyExists("create " + path + ": a file of that name exists (created by another call?)");
    }
    return ErrnoStatus("create " + path);
  }
  UniqueFd fd(raw);
  Status made;
  if (::fchmod(fd.get(), 0600) != 0) {  // whatever the umask
    made = ErrnoStatus("chmod " + path);
  } else if (size > 0 && ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    made = ErrnoStatus("size " + path + " to " + std::to_string(size) + " bytes");
  }
  if (!made.ok()) {
    ::unlinkat(at, leaf.c_str(), 0);  // ours (O_EXCL); the failure to make it is the answer
    return made;
  }
  return fd;
}

Status RenameBeneath(const std::string& from, int dir_fd, std::string_view rel, const std::string& path) {
  UniqueFd held;
  int at = -1;
  std::string leaf;
  TC_RETURN_IF_ERROR(WalkMakingParents(dir_fd, rel, path, &held, &at, &leaf));
  if (::renameat(AT_FDCWD, from.c_str(), at, leaf.c_str()) != 0)
    return ErrnoStatus("rename " + from + " to " + path);
  return Status::Ok();
}

Status RemoveDirIfEmptyAt(int dir_fd, const std::string& name, const std::string& path) {
  if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0) return Status::Ok();
  if (errno == ENOENT || errno == ENOTEMPTY || errno == EEXIST) return Status::Ok();
  return ErrnoStatus("rmdir " + path);
}

Status RemoveDirIfEmpty(const std::string& path) {
  if (::rmdir(path.c_str()) == 0) return Status::Ok();
  if (errno == ENOENT || errno == ENOTEMPTY || errno == EEXIST) return Status::Ok();
  return ErrnoStatus("rmdir " + path);
}

}  // namespace tierckpt
