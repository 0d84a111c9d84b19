// fs_store.h — the ObjectStore on a local directory or an NFS mount.
//
// Layout under the base directory (docs/format.md):
//     <base>/<ns>/step_<10 digits>/<object name>      one file per object;
//                                                     '/' in names = subdirs
//     <base>/<ns>/step_<10 digits>/_tierckpt_manifest.json    written last
// A step directory is what stock DCP FileSystemReader loads.
//
// Writes: PutObject writes "<path>.tmp.<pid>.<n>", fsyncs it (options.fsync)
// and renames it into place, so a reader sees a whole object or none.
// CommitStep checks every listed object's size, fsyncs the step's
// directories, then links the manifest in exclusively: of two concurrent
// commits of one step exactly one wins, the other gets kAlreadyExists. A
// crash at any point leaves either no manifest (the step is invisible and
// SweepUncommitted removes it) or a complete step.
//
// Robustness: foreign entries under the base (files where directories are
// expected, names that are not namespaces or step directories) are ignored by
// listings and never removed by sweeps.
//
// Thread safety: safe for concurrent use. Within one process, puts of a step
// exclude its commit/delete/sweep (striped reader-writer locks), so a put can
// never land in a committed step. Across processes, only the exclusive
// manifest link is atomic; do not put into a step another process commits.
//
// Errors: see object_store.h. Every message starts with the operation and
// names the store ("file://<base>"), namespace, step and object; errors from
// the file system name the path.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "os/fd.h"
#include "store/object_store.h"

namespace tierckpt {

struct FsStoreOptions {
  // fsync every object file at put, and the step's directories before the
  // manifest is linked in (and the manifest with its directory after), so a
  // committed step survives power loss. Default true: durable tiers need it.
  // Turn off only for scratch stores (tests, tmpfs) where it buys nothing.
  bool fsync = true;
};

class FsObjectStore final : public ObjectStore {
 public:
  // Opens the store rooted at `base`, an absolute path (normalized lexically,
  // trailing '/' dropped), creating it and its parents if missing. Fails with
  // kInvalidArgument for a relative or NUL-containing path and
  // kFailedPrecondition if base is not a writable directory.
  static Result<std::unique_ptr<FsObjectStore>> Open(std::string_view base,
                                                     FsStoreOptions options = {});

  const std::string& base() const { return base_; }

  std::string Describe() const override;  // "file://<base>"
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override;
  // sendfile(2) from the object file (falls back to the default without it).
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  // Removes step directories without a manifest (except `keep`) and, in
  // committed steps, leftover "*.tmp.<pid>.<n>" files the manifest does not
  // list. Returns the number of step directories removed.
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  static constexpr size_t kLockStripes = 64;

  FsObjectStore(std::string base, FsStoreOptions options);

  std::string NsDir(std::string_view ns) const;
  std::string StepDir(std::string_view ns, uint64_t step) const;
  std::string ManifestPath(std::string_view ns, uint64_t step) const;
  std::string ObjectPath(std::string_view ns, uint64_t step, std::string_view name) const;
  std::shared_mutex& StepLock(std::string_view ns, uint64_t step) const;

  // The bodies of the public calls, without the operation context.
  Status PutImpl(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                 size_t size);
  // The object's file, opened, once checked to hold [offset, offset + size).
  Result<UniqueFd> OpenRange(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                             size_t size);
  Status ReadImpl(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                  void* dst, size_t size);
  Status CommitImpl(const Manifest& manifest);
  Result<Manifest> ReadManifestImpl(std::string_view ns, uint64_t step);
  Status SyncStepDirs(const Manifest& manifest);
  // Best effort; called with the step's lock held exclusively.
  void RemoveStrayTmpFiles(std::string_view ns, uint64_t step);

  // Const after construction.
  const std::string base_;
  const FsStoreOptions options_;
  const std::string describe_;

  mutable std::array<std::shared_mutex, kLockStripes> step_locks_;
};

}  // namespace tierckpt
