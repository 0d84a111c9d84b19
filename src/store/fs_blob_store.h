// fs_blob_store.h — the BlobStore on a local directory or an NFS mount: one
// file per blob at <base>/<path> ('/' in paths are subdirectories).
//
// Put writes "<path><temp_suffix>.<pid>.<n>", fsyncs it (options.fsync) and
// renames it into place; an exclusive put links the file in (link(2)), so of
// two exclusive writers exactly one wins. A crash can leave that temporary
// behind; List shows it (KeepsTemporaries() is true) and callers sweep it.
// Listings do not follow symbolic links and skip everything but regular
// files and directories. Reads of a path that is a directory fail with
// kFailedPrecondition.
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
};

class FsBlobStore final : public BlobStore {
 public:
  // Opens the store rooted at `base`, an absolute path (normalized
  // lexically, trailing '/' dropped), creating it and its parents if
  // missing. kInvalidArgument for a relative or NUL-containing path,
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

  // Creates path's parent directories and checks nothing but a file is at
  // path; returns the file's full path.
  Result<std::string> PrepareFile(std::string_view path);
  std::string TempFor(const std::string& full) const;
  // Writes full via a temporary and a rename, fill(fd) writing the bytes.
  Status WriteVia(const std::string& full, const std::function<Status(int)>& fill);
  // The blob's file, opened, once checked to hold [offset, offset + size).
  Result<UniqueFd> OpenRange(std::string_view path, uint64_t offset, uint64_t size);

  // Const after construction.
  const std::string base_;
  const FsBlobOptions options_;
  const std::string describe_;
};

}  // namespace tierckpt
