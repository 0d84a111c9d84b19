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
#include "os/beneath.h"
#include "os/direct_write.h"
#include "os/fd.h"
#include "os/file_copy.h"
#include "os/files.h"
#include "os/tier_io.h"

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

constexpr mode_t kDirMode = 0755;

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
  // Resolved once, here: from now on no link at, above or below it is
  // followed (decision 78).
  TC_ASSIGN_OR_RETURN(norm, CanonicalPath(norm));
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

std::string FsBlobStore::TempFor(const std::string& name) const {
  return name + options_.temp_suffix + "." + std::to_string(::getpid()) + "." +
         std::to_string(g_temp_counter.fetch_add(1));
}

// ---- reaching files without following links ----------------------------------

Status FsBlobStore::InBase(Status s) const {
  if (s.code() != Code::kFailedPrecondition) return s;  // os/beneath.h: only a link met is this
  // kPermissionDenied, not the os layer's kFailedPrecondition: LayoutStore
  // reads that code as "a directory where a file is" (an existing blob, a
  // corrupt manifest), and a link is a way out of the allowed base.
  return PermissionDenied("durable base " + base_ + ": " + s.message());
}

Status FsBlobStore::LinkAt(const Parent& p) const {
  return InBase(LinkRefused(p.dir.get(), p.leaf, p.full, base_));
}

Result<FsBlobStore::Parent> FsBlobStore::OpenParent(std::string_view path, bool make) const {
  auto base = OpenRootNoLinks(base_, make, kDirMode);
  if (!base.ok()) return InBase(base.status());
  auto dir = OpenParentNoLinks(base->get(), path, make, kDirMode, base_);
  if (!dir.ok()) return InBase(dir.status());
  return Parent{std::move(dir->dir), std::move(dir->leaf), FullPath(path)};
}

Result<UniqueFd> FsBlobStore::OpenDir(std::string_view dir, bool make) const {
  auto base = OpenRootNoLinks(base_, make, kDirMode);
  if (!base.ok()) return InBase(base.status());
  if (dir.empty()) return base;
  auto fd = OpenDirNoLinks(base->get(), dir, make, kDirMode, base_);
  if (!fd.ok()) return InBase(fd.status());
  return fd;
}

// ---- writes -----------------------------------------------------------------

Result<FsBlobStore::Parent> FsBlobStore::PrepareFile(std::string_view path) {
  auto parent = OpenParent(path, /*make=*/true);
  if (!parent.ok() && parent.status().code() == Code::kAlreadyExists) {
    return FailedPrecondition("a parent of " + FullPath(path) +
                              " is a file, not a directory (an object "
                              "of this step, or a foreign file in the base); an object "
                              "name cannot also be a directory");
  }
  TC_RETURN_IF_ERROR(parent.status());
  TC_ASSIGN_OR_RETURN(DirEntry existing, StatAt(parent->dir.get(), parent->leaf, parent->full));
  if (existing.type == EntryType::kSymlink) return LinkAt(*parent);
  if (existing.type != EntryType::kMissing && existing.type != EntryType::kRegular) {
    return FailedPrecondition(parent->full +
                              " is a directory holding other objects; an object name "
                              "cannot also be a directory");
  }
  return parent;
}

Status FsBlobStore::WriteVia(const Parent& p, const std::function<Status(int)>& fill) {
  return WriteFileViaAt(p.dir.get(), TempFor(p.leaf), p.leaf, options_.file_mode, options_.fsync,
                        /*exclusive=*/false, DirName(p.full), fill);
}

Status FsBlobStore::Put(std::string_view path, const void* data, size_t size, const BlobPutOptions& options) {
  TC_ASSIGN_OR_RETURN(Parent p, PrepareFile(path));
  if (options.exclusive) {
    // "<name>.tmp.<pid>.<n>", mode 0600, linked in: as WriteFileAtomic.
    const std::string dir = DirName(p.full);
    const std::string tmp =
        p.leaf + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_temp_counter.fetch_add(1));
    TC_RETURN_IF_ERROR(WriteFileViaAt(p.dir.get(), tmp, p.leaf, 0600, options_.fsync, /*exclusive=*/true, dir,
                                      [&](int fd) { return WriteNew(fd, data, size, JoinPath(dir, tmp)); }));
    if (options_.fsync) TC_RETURN_IF_ERROR(FsyncDir(p.dir.get(), dir));
    return Status::Ok();
  }
  return WriteVia(p, [&](int fd) { return WriteNew(fd, data, size, p.full); });
}

