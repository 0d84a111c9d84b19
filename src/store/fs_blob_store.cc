// fs_blob_store.cc — see fs_blob_store.h.
#include "store/fs_blob_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <utility>

#include "common/names.h"
#include "os/fd.h"
#include "os/file_copy.h"
#include "os/files.h"

namespace tierckpt {
namespace {

// Process-wide, so two stores on one base never pick the same temporary.
std::atomic<uint64_t> g_temp_counter{0};

std::string NotABlob(const std::string& full) {
  return full + " is a directory, not a file; an object name cannot also be a directory";
}

// "a/b/" → "a/b"; "" → "".
std::string_view DirOf(std::string_view prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  return prefix;
}

// Appends the regular files below dir_fd (rel is their path prefix) to out;
// with one_level, stops there and lists the subdirectories instead.
Status Walk(int dir_fd, const std::string& rel, const std::string& full, BlobListing& out, bool one_level) {
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(dir_fd, full));
  for (const DirEntry& e : entries) {
    const std::string child = rel + e.name;
    if (e.type == EntryType::kRegular) {
      out.blobs.push_back({child, e.size});
    } else if (e.type == EntryType::kDirectory) {
      if (one_level) {
        out.dirs.push_back(child + "/");
        continue;
      }
      auto sub = OpenDirAt(dir_fd, e.name, JoinPath(full, e.name));
      if (!sub.ok() && sub.status().code() == Code::kNotFound) continue;  // removed meanwhile
      TC_RETURN_IF_ERROR(sub.status());
      TC_RETURN_IF_ERROR(Walk(sub->get(), child + "/", JoinPath(full, e.name), out, false));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<FsBlobStore>> FsBlobStore::Open(std::string_view base, FsBlobOptions options) {
  if (base.find('\0') != std::string_view::npos) {
    return InvalidArgument("durable base " + QuoteForMessage(base) +
                           " contains a NUL byte; give a plain absolute path");
  }
  if (base.empty() || base.front() != '/') {
    return InvalidArgument("durable base " + QuoteForMessage(base) +
                           " is not an absolute path; FsObjectStore needs one such as /mnt/ckpt");
  }
  std::string norm = std::filesystem::path(base).lexically_normal().string();
  while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
  Status made = MakeDirs(norm, 0755);
  if (made.code() == Code::kAlreadyExists) {
    return FailedPrecondition("durable base " + norm +
                              " (or a parent) exists and is not a "
                              "directory; point the durable base at a directory");
  }
  if (!made.ok()) return made.WithContext("cannot create the durable base directory " + norm);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(norm));
  if (!info.is_dir) {
    return FailedPrecondition("durable base " + norm +
                              " is not a directory; point the durable "
                              "base at a directory");
  }
  Status writable = CheckAccess(norm, W_OK | X_OK, "durable base");
  if (!writable.ok()) {
    return FailedPrecondition(writable.message() +
                              " is not writable; fix its permissions or choose another directory");
  }
  return std::unique_ptr<FsBlobStore>(new FsBlobStore(std::move(norm), std::move(options)));
}

FsBlobStore::FsBlobStore(std::string base, FsBlobOptions options)
    : base_(std::move(base)), options_(std::move(options)), describe_("file://" + base_) {}

std::string FsBlobStore::Describe() const { return describe_; }

std::string FsBlobStore::FullPath(std::string_view path) const { return JoinPath(base_, path); }

std::string FsBlobStore::TempFor(const std::string& full) const {
  return full + options_.temp_suffix + "." + std::to_string(::getpid()) + "." +
         std::to_string(g_temp_counter.fetch_add(1));
}

// ---- writes -----------------------------------------------------------------

Result<std::string> FsBlobStore::PrepareFile(std::string_view path) {
  std::string full = FullPath(path);
  Status made = MakeDirs(DirName(full), 0755);
  if (made.code() == Code::kAlreadyExists) {
    return FailedPrecondition("a parent of " + full +
                              " is a file, not a directory (an object "
                              "of this step, or a foreign file in the base); an object "
                              "name cannot also be a directory");
  }
  TC_RETURN_IF_ERROR(made);
  TC_ASSIGN_OR_RETURN(FileInfo existing, StatPath(full));
  if (existing.exists && !existing.is_regular) {
    return FailedPrecondition(full +
                              " is a directory holding other objects; an object name "
                              "cannot also be a directory");
  }
  return full;
}

Status FsBlobStore::WriteVia(const std::string& full, const std::function<Status(int)>& fill) {
  return WriteFileVia(TempFor(full), full, options_.file_mode, options_.fsync, fill);
}

Status FsBlobStore::Put(std::string_view path, const void* data, size_t size, const BlobPutOptions& options) {
  TC_ASSIGN_OR_RETURN(std::string full, PrepareFile(path));
  if (options.exclusive) {
    return WriteFileAtomic(full, std::string_view(static_cast<const char*>(data), size), options_.fsync,
                           /*exclusive=*/true);
  }
  return WriteVia(full, [&](int fd) { return PwriteAll(fd, data, size, 0, full); });
}

Status FsBlobStore::PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options) {
  if (options.exclusive) return BlobStore::PutFile(path, fd, size, options);
  TC_ASSIGN_OR_RETURN(std::string full, PrepareFile(path));
  return WriteVia(full, [&](int out) -> Status {
    Status s = SendFileExact(out, fd, size, "copying into " + full);
    if (s.code() != Code::kUnimplemented) return s;
    std::string buf(static_cast<size_t>(std::min<uint64_t>(size, 1u << 20)), '\0');
    for (uint64_t at = 0; at < size; at += buf.size()) {  // no sendfile here: read + write
      const size_t n = static_cast<size_t>(std::min<uint64_t>(size - at, buf.size()));
      TC_RETURN_IF_ERROR(PreadExact(fd, buf.data(), n, at, "the file put as " + full));
      TC_RETURN_IF_ERROR(PwriteAll(out, buf.data(), n, at, full));
    }
    return Status::Ok();
  });
}

// ---- reads ------------------------------------------------------------------

Result<UniqueFd> FsBlobStore::OpenRange(std::string_view path, uint64_t offset, uint64_t size) {
  const std::string full = FullPath(path);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(full));
  if (!info.exists || !info.is_regular) {
    return NotFound("no object file at " + full + "; it was never put or its step was deleted");
  }
  auto fd = OpenFile(full, O_RDONLY);
  if (!fd.ok() && fd.status().code() == Code::kNotFound) {
    return NotFound("no object file at " + full + "; its step was deleted meanwhile");
  }
  TC_RETURN_IF_ERROR(fd.status());
  TC_ASSIGN_OR_RETURN(FileInfo opened, StatFd(fd->get(), full));
  if (offset > opened.size || size > opened.size - offset) {
    return Corruption("file " + full + " is " + std::to_string(opened.size) +
                      " bytes, shorter than the requested range [" + std::to_string(offset) + ", " +
                      std::to_string(offset) + " + " + std::to_string(size) +
                      "); the copy is truncated, restore the step from another tier");
  }
  return fd;
}

Status FsBlobStore::Read(std::string_view path, uint64_t offset, void* dst, size_t size) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenRange(path, offset, size));
  return PreadExact(fd.get(), dst, size, offset, FullPath(path));
}

