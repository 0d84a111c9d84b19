// s3_store.h — the ObjectStore on S3 and S3-compatible stores (MinIO, Ceph
// RGW, moto, S3 Express One Zone): the step layout (layout_store.h) over an
// S3BlobStore (s3_blob_store.h).
//
// Layout (the filesystem tier's, so `aws s3 cp --recursive` of a step gives
// a directory stock DCP FileSystemReader loads):
//     <prefix>/<ns>/step_<10 digits>/<object name>
//     <prefix>/<ns>/step_<10 digits>/_tierckpt_manifest.json   written last
// ('/' in object names are '/' in keys.) Requests per operation are in
// layout_store.h (in blob terms) and s3_blob_store.h. PutObjects sends the
// whole step through one pool of connections; CommitStep checks the step
// with one listing and PUTs the manifest with If-None-Match: * (stores
// without conditional writes: s3_client.h's weaker fallback); sweeps abort
// the multipart uploads of the uncommitted steps they remove.
// Our manifest checksums (xxh3) are verified by the readers, not here.
//
// Thread safety and errors: layout_store.h; after the store, namespace, step
// and object, messages name the S3 request that failed (s3_errors.h).
#pragma once

#include <memory>

#include "s3/s3_client.h"
#include "store/layout_store.h"
#include "store/s3_blob_store.h"

namespace tierckpt {

class S3ObjectStore final : public LayoutStore {
 public:
  // The real thing (S3BlobStore::Open). Refuses (kInvalidArgument) a prefix
  // so long that the longest names tierckpt accepts would not fit an S3 key.
  // Sends nothing: credential and endpoint errors surface on first use.
  static Result<std::unique_ptr<S3ObjectStore>> Open(const s3::S3Config& config);

  // For tests: any transport and signer.
  S3ObjectStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
                std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry = {});

  s3::S3Client& client() { return s3_->client(); }

 private:
  explicit S3ObjectStore(std::shared_ptr<S3BlobStore> s3) : LayoutStore(s3), s3_(std::move(s3)) {}

  const std::shared_ptr<S3BlobStore> s3_;
};

}  // namespace tierckpt
