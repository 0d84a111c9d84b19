// blob_store.h — the storage bottom: blobs (whole byte strings) by relative
// path under one base, on a filesystem (fs_blob_store.h), S3 (s3_blob_store.h)
// or process memory (mem_blob_store.h). The step layout of the durable tier
// (layout_store.h, an ObjectStore) and `tierckpt sync` (sync/blob_store.h)
// are both built on it.
//
// Paths: '/'-separated relative paths ("ns/step_0000000007/dir/file"); the
// callers validate their names (common/names.h, sync's ValidateRelativePath)
// before they get here. A prefix is "" (everything) or ends with '/'.
// Like a file tree, a path cannot be both a blob and the parent of blobs
// ("a" and "a/b"): puts that would make it one fail with kFailedPrecondition
// (the filesystem cannot hold both; S3 and memory check, see check_tree).
//
// Atomicity: a put replaces the blob whole; readers see the old bytes or the
// new ones, never a mix (filesystem: a temporary file and rename(2); S3: PUT
// or multipart completion). exclusive puts are atomic against other writers
// (link(2), If-None-Match: *). Nothing orders two non-exclusive writers of
// one path: the last one wins.
//
// Errors: kNotFound for an absent path; kCorruption when a blob is shorter
// than a range asked for; kFailedPrecondition for a path that is something
// else than a blob (a directory) or clashes with the tree; kAlreadyExists
// for a lost exclusive put; kResourceExhausted for ReadSmall past its limit;
// kIoError/kUnavailable from the medium. Messages name the medium's full
// path or URL of the blob.
//
// Thread safety: every implementation is safe for concurrent use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt {

struct BlobInfo {
  std::string path;  // relative to the base
  uint64_t size = 0;
  // What the medium calls this version of the blob: an opaque tag that
  // differs whenever the bytes differ (S3: the ETag), or "" where the medium
  // keeps none (the filesystem, memory). Callers may trust bytes they read
  // under a tag for as long as a listing shows the same tag, never for "".
  std::string tag;
};

// What List returns: blobs sorted by path; with one_level, the blobs right
// below the prefix and the "directories" there (each "<prefix><name>/",
// sorted), as S3 lists with a '/' delimiter.
struct BlobListing {
  std::vector<BlobInfo> blobs;
  std::vector<std::string> dirs;
};

// One blob of PutMany: `size` bytes at `data`, borrowed for the call.
struct BlobBytes {
  std::string path;
  const void* data = nullptr;
  size_t size = 0;
};

struct BlobPutOptions {
  // Fail with kAlreadyExists if the path exists (atomically).
  bool exclusive = false;
  // Refuse (kFailedPrecondition) a path whose parent is a blob or below
  // which blobs lie. S3 spends requests on it (HEAD each parent, a one-key
  // listing); a caller that knows the tree (it emptied it and tracks its own
  // names) passes false. The filesystem and memory always enforce it.
  bool check_tree = true;
};

class BlobStore {
 public:
  virtual ~BlobStore() = default;

  // "file:///mnt/ckpt", "s3://bucket/prefix", "mem://name".
  virtual std::string Describe() const = 0;
  // How many independent requests are worth having in flight (S3: the
  // config's concurrency; 1 where calls are local).
  virtual int Concurrency() const { return 1; }
  // True when a crashed put can leave its temporary behind as a listed blob
  // named "<path>.tmp.<pid>.<n>" (the filesystem); callers sweep them.
  virtual bool KeepsTemporaries() const { return false; }
  // True when one List of everything below a prefix costs less than a Size()
  // of each blob a caller looks for there (S3: a request per 1,000 keys
  // against a HEAD each). The filesystem walks every directory to list, so
  // it says false and its callers stat instead.
  virtual bool ListingIsCheaperThanSizes() const { return false; }

  // Writes `size` bytes as `path`, replacing an earlier blob (creating
  // parent directories where the medium has them). Durable on return where
  // the medium is configured so (filesystem: fsync of the file).
  virtual Status Put(std::string_view path, const void* data, size_t size,
                     const BlobPutOptions& options = {}) = 0;
  // Put of [0, size) of the regular file `fd` (the caller's, left open).
  // The default maps it and calls Put.
  virtual Status PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options = {});
  // Put of each blob, in the order and parallelism the medium finds fastest
  // (S3: one pool of connections, s3/upload_plan.h). Stops at the first
  // failure; blobs written before stay. `cancelled` (may be empty) is asked
  // between requests; once true the call stops with kAborted. The default
  // Put()s one blob after the other.
  virtual Status PutMany(const std::vector<BlobBytes>& blobs, const std::function<bool()>& cancelled,
                         bool check_tree = true);

  // Reads [offset, offset + size) of a blob into dst.
  virtual Status Read(std::string_view path, uint64_t offset, void* dst, size_t size) = 0;
  // Reads [0, size) of a blob into the regular file `fd` at [0, size) (the
  // caller has sized it, or the medium extends it). After an error the
  // file's bytes are unspecified. The default maps fd and calls Read; media
  // that can write the file directly (sendfile, pwrite) override it.
  virtual Status ReadToFile(std::string_view path, int fd, uint64_t size);
  // The whole blob; kResourceExhausted if it is larger than max_bytes.
  virtual Result<std::string> ReadSmall(std::string_view path, size_t max_bytes) = 0;
  // ReadSmall that also sets *tag to the tag (BlobInfo::tag) of the bytes it
  // returns, "" where the medium keeps none. The default: ReadSmall, "".
  virtual Result<std::string> ReadSmallTagged(std::string_view path, size_t max_bytes, std::string* tag);
  // Size of a blob.
  virtual Result<uint64_t> Size(std::string_view path) = 0;

  // Blobs below prefix (see BlobListing). An absent prefix lists nothing.
  virtual Result<BlobListing> List(std::string_view prefix, bool one_level = false) = 0;

  // Makes the directory entries leading to each path durable before a
  // caller relies on them (the filesystem: creates missing parents and
  // fsyncs every directory from each path's parent up to the base, when
  // configured to fsync). No-op where puts are durable whole (S3, memory).
  virtual Status SyncParents(const std::vector<std::string>& paths);
  // Deletes blobs (durably where configured); absent ones are not errors.
  virtual Status Delete(const std::vector<std::string>& paths) = 0;
  // Deletes every blob below prefix (and, on a filesystem, the directory);
  // Ok if there are none.
  virtual Status DeleteBelow(std::string_view prefix) = 0;
  // Aborts the in-progress uploads below prefix (S3 multipart) whose path
  // `which` accepts; returns how many. No-op (0) elsewhere.
  virtual Result<int> AbortUploads(std::string_view prefix,
                                   const std::function<bool(std::string_view)>& which);
};

}  // namespace tierckpt
