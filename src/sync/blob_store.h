// blob_store.h — sync's file-level helpers over the storage bottom
// (store/blob_store.h): where `tierckpt sync` mirrors a local directory,
// files by relative path ("checkpoint-100/model.safetensors") under one
// remote base, on S3 (s3://bucket/prefix/) or a filesystem (/mnt/ckpt/run-1/).
// Unlike the step layout (store/layout_store.h), paths are the user's own
// file names.
//
// Paths: '/'-separated components, each 1..255 bytes of printable ASCII
// other than '/' and '\', never "." or ".."; at most 1,024 bytes in all
// (ValidateRelativePath). A remote name that breaks the rule is reported,
// never written locally.
//
// The base is a directory: every path lives below "<prefix>/", so the base
// "run-1" never sees "run-10/..." (the slash rule; seed 003's users were
// bitten by a prefix without a trailing '/').
//
// Writes are whole-file and atomic for readers: S3 objects appear complete
// (PUT or multipart completion); filesystem copies, both ways, are written to
// a temporary "<name>.tierckpt-partial.<pid>[.<n>]" beside the destination
// and renamed. Errors name the store, the path and what to do. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/blob_store.h"
#include "tierckpt/status.h"

namespace tierckpt::sync {

using tierckpt::BlobInfo;
using tierckpt::BlobStore;

Status ValidateRelativePath(std::string_view path);

// "s3://bucket/prefix?options" (docs/s3.md) or a filesystem directory
// ("file:///abs", "/abs", "relative"; created if missing). Describe() of the
// result ends with '/' ("s3://bucket/prefix/", "file:///mnt/ckpt/run-1/").
Result<std::unique_ptr<BlobStore>> OpenBlobStore(std::string_view url);

// Every file of the remote, sorted by path; sync's own files skipped, names
// that break the path rule skipped and returned in *bad (when given).
Result<std::vector<BlobInfo>> ListRemote(BlobStore& remote, std::vector<std::string>* bad = nullptr);
// Uploads the local file `local` (read whole) as `path`, replacing it.
Status PutFile(BlobStore& remote, std::string_view path, const std::string& local);
// Writes `path` (size bytes, as listed) into the local file `local`, via a
// temporary name beside it (fsynced) and a rename; kCorruption if shorter.
// With mtime_ns, the file has that modification time when it appears
// (set on the temporary before the rename); without, the time of the pull.
Status GetFile(BlobStore& remote, std::string_view path, uint64_t size, const std::string& local,
               std::optional<int64_t> mtime_ns = std::nullopt);
// After a pull wrote rel_files below root: gives each directory holding one
// of them, and each directory above it (root itself excluded), the newest
// modification time among the entries it holds (sync's temporaries
// skipped), deepest first, as if its files had been written there in their
// own time. An empty or vanished directory is left alone. Errors name the
// directory.
Status RestoreDirTimes(const std::string& root, const std::vector<std::string>& rel_files);

// A directory's regular files (relative paths, sizes), sorted by path, not
// following symbolic links; sync's temporaries (kPartialSuffix) and state
// (kStateDir, journal.h) skipped; names breaking the path rule in *bad.
Result<std::vector<BlobInfo>> ListTree(const std::string& dir, std::vector<std::string>* bad);

// The suffix of temporary files sync writes (never uploaded).
inline constexpr std::string_view kPartialSuffix = ".tierckpt-partial";
// The directory of sync's own state in a mirrored directory (never mirrored).
inline constexpr std::string_view kStateDir = ".tierckpt-sync";
// True for sync's own files (temporaries, state), which are never mirrored.
bool IsSyncOwn(std::string_view rel_path);

}  // namespace tierckpt::sync
