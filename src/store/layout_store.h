// layout_store.h — the step layout of the durable tier, written once, as an
// ObjectStore over any BlobStore (blob_store.h: filesystem, S3, memory).
//
// Layout (docs/format.md; a downloaded step is what stock DCP
// FileSystemReader loads):
//     <ns>/step_<10 digits>/<object name>                ('/' = subdirs)
//     <ns>/step_<10 digits>/_tierckpt_manifest.json      written last
//
// Operations, in blob terms:
//   PutObject     the manifest's Size (a committed step is immutable), then
//                 Put with the tree check ("a" and "a/b" cannot coexist).
//                 Steps this store emptied itself (DeleteStep, as the
//                 persister does before writing a step) skip both: it knows
//                 the step holds only what it has put since and checks names
//                 against that (until the step's next CommitStep or sweep; at
//                 most kMaxOwnedSteps remembered). On S3 that saves 2-4
//                 requests per object.
//   PutObjects    the same checks once for the batch, then one PutMany (S3:
//                 one pool of connections, s3/upload_plan.h).
//   CommitStep    one listing of the step checks each listed object exists
//                 with its listed size and that no manifest is there; then
//                 SyncParents (filesystem: fsync of the step's directories),
//                 then the manifest is put exclusively (link(2) /
//                 If-None-Match: *): of two concurrent commits one wins, the
//                 other gets kAlreadyExists.
//   ListCommittedSteps  where a listing is cheaper than sizes (S3,
//                 BlobStore::ListingIsCheaperThanSizes): one listing of
//                 everything below "<ns>/", the steps whose manifest it
//                 holds, tagged with the manifest's tag (its ETag); else
//                 (the filesystem, memory) a one-level listing of "<ns>/" and
//                 the manifest's Size of each step (BlobStore::Concurrency()
//                 at once), untagged. ListCommittedStepsTagged is the same.
//   ReadManifestTagged  ReadSmallTagged of the manifest.
//   DeleteStep    the manifest first, durably (the step is invisible from
//                 then on), then everything below the step.
//   SweepUncommitted  steps without a manifest (unless options skip them)
//                 are deleted and their in-progress uploads aborted; in
//                 committed steps, crash temporaries ("*.tmp.<pid>.<n>")
//                 the manifest does not list are removed, where the medium
//                 keeps them (BlobStore::KeepsTemporaries).
// A crash at any point leaves either no manifest (an invisible step that
// SweepUncommitted removes) or a complete step. Foreign entries under the
// base (names that are not namespaces or step directories) are ignored by
// listings and never removed by sweeps.
//
// Thread safety: safe for concurrent use. Within one process, puts of a step
// exclude its commit/delete/sweep (striped reader-writer locks), so a put
// can never land in a committed step. Across processes only the exclusive
// manifest put is atomic; do not put into a step another process commits.
//
// Errors: object_store.h's; every message starts with the operation and
// names the store (Describe(), the blob store's), namespace, step and
// object, then the blob's path or URL.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "store/blob_store.h"
#include "store/object_store.h"

namespace tierckpt {

class LayoutStore : public ObjectStore {
 public:
  // Precondition: blobs != nullptr.
  explicit LayoutStore(std::shared_ptr<BlobStore> blobs);

  BlobStore& blobs() const { return *blobs_; }

  std::string Describe() const override;
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                    const std::function<bool()>& cancelled) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset, void* dst,
                    size_t size) override;
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<std::vector<CommittedStep>> ListCommittedStepsTagged(std::string_view ns) override;
  Result<Manifest> ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  // Returns the number of uncommitted steps (with objects) removed; aborted
  // uploads and removed temporaries are logged, not counted.
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  static constexpr size_t kLockStripes = 64;
  static constexpr size_t kMaxOwnedSteps = 256;
  using StepKey = std::pair<std::string, uint64_t>;

  std::shared_mutex& StepLock(std::string_view ns, uint64_t step) const;
  // True when something is at path (a blob, or a directory on a filesystem).
  Result<bool> Exists(const std::string& path);
  // Step directories of ns (committed or not), ascending.
  Result<std::vector<uint64_t>> StepsOf(std::string_view ns);
  // kFailedPrecondition when the step's manifest is there.
  Status CheckNotCommitted(std::string_view ns, uint64_t step);

  Status PutManyImpl(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                     const std::function<bool()>& cancelled);
  Status CommitImpl(const Manifest& manifest);
  Result<Manifest> ReadManifestImpl(std::string_view ns, uint64_t step, std::string* tag);
  // ListCommittedStepsTagged's two ways (see above).
  Result<std::vector<CommittedStep>> CommittedFromOneListing(std::string_view ns);
  Result<std::vector<CommittedStep>> CommittedFromSizes(std::string_view ns);
  // Best effort; called with the step's lock held exclusively.
  void RemoveStrayTemporaries(std::string_view ns, uint64_t step);
  Status AbortUncommittedUploads(std::string_view ns, const SweepOptions& options);

  // Steps emptied by this store (see PutObject above). ReserveOwned returns
  // nullopt if the step is not owned; otherwise Ok after recording `name`,
  // or kFailedPrecondition if it clashes with a name put before.
  void Own(std::string_view ns, uint64_t step);
  void Disown(std::string_view ns, uint64_t step);
  std::optional<Status> ReserveOwned(std::string_view ns, uint64_t step, std::string_view name);

  // Const after construction.
  const std::shared_ptr<BlobStore> blobs_;  // thread-safe
  const std::string describe_;

  mutable std::array<std::shared_mutex, kLockStripes> step_locks_;
  Mutex owned_mu_;
  std::map<StepKey, std::set<std::string>, std::less<>> owned_ GUARDED_BY(owned_mu_);
};

}  // namespace tierckpt