Status FsBlobStore::ReadToFile(std::string_view path, int fd, uint64_t size) {
  TC_ASSIGN_OR_RETURN(UniqueFd src, OpenRange(path, 0, size));
  Status s = SendFileExact(fd, src.get(), size, "copying " + FullPath(path) + " into the destination");
  if (s.code() == Code::kUnimplemented) return BlobStore::ReadToFile(path, fd, size);  // map + pread
  return s;
}

Result<std::string> FsBlobStore::ReadSmall(std::string_view path, size_t max_bytes) {
  const std::string full = FullPath(path);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(full));
  if (!info.exists) return NotFound("no file " + full);
  if (!info.is_regular) return FailedPrecondition(NotABlob(full));
  auto text = ReadFileToString(full, max_bytes);
  if (!text.ok() && text.status().code() == Code::kNotFound) return NotFound(full + " was deleted meanwhile");
  return text;
}

Result<uint64_t> FsBlobStore::Size(std::string_view path) {
  const std::string full = FullPath(path);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(full));
  if (!info.exists)
    return NotFound("no object file at " + full + "; it was never put or its step was deleted");
  if (!info.is_regular) return FailedPrecondition(NotABlob(full));
  return info.size;
}

Result<BlobListing> FsBlobStore::List(std::string_view prefix, bool one_level) {
  BlobListing out;
  const std::string dir = FullPath(DirOf(prefix));
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(dir));
  if (!info.is_dir) return out;  // absent, or a foreign file where a directory would be
  auto fd = OpenDirNoFollow(dir);
  if (!fd.ok()) {
    const Code c = fd.status().code();
    if (c == Code::kNotFound || c == Code::kFailedPrecondition) return out;  // absent, a file or a link
    return fd.status();
  }
  std::string rel(DirOf(prefix));
  if (!rel.empty()) rel += "/";
  TC_RETURN_IF_ERROR(Walk(fd->get(), rel, dir, out, one_level));
  std::sort(out.blobs.begin(), out.blobs.end(),
            [](const BlobInfo& a, const BlobInfo& b) { return a.path < b.path; });
  return out;
}

// ---- durability and deletion ------------------------------------------------

Status FsBlobStore::SyncParents(const std::vector<std::string>& paths) {
  std::set<std::string> dirs = {base_};
  for (const std::string& p : paths) {
    const std::string parent = DirName(FullPath(p));
    if (dirs.count(parent) != 0) continue;
    Status made = MakeDirs(parent, 0755);
    if (made.code() == Code::kAlreadyExists) {  // a foreign file where a directory belongs
      return FailedPrecondition("cannot create the directory " + parent + ": " + made.message());
    }
    TC_RETURN_IF_ERROR(made);
    for (std::string d = parent; d.size() > base_.size() && dirs.insert(d).second; d = DirName(d)) {
    }
  }
  if (!options_.fsync) return Status::Ok();
  for (const std::string& d : dirs) TC_RETURN_IF_ERROR(FsyncPath(d));
  return Status::Ok();
}

Status FsBlobStore::Delete(const std::vector<std::string>& paths) {
  std::set<std::string> dirs;
  for (const std::string& p : paths) {
    const std::string full = FullPath(p);
    TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(full));
    if (!info.exists) continue;  // absent, or below a foreign file
    TC_RETURN_IF_ERROR(RemoveFile(full, IfMissing::kOk, "deleting"));
    dirs.insert(DirName(full));
  }
  if (!options_.fsync) return Status::Ok();
  for (const std::string& d : dirs) {
    Status s = FsyncPath(d);
    if (!s.ok() && s.code() != Code::kNotFound) return s;
  }
  return Status::Ok();
}

Status FsBlobStore::DeleteBelow(std::string_view prefix) {
  if (DirOf(prefix).empty())
    return InvalidArgument("DeleteBelow of " + describe_ + ": refusing to delete the base");
  const std::string dir = FullPath(DirOf(prefix));
  TC_ASSIGN_OR_RETURN(DirEntry entry, StatNoFollow(dir));
  if (entry.type != EntryType::kDirectory) return Status::Ok();  // absent (or a foreign entry we leave alone)
  return RemoveTree(dir);
}

}  // namespace tierckpt