Status FsBlobStore::WriteNew(int fd, const void* data, size_t size, const std::string& what) const {
  if (options_.direct_min_bytes == 0 || size < options_.direct_min_bytes) return PwriteAll(fd, data, size, 0, what);
  return WriteBypassingCache(fd, data, size, what).status();
}

Status FsBlobStore::PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options) {
  if (options.exclusive) return BlobStore::PutFile(path, fd, size, options);
  TC_ASSIGN_OR_RETURN(Parent p, PrepareFile(path));
  const std::string& full = p.full;
  return WriteVia(p, [&](int out) -> Status {
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
  auto parent = OpenParent(path, /*make=*/false);
  if (!parent.ok() && parent.status().code() == Code::kNotFound) {
    return NotFound("no object file at " + full + "; it was never put or its step was deleted");
  }
  TC_RETURN_IF_ERROR(parent.status());
  TC_ASSIGN_OR_RETURN(DirEntry info, StatAt(parent->dir.get(), parent->leaf, full));
  if (info.type == EntryType::kSymlink) return LinkAt(*parent);
  if (info.type != EntryType::kRegular) {
    return NotFound("no object file at " + full + "; it was never put or its step was deleted");
  }
  auto fd = OpenFileAt(parent->dir.get(), parent->leaf, O_RDONLY, 0, full, base_);
  if (!fd.ok() && fd.status().code() == Code::kNotFound) {
    return NotFound("no object file at " + full + "; its step was deleted meanwhile");
  }
  if (!fd.ok()) return InBase(fd.status());
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
  auto parent = OpenParent(path, /*make=*/false);
  if (!parent.ok() && parent.status().code() == Code::kNotFound) return NotFound("no file " + full);
  TC_RETURN_IF_ERROR(parent.status());
  TC_ASSIGN_OR_RETURN(DirEntry info, StatAt(parent->dir.get(), parent->leaf, full));
  if (info.type == EntryType::kMissing) return NotFound("no file " + full);
  if (info.type == EntryType::kSymlink) return LinkAt(*parent);
  if (info.type != EntryType::kRegular) return FailedPrecondition(NotABlob(full));
  auto text = ReadFileBeneath(parent->dir.get(), parent->leaf, max_bytes, full);
  if (!text.ok() && text.status().code() == Code::kNotFound) return NotFound(full + " was deleted meanwhile");
  return text;
}

Result<uint64_t> FsBlobStore::Size(std::string_view path) {
  const std::string full = FullPath(path);
  const std::string absent = "no object file at " + full + "; it was never put or its step was deleted";
  auto parent = OpenParent(path, /*make=*/false);
  if (!parent.ok() && parent.status().code() == Code::kNotFound) return NotFound(absent);
  TC_RETURN_IF_ERROR(parent.status());
  TC_ASSIGN_OR_RETURN(DirEntry info, StatAt(parent->dir.get(), parent->leaf, full));
  if (info.type == EntryType::kMissing) return NotFound(absent);
  if (info.type == EntryType::kSymlink) return LinkAt(*parent);
  if (info.type != EntryType::kRegular) return FailedPrecondition(NotABlob(full));
  return info.size;
}

Result<BlobListing> FsBlobStore::List(std::string_view prefix, bool one_level) {
  BlobListing out;
  const std::string dir = FullPath(DirOf(prefix));
  auto fd = OpenDir(DirOf(prefix), /*make=*/false);
  // Absent, or a foreign file where a directory would be: nothing listed.
  // A link (at the prefix, on the way, or as the base) is refused.
  if (!fd.ok() && fd.status().code() == Code::kNotFound) return out;
  TC_RETURN_IF_ERROR(fd.status());
  std::string rel(DirOf(prefix));
  if (!rel.empty()) rel += "/";
  TC_RETURN_IF_ERROR(Walk(fd->get(), rel, dir, out, one_level));
  std::sort(out.blobs.begin(), out.blobs.end(),
            [](const BlobInfo& a, const BlobInfo& b) { return a.path < b.path; });
  return out;
}

// ---- durability and deletion ------------------------------------------------

Status FsBlobStore::SyncParents(const std::vector<std::string>& paths) {
  // Every directory from each path's parent up to the base, made if missing.
  std::set<std::string> dirs = {""};
  for (const std::string& p : paths) {
    std::string parent(DirOf(p));
    const size_t cut = parent.rfind('/');
    parent = cut == std::string::npos ? "" : parent.substr(0, cut);
    if (dirs.count(parent) != 0) continue;
    auto made = OpenDir(parent, /*make=*/true);
    if (!made.ok() && made.status().code() == Code::kAlreadyExists) {  // a foreign file where a directory belongs
      return FailedPrecondition("cannot create the directory " + FullPath(parent) + ": " + made.status().message());
    }
    TC_RETURN_IF_ERROR(made.status());
    for (std::string d = parent; !d.empty() && dirs.insert(d).second;) {
      const size_t slash = d.rfind('/');
      d = slash == std::string::npos ? "" : d.substr(0, slash);
    }
  }
  if (!options_.fsync) return Status::Ok();
  for (const std::string& d : dirs) {
    TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenDir(d, /*make=*/false));
    TC_RETURN_IF_ERROR(FsyncDir(fd.get(), d.empty() ? base_ : FullPath(d)));
  }
  return Status::Ok();
}

Status FsBlobStore::Delete(const std::vector<std::string>& paths) {
  std::vector<Parent> dirs;  // to sync, one per directory
  std::set<std::string> seen;
  for (const std::string& p : paths) {
    auto parent = OpenParent(p, /*make=*/false);
    if (!parent.ok() && parent.status().code() == Code::kNotFound) continue;  // absent, or below a foreign file
    TC_RETURN_IF_ERROR(parent.status());
    TC_ASSIGN_OR_RETURN(DirEntry info, StatAt(parent->dir.get(), parent->leaf, parent->full));
    if (info.type == EntryType::kMissing) continue;
    if (info.type == EntryType::kSymlink) return LinkAt(*parent);  // not ours: neither followed nor removed
    TC_RETURN_IF_ERROR(UnlinkAt(parent->dir.get(), parent->leaf, "deleting", parent->full));
    if (seen.insert(DirName(parent->full)).second) dirs.push_back(std::move(*parent));
  }
  if (options_.fsync) {
    for (const Parent& d : dirs) TC_RETURN_IF_ERROR(FsyncDir(d.dir.get(), DirName(d.full)));
  }
  if (!options_.remove_empty_dirs) return Status::Ok();
  for (const std::string& p : paths) TC_RETURN_IF_ERROR(RemoveEmptyParents(p));
  return Status::Ok();
}

Status FsBlobStore::RemoveEmptyParents(std::string_view path) {
  std::string dir(DirOf(path));
  for (;;) {
    const size_t slash = dir.rfind('/');
    if (slash == std::string::npos) return Status::Ok();  // the base: never removed
    dir.resize(slash);
    auto parent = OpenParent(dir, /*make=*/false);
    if (!parent.ok() && parent.status().code() == Code::kNotFound) continue;  // gone already
    TC_RETURN_IF_ERROR(parent.status());
    TC_ASSIGN_OR_RETURN(DirEntry entry, StatAt(parent->dir.get(), parent->leaf, parent->full));
    if (entry.type != EntryType::kDirectory) return Status::Ok();  // a link or a foreign entry: left alone
    TC_RETURN_IF_ERROR(RemoveDirIfEmptyAt(parent->dir.get(), parent->leaf, parent->full)
                           .WithContext("removing the emptied directory " + parent->full));
    TC_ASSIGN_OR_RETURN(DirEntry after, StatAt(parent->dir.get(), parent->leaf, parent->full));
    if (after.type != EntryType::kMissing) return Status::Ok();  // not empty: nor are its parents
    if (options_.fsync) TC_RETURN_IF_ERROR(FsyncDir(parent->dir.get(), DirName(parent->full)));
  }
}

Status FsBlobStore::DeleteBelow(std::string_view prefix) {
  if (DirOf(prefix).empty())
    return InvalidArgument("DeleteBelow of " + describe_ + ": refusing to delete the base");
  auto parent = OpenParent(DirOf(prefix), /*make=*/false);
  if (!parent.ok() && parent.status().code() == Code::kNotFound) return Status::Ok();
  TC_RETURN_IF_ERROR(parent.status());
  TC_ASSIGN_OR_RETURN(DirEntry entry, StatAt(parent->dir.get(), parent->leaf, parent->full));
  if (entry.type == EntryType::kSymlink) return LinkAt(*parent);  // its target is not ours to delete
  if (entry.type != EntryType::kDirectory) return Status::Ok();   // absent (or a foreign entry we leave alone)
  return RemoveTreeAt(parent->dir.get(), parent->leaf, parent->full);
}

}  // namespace tierckpt
