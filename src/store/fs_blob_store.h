// fs_blob_store.h — the BlobStore on a local directory or an NFS mount: one
// file per blob at <base>/<path> ('/' in paths are subdirectories).
//
// Put writes "<path><temp_suffix>.<pid>.<n>" (a large blob with O_DIRECT
// where the filesystem takes it: options.direct_min_bytes), fsyncs it
// (options.fsync) and renames it into place; an exclusive put links the file in (link(2)), so of
// two exclusive writers exactly one wins. A crash can leave that temporary
// behind; List shows it (KeepsTemporaries() is true) and callers sweep it.
// Listings do not follow symbolic links and skip everything but regular
// files and directories. Reads of a path that is a directory fail with
// kFailedPrecondition.
//
// No symbolic link at or below the base is ever followed (decision 78): the
// base is canonicalized once, at Open; every operation then opens it afresh
// by that path with no link allowed in it (os/beneath.h, so a remount there
// is seen) and reaches files from its fd. A link met — the base itself, a
// directory above or below it, or the file named — fails with
// kPermissionDenied "durable base <base>: <path> is a symbolic link ...";
// nothing is written, read or deleted through it, and a delete does not
// remove it.
//
// Thread safety: safe for concurrent use (no state but the configuration).
// Errors: blob_store.h's; messages name the file's path.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "store/blob_store.h"

namespace tierckpt {

struct FsBlobOptions {
  // fsync every file at put, deleted files' directories, and (SyncParents)
  // the directories leading to a path. Off only for scratch stores.
  bool fsync = true;
  // Temporaries are "<path><temp_suffix>.<pid>.<n>"; sync names its own
  // (".tierckpt-partial") so that it recognises and never mirrors them.
  std::string temp_suffix = ".tmp";
  mode_t file_mode = 0600;  // of new files, before the umask
  // Delete also removes the directories it leaves empty, deepest first, up
  // to but never the base (rmdir(2): a directory that holds anything, a
  // concurrent writer's temporary included, stays). For sync's directory
  // remote, which mirrors files: a checkpoint directory deleted locally
  // leaves no empty directory behind (decision 89). Off by default: the
  // durable tier deletes whole step directories with DeleteBelow.
  bool remove_empty_dirs = false;
  // Put writes a blob of at least this many bytes with O_DIRECT where the
  // filesystem and the buffer allow it (os/direct_write.h: no copy into the
  // page cache; decision 172), buffered otherwise. 0: always buffered.
  size_t direct_min_bytes = size_t{1} << 20;
};

class FsBlobStore final : public BlobStore {
 public:
  // Opens the store rooted at `base`, an absolute path (normalized
  // lexically, trailing '/' dropped, then its symbolic links resolved),
  // creating it and its parents if missing. kInvalidArgument for a relative or NUL-containing path,
  // kFailedPrecondition if base is not a writable directory.
  static Result<std::unique_ptr<FsBlobStore>> Open(std::string_view base, FsBlobOptions options = {});

  const std::string& base() const { return base_; }
  // The file holding `path`.
  std::string FullPath(std::string_view path) const;

  std::string Describe() const override;  // "file://<base>"
  bool KeepsTemporaries() const override { return true; }
  Status Put(std::string_view path, const void* data, size_t size,
             const BlobPutOptions& options = {}) override;
  // Copies the file with sendfile(2) into the temporary, then renames it.
  Status PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options = {}) override;
  Status Read(std::string_view path, uint64_t offset, void* dst, size_t size) override;
  // sendfile(2) from the blob's file (the default without it).
  Status ReadToFile(std::string_view path, int fd, uint64_t size) override;
  Result<std::string> ReadSmall(std::string_view path, size_t max_bytes) override;
  Result<uint64_t> Size(std::string_view path) override;
  Result<BlobListing> List(std::string_view prefix, bool one_level = false) override;
  Status SyncParents(const std::vector<std::string>& paths) override;
  Status Delete(const std::vector<std::string>& paths) override;
  Status DeleteBelow(std::string_view prefix) override;

 private:
  FsBlobStore(std::string base, FsBlobOptions options);

  // A file's directory, reached from the base without following links.
  struct Parent {
    UniqueFd dir;      // holds leaf
    std::string leaf;  // the file's name
    std::string full;  // FullPath, for messages
  };
  // The base opened afresh, then the directory holding path (or the
  // directory dir) below it, made when make; a link on the way fails
  // (InBase), a missing directory is kNotFound and, with make, a file in
  // the way kAlreadyExists.
  Result<Parent> OpenParent(std::string_view path, bool make) const;
  Result<UniqueFd> OpenDir(std::string_view dir, bool make) const;
  // The os layer's refusal of a link (kFailedPrecondition) as
  // kPermissionDenied with the base named first; other failures unchanged.
  Status InBase(Status s) const;
  // The refusal of the link p.leaf.
  Status LinkAt(const Parent& p) const;

  // Creates path's parent directories and checks nothing but a file is at
  // path; returns its directory.
  Result<Parent> PrepareFile(std::string_view path);
  std::string TempFor(const std::string& name) const;
  // Writes p's file via a temporary and a rename, fill(fd) writing the bytes.
  Status WriteVia(const Parent& p, const std::function<Status(int)>& fill);
  // Writes data into fd, a new empty file: O_DIRECT for a blob of direct_min_bytes or more.
  Status WriteNew(int fd, const void* data, size_t size, const std::string& what) const;
  // Removes the empty directories above path (remove_empty_dirs), deepest
  // first, stopping at the first that holds something and at the base.
  Status RemoveEmptyParents(std::string_view path);
  // The blob's file, opened, once checked to hold [offset, offset + size).
  Result<UniqueFd> OpenRange(std::string_view path, uint64_t offset, uint64_t size);

  // Const after construction.
  const std::string base_;
  const FsBlobOptions options_;
  const std::string describe_;
};

}  // namespace tierckpt
