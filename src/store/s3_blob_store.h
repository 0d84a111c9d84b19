// s3_blob_store.h — the BlobStore on S3 and S3-compatible stores (MinIO,
// Ceph RGW, moto, S3 Express One Zone): the blob `path` is the key
// "<prefix>/<path>" (the bucket's root for an empty prefix).
//
// On s3::S3Client (s3_client.h: retries, checksums, parallel transfers):
//   Put        with check_tree, HEAD each parent name and list "<path>/"
//              (one key); then Upload (a PUT, or parallel multipart above the
//              threshold); exclusive: one PUT with If-None-Match: * (stores
//              without conditional writes: s3_client.h's fallback).
//   PutMany    the tree checks of every blob in parallel (and against each
//              other), then one S3Client::UploadMany of the whole batch:
//              requests of about the batch's bytes / concurrency, whole PUTs
//              where a blob fits (s3/upload_plan.h).
//   Read       parallel ranged GETs of exactly the bytes asked for; a short
//              blob is kCorruption; zero-length reads HEAD. ReadToFile: each
//              range pwritten into the file as it arrives (no mapping).
//   ReadSmall GET; Size HEAD; List ListObjectsV2 (with '/' for one_level),
//              each blob tagged with its ETag (as ReadSmallTagged's GET);
//   Delete / DeleteBelow DeleteObjects batches; AbortUploads lists the
//   in-progress multipart uploads and aborts the accepted ones.
//
// Thread safety: safe for concurrent use (S3Client is). Errors: blob_store.h's
// codes; messages name the s3:// URL and the request that failed.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "s3/s3_client.h"
#include "store/blob_store.h"

namespace tierckpt {

class S3BlobStore final : public BlobStore {
 public:
  // The real thing: a CurlTransport with the config's timeouts, the AWS
  // credentials chain over the process environment and the SigV4 (or S3
  // Express) signer. Sends nothing: credential and endpoint errors surface
  // on first use.
  static Result<std::unique_ptr<S3BlobStore>> Open(const s3::S3Config& config);
  // For tests: any transport and signer.
  S3BlobStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
              std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry = {});

  s3::S3Client& client() { return client_; }
  // "s3://bucket/<prefix>/<path>".
  std::string Url(std::string_view path) const;

  std::string Describe() const override;  // "s3://bucket/prefix"
  int Concurrency() const override;
  bool ListingIsCheaperThanSizes() const override { return true; }
  Status Put(std::string_view path, const void* data, size_t size,
             const BlobPutOptions& options = {}) override;
  Status PutMany(const std::vector<BlobBytes>& blobs, const std::function<bool()>& cancelled,
                 bool check_tree = true) override;
  Status Read(std::string_view path, uint64_t offset, void* dst, size_t size) override;
  Status ReadToFile(std::string_view path, int fd, uint64_t size) override;
  Result<std::string> ReadSmall(std::string_view path, size_t max_bytes) override;
  Result<std::string> ReadSmallTagged(std::string_view path, size_t max_bytes, std::string* tag) override;
  Result<uint64_t> Size(std::string_view path) override;
  Result<BlobListing> List(std::string_view prefix, bool one_level = false) override;
  Status Delete(const std::vector<std::string>& paths) override;
  Status DeleteBelow(std::string_view prefix) override;
  Result<int> AbortUploads(std::string_view prefix,
                           const std::function<bool(std::string_view)>& which) override;

 private:
  std::string Key(std::string_view path) const { return base_ + std::string(path); }
  // kFailedPrecondition when a parent of path is a blob or blobs lie below.
  Status CheckTree(std::string_view path);
  Status ReadRange(std::string_view path, uint64_t offset, const s3::ByteSink& dst, size_t size);

  // Const after construction.
  const std::string describe_;
  const std::string base_;  // "<prefix>/" or "" for the bucket's root
  s3::S3Client client_;     // thread-safe
};

}  // namespace tierckpt
