// object_store.h — where committed steps live outside the memory tier.
//
// An ObjectStore holds steps laid out as
//     <base>/<namespace>/step_<10 digits>/<object name>   (the DCP files)
//     <base>/<namespace>/step_<10 digits>/_tierckpt_manifest.json   (last)
// so that a downloaded step directory is loadable by stock DCP
// FileSystemReader. The commit rule holds in every implementation: objects
// first, the manifest last and atomically; a step without its manifest is
// invisible to ListCommittedSteps/ReadManifest and is garbage for
// SweepUncommitted.
//
// The step layout is written once, LayoutStore (layout_store.h), over the
// storage bottom BlobStore (blob_store.h). Implementations: FsObjectStore
// (local dir or NFS), MemObjectStore (tests),
// FaultInjectingStore (wraps any store), S3ObjectStore (s3_store.h). One conformance suite
// (object_store_conformance_test.cc) runs against all of them.
//
// Thread safety: every implementation is safe for concurrent calls. Writers of
// the same (namespace, step, object) at once get last-writer-wins; the
// persister never does that.
//
// Errors: kNotFound for absent steps/objects, kAlreadyExists when committing
// a committed step, kFailedPrecondition when the manifest lists an object
// that was not put with that size, kInvalidArgument for bad names (validated
// by every implementation via common/names.h), kIoError/kUnavailable for
// the medium. Messages name the store (Describe()), the step and the object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt {

// Which uncommitted steps SweepUncommitted leaves alone.
struct SweepOptions {
  std::vector<uint64_t> keep;      // steps being written by the caller
  std::optional<uint64_t> below;   // if set, only steps < below are swept

  bool Skips(uint64_t step) const {
    if (below.has_value() && step >= *below) return true;
    for (uint64_t k : keep) {
      if (k == step) return true;
    }
    return false;
  }
};

// A committed step and the tag of its manifest: an opaque string that
// differs whenever the manifest's bytes differ (S3: its ETag), "" where the
// store keeps none. Manifest bytes read under a tag (ReadManifestTagged) may
// be trusted while a listing shows the same tag, never under "".
struct CommittedStep {
  uint64_t step = 0;
  std::string manifest_tag;
};

// One object of PutObjects: `size` bytes at `data`, borrowed for the call.
struct ObjectBytes {
  std::string name;
  const void* data = nullptr;
  size_t size = 0;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Where this store is, for messages and listings: "file:///mnt/ckpt".
  virtual std::string Describe() const = 0;
  // Where the steps of ns are: Describe(), except for a store that routes
  // namespaces to several bases (agent/routed_store.h).
  virtual std::string DescribeNamespace(std::string_view ns) const {
    (void)ns;
    return Describe();
  }

  // Writes one object of an uncommitted step, replacing an earlier put of the
  // same name. Fails with kFailedPrecondition if the step is committed.
  virtual Status PutObject(std::string_view ns, uint64_t step, std::string_view name,
                           const void* data, size_t size) = 0;

  // Writes the objects of one uncommitted step as PutObject of each would
  // (the same checks, errors and replacement rule), in the order and
  // parallelism the store finds fastest: S3 sends the whole step through one
  // pool of connections (s3/upload_plan.h). Stops at the first failure and
  // returns it; objects written before stay, uncommitted, as after a failed
  // PutObject. `cancelled` (may be empty) is asked between requests; once it
  // says true the call stops with kAborted. The default PutObject()s one
  // object after the other.
  virtual Status PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                            const std::function<bool()>& cancelled);

  // Reads [offset, offset + size) of an object, committed or not. Fails with
  // kNotFound if absent and kCorruption if the object is shorter than
  // offset + size.
  virtual Status ReadObject(std::string_view ns, uint64_t step, std::string_view name,
                            uint64_t offset, void* dst, size_t size) = 0;

  // Reads [0, size) of an object into the regular file `fd` at [0, size)
  // (the caller has sized it). Errors as ReadObject; after an error the
  // file's bytes are unspecified. The default maps fd and calls ReadObject;
  // stores that can write the file directly (pwrite, sendfile) override it:
  // for a fresh tmpfs file that skips zeroing every page, which a populated
  // mapping needs first (about half the kernel time of a restore here).
  virtual Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                  uint64_t size);
  // ReadObjectToFile that also returns the checksum of the bytes it wrote,
  // as ComputeChecksum(...).ToString() gives it, when the store hashed them on
  // the way (a peer's stream), or "" when it did not: the caller then reads
  // the file to verify it. The default calls ReadObjectToFile and returns "".
  virtual Result<std::string> ReadObjectToFileHashed(std::string_view ns, uint64_t step, std::string_view name,
                                                     int fd, uint64_t size);

  // Size of an object, committed or not; kNotFound if absent.
  virtual Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step,
                                      std::string_view name) = 0;

  // Commits manifest.step of manifest.ns by writing the manifest last,
  // atomically. Checks first that each listed object exists with its listed
  // size (kFailedPrecondition otherwise; nothing is committed).
  virtual Status CommitStep(const Manifest& manifest) = 0;

  // The manifest of a committed step; kNotFound if the step is absent or
  // uncommitted; kCorruption if the manifest is damaged.
  virtual Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) = 0;

  // Committed steps of a namespace, ascending; empty if the namespace is
  // unknown.
  virtual Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) = 0;

  // ListCommittedSteps with the tag of each step's manifest, in as few
  // requests as the store can (S3: one listing of the namespace, a request
  // per 1,000 keys, instead of a HEAD per step). The default calls
  // ListCommittedSteps and tags nothing.
  virtual Result<std::vector<CommittedStep>> ListCommittedStepsTagged(std::string_view ns);
  // ReadManifest that also sets *tag to the tag of the manifest bytes it
  // parsed ("" where the store keeps none, or on failure). The default
  // calls ReadManifest and tags nothing.
  virtual Result<Manifest> ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag);

  // Namespaces that have at least one step directory (committed or not),
  // sorted.
  virtual Result<std::vector<std::string>> ListNamespaces() = 0;

  // Deletes a step: the manifest first (the step is invisible from then on),
  // then its objects. Ok if the step does not exist.
  virtual Status DeleteStep(std::string_view ns, uint64_t step) = 0;

  // Deletes the uncommitted steps of ns that `options` does not skip (steps
  // the caller is writing right now; with `below`, every step >= below).
  // Stores that have them also abort in-progress uploads of those steps.
  // Returns how many steps were removed. Callers must not sweep steps that
  // another process is writing.
  virtual Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) = 0;
};

// Opens a store from a durable-base URL:
//   "file:///abs/path" or "/abs/path" or "relative/path"  → FsObjectStore
//   "mem://name"  → the process-wide MemObjectStore named `name` (tests)
//   "s3://bucket/prefix?options" → S3ObjectStore (docs/s3.md: options, credentials, endpoints)
// Relative paths are made absolute against the current directory.
Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view url);

}  // namespace tierckpt
