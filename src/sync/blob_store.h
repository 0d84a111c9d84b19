// blob_store.h — where `tierckpt sync` mirrors a local directory: files by
// relative path ("checkpoint-100/model.safetensors") under one remote base,
// on S3 (s3://bucket/prefix/) or a filesystem (/mnt/ckpt/run-1/). Unlike
// the step-based ObjectStore, keys are the user's own file names.
//
// Paths: '/'-separated components, each 1..255 bytes of printable ASCII
// other than '/' and '\', never "." or ".."; at most 1,024 bytes in all
// (ValidateRelativePath). A remote name that breaks the rule is reported,
// never written locally.
//
// The base is a directory: every key lives below "<prefix>/", so the base
// "run-1" never sees "run-10/..." (the slash rule; seed 003's users were
// bitten by a prefix without a trailing '/').
//
// Writes are whole-file and atomic for readers: S3 objects appear complete
// (PUT or multipart completion); filesystem copies are written to a
// temporary name in the destination directory and renamed. Errors name the
// store, the path and what to do. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::sync {

struct BlobInfo {
  std::string path;  // relative to the base
  uint64_t size = 0;
};

Status ValidateRelativePath(std::string_view path);

class BlobStore {
 public:
  virtual ~BlobStore() = default;
  // "s3://bucket/prefix/" or "file:///mnt/ckpt/run-1/".
  virtual std::string Describe() const = 0;
  // Every file below the base, sorted by path. Names that break the path
  // rule are skipped and returned in *bad (when given).
  virtual Result<std::vector<BlobInfo>> List(std::vector<std::string>* bad = nullptr) = 0;
  // Uploads the local file `local` (read whole) as `path`, replacing it.
  virtual Status PutFile(std::string_view path, const std::string& local) = 0;
  // Writes `path` (size bytes, as listed) into the local file `local`, via a
  // temporary name beside it and a rename; kCorruption if it is shorter.
  virtual Status GetFile(std::string_view path, uint64_t size, const std::string& local) = 0;
  // Deletes paths; absent ones are not errors.
  virtual Status Delete(const std::vector<std::string>& paths) = 0;
};

// A directory's regular files (relative paths, sizes), sorted by path, not
// following symbolic links; sync's temporaries (kPartialSuffix) and state
// (kStateDir, journal.h) skipped; names breaking the path rule in *bad.
Result<std::vector<BlobInfo>> ListTree(const std::string& dir, std::vector<std::string>* bad);

// "s3://bucket/prefix?options" (docs/s3.md) or a filesystem directory
// ("file:///abs", "/abs", "relative"; created if missing).
Result<std::unique_ptr<BlobStore>> OpenBlobStore(std::string_view url);

// The suffix of temporary files sync writes (never uploaded).
inline constexpr std::string_view kPartialSuffix = ".tierckpt-partial";
// The directory of sync's own state in a mirrored directory (never mirrored).
inline constexpr std::string_view kStateDir = ".tierckpt-sync";
// True for sync's own files (temporaries, state), which are never mirrored.
bool IsSyncOwn(std::string_view rel_path);

}  // namespace tierckpt::sync
