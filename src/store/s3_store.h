// s3_store.h — the ObjectStore on S3 and S3-compatible stores (MinIO, Ceph
// RGW, moto, S3 Express One Zone).
//
// Layout (the filesystem tier's, so `aws s3 cp --recursive` of a step gives
// a directory stock DCP FileSystemReader loads):
//     <prefix>/<ns>/step_<10 digits>/<object name>
//     <prefix>/<ns>/step_<10 digits>/_tierckpt_manifest.json   written last
// ('/' in object names are '/' in keys.)
//
// Operations, on s3::S3Client (s3_client.h: retries, checksums, parallel
// transfers):
//   PutObject     HEAD the manifest (a committed step is immutable), check the
//                 name against existing objects (an object cannot also be a
//                 "directory": HEAD each ancestor name, list "<name>/"), then
//                 Upload (a PUT, or parallel multipart above the threshold).
//                 Steps this store emptied itself (DeleteStep, as the
//                 persister does before writing a step) skip those 2-4
//                 requests: it knows the step holds only what it has put
//                 since, and checks names against that (until the step's
//                 next CommitStep or sweep; at most kMaxOwnedSteps remembered).
//   PutObjects    the same checks for every object (the manifest HEAD once,
//                 the names in parallel, and against each other), then one
//                 S3Client::UploadMany of the whole batch: requests of about
//                 the batch's bytes / concurrency, whole PUTs where an object
//                 fits (s3/upload_plan.h). The persister's path.
//   ReadObject    parallel ranged GETs of exactly the bytes asked for; a
//                 short object is kCorruption. Zero-length reads HEAD.
//                 ReadObjectToFile: the same, each range pwritten into the
//                 file as it arrives (no mapping).
//   ObjectSize    HEAD.
//   CommitStep    one listing of the step checks each listed object exists
//                 with its listed size (and that no manifest is there), then
//                 the manifest is PUT with If-None-Match: * (kAlreadyExists
//                 when another writer committed first). On stores without
//                 conditional writes the client falls back to HEAD-then-PUT
//                 (s3_client.h explains the weaker guarantee).
//   ReadManifest  GET + Manifest::Parse; kCorruption if damaged or if it
//                 describes another step.
//   ListCommittedSteps  list "<prefix>/<ns>/" by '/', HEAD each step's
//                 manifest (in parallel).
//   ListNamespaces list "<prefix>/" by '/', keep valid namespaces that hold
//                 a step directory.
//   DeleteStep    the manifest first (the step is invisible from then on),
//                 then every key under the step, in DeleteObjects batches.
//   SweepUncommitted  steps without a manifest (unless options skip them): their keys
//                 are deleted and their in-progress multipart uploads
//                 aborted.
// Our manifest checksums (xxh3) are verified by the readers, not here: the
// agent's restore path and `verify` hash every object they read.
//
// Foreign keys under the prefix (not namespaces, not step directories) are
// ignored by listings and never deleted by sweeps.
//
// Thread safety: safe for concurrent use. Within one process, puts of a step
// exclude its commit/delete/sweep (striped reader-writer locks), as in
// FsObjectStore. Across processes only the conditional manifest write is
// atomic.
//
// Errors: object_store.h's codes; every message starts with the operation and
// names the store ("s3://bucket/prefix"), namespace, step and object, then
// the S3 request that failed (s3_errors.h).
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
#include "s3/s3_client.h"
#include "store/object_store.h"

namespace tierckpt {

class S3ObjectStore final : public ObjectStore {
 public:
  // The real thing: a CurlTransport with the config's timeouts, the AWS
  // credentials chain over the process environment (credentials_chain.h),
  // and the SigV4 signer (the S3 Express signer for directory buckets).
  // Sends nothing: credential and endpoint errors surface on first use.
  static Result<std::unique_ptr<S3ObjectStore>> Open(const s3::S3Config& config);

  // For tests: any transport and signer.
  S3ObjectStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
                std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry = {});

  s3::S3Client& client() { return client_; }

  std::string Describe() const override;  // "s3://bucket/prefix"
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                    const std::function<bool()>& cancelled) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override;
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  // Returns the number of step directories (with objects) removed; aborted
  // multipart uploads are logged, not counted.
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  static constexpr size_t kLockStripes = 64;
  static constexpr size_t kMaxOwnedSteps = 256;
  using StepKey = std::pair<std::string, uint64_t>;

  std::string NsPrefix(std::string_view ns) const;              // "<prefix>/<ns>/"
  std::string StepPrefix(std::string_view ns, uint64_t step) const;  // ".../step_N/"
  std::string ObjectKey(std::string_view ns, uint64_t step, std::string_view name) const;
  std::string ManifestKey(std::string_view ns, uint64_t step) const;
  std::string Url(const std::string& key) const;  // "s3://bucket/key"
  std::shared_mutex& StepLock(std::string_view ns, uint64_t step) const;

  Result<bool> Exists(const std::string& key);
  // Step directories of ns (committed or not), from a '/'-delimited listing.
  Result<std::vector<uint64_t>> StepsOf(std::string_view ns);
  Result<std::vector<std::string>> KeysUnder(const std::string& prefix);

  Status PutImpl(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                 size_t size);
  Status PutManyImpl(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                     const std::function<bool()>& cancelled);
  // kFailedPrecondition when the step's manifest is there (HEAD).
  Status CheckNotCommitted(std::string_view ns, uint64_t step);
  // kFailedPrecondition when an ancestor of name is an object or something
  // lies below name (HEADs and a one-key listing).
  Status CheckNameRemotely(std::string_view ns, uint64_t step, std::string_view name);
  // Adds name to names unless an ancestor of it is there or it is an
  // ancestor of one there (kFailedPrecondition).
  static Status AddName(std::set<std::string>& names, std::string_view name);
  Status ReadImpl(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                  const s3::ByteSink& dst, size_t size);
  Status CommitImpl(const Manifest& manifest);
  Result<Manifest> ReadManifestImpl(std::string_view ns, uint64_t step);
  // Aborts the multipart uploads of ns's uncommitted steps that options do not skip.
  Status AbortUncommittedUploads(std::string_view ns, const SweepOptions& options);

  // Steps emptied by this store (see PutObject above). Reserve returns
  // nullopt if the step is not owned; otherwise Ok after recording `name`,
  // or kFailedPrecondition if it clashes with a name put before.
  void Own(std::string_view ns, uint64_t step);
  void Disown(std::string_view ns, uint64_t step);
  std::optional<Status> ReserveOwned(std::string_view ns, uint64_t step, std::string_view name);

  // Const after construction.
  const std::string describe_;
  const std::string base_;  // "<prefix>/" or "" for the bucket's root
  s3::S3Client client_;     // thread-safe

  mutable std::array<std::shared_mutex, kLockStripes> step_locks_;
  Mutex owned_mu_;
  std::map<StepKey, std::set<std::string>, std::less<>> owned_ GUARDED_BY(owned_mu_);
};

}  // namespace tierckpt
