// s3_client.h — the S3 REST operations tierckpt needs, with retries,
// checksums, parallel transfers and conditional writes.
//
// One S3Client talks to one bucket (S3Config) through an HttpTransport and a
// RequestSigner. Keys are whole keys ("prefix/ns/step_0000000001/a"); the
// client does not add config.prefix (except for its conditional-write probe).
// Addressing: path-style "<endpoint>/<bucket>/<key>" or virtual-host
// "<scheme>://<bucket>.<host>/<key>" (BucketEndpoint); keys are URI-encoded
// with '/' kept.
//
// Every request:
//   - sends x-amz-content-sha256: UNSIGNED-PAYLOAD, or the body's SHA-256 when
//     config.sign_payload; every PUT and part also sends x-amz-checksum-crc32c
//     (base64 big-endian CRC32C of the body), so S3 rejects corrupted uploads;
//   - is retried up to config.max_attempts times with capped exponential
//     backoff and full jitter (s3_retry.h) on the failures s3_errors.h lists,
//     on a fresh connection after a transport failure or a 5xx;
//   - fails with a Status naming the operation, "s3://bucket/key", the
//     endpoint, the HTTP status, S3's code, message and request id, the
//     attempts made, and what to do (s3_errors.h gives the codes).
//
// Multipart: Upload() sends objects above config.multipart_threshold as a
// multipart upload: CreateMultipartUpload with x-amz-checksum-algorithm:
// CRC32C and x-amz-checksum-type COMPOSITE (default) or FULL_OBJECT
// (config.full_object_checksum), parts of PlanParts() size on
// config.concurrency threads each with its CRC32C, and
// CompleteMultipartUpload listing every part's ETag and checksum, plus with
// FULL_OBJECT the whole object's CRC32C (combined from the parts). Any
// failure aborts the upload. A 200 whose body is an <Error> is an error (retried if retryable).
//
// Conditional writes (PutOptions::if_none_match): If-None-Match: * makes S3
// refuse to overwrite an existing key (412 → kAlreadyExists). Stores that
// ignore the header would silently overwrite, so config.conditional decides:
//   kOn   always send the header (a 501 is then an error);
//   kOff  never: HEAD the key first and write only if it is absent;
//   kAuto probe once per client, at the first conditional write: PUT a probe
//         key "<prefix>/_tierckpt_probe/<random>" twice with the header; a 412
//         on the second means the store enforces it. Otherwise (the second
//         PUT succeeds, or 501 NotImplemented) fall back to HEAD-then-PUT and
//         log a warning once. A 501 to a later conditional write also
//         switches to the fallback.
// The fallback is weaker: two writers racing between the HEAD and the PUT can
// both "win" (last writer wins). tierckpt has one committer per step, so this
// only matters when two jobs share a namespace by mistake.
// A conditional PUT that was retried after an ambiguous failure (timeout,
// reset, 5xx) and then gets 412 reads the key back: when it holds exactly
// the bytes being written, the earlier attempt landed and the write is Ok.
//
// Thread safety: every method is safe to call from many threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "s3/http.h"
#include "s3/s3_config.h"
#include "s3/s3_errors.h"
#include "s3/s3_retry.h"
#include "s3/s3_xml.h"
#include "s3/signer.h"
#include "s3/upload_plan.h"
#include "tierckpt/status.h"

namespace tierckpt::s3 {

inline constexpr uint64_t kMaxParts = 10000;
inline constexpr uint64_t kMaxPartSize = 5ULL << 30;
inline constexpr size_t kDeleteBatch = 1000;

struct PutOptions {
  // Write only if the key does not exist yet: kAlreadyExists if it does.
  bool if_none_match = false;
};

// One object of UploadMany. data is borrowed and must outlive the call.
struct UploadItem {
  std::string key;
  const void* data = nullptr;
  size_t size = 0;
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;
};

struct ListOptions {
  std::string delimiter;   // "" lists every key below the prefix; "/" one level
  int page_size = 1000;    // max-keys per request (1..1000)
  size_t max_results = 0;  // stop once this many objects + prefixes are in; 0 = all
};

struct ListResult {
  std::vector<ListedObject> objects;        // in the order S3 returns them
  std::vector<std::string> common_prefixes;  // with the delimiter at the end
};

struct PartPlan {
  uint64_t part_size = 0;
  uint64_t part_count = 0;
};

// How an object of `size` bytes is cut into parts: `part_size`, grown to a
// multiple of 1 MiB when needed so there are at most 10,000 parts (the last
// part may be shorter). kInvalidArgument when even 5 GiB parts cannot hold
// it (about 48.8 TiB) or part_size is 0. Pure.
Result<PartPlan> PlanParts(uint64_t size, uint64_t part_size);

// Where downloaded bytes land: caller memory, or a file descriptor written
// with pwrite(2) from fd_offset on (SendOptions::sink_fd: cheaper for a fresh
// tmpfs file than a mapping of it). Borrowed; must outlive the call.
struct ByteSink {
  void* mem = nullptr;
  int fd = -1;
  uint64_t fd_offset = 0;

  static ByteSink Memory(void* p) { return ByteSink{p, -1, 0}; }
  static ByteSink File(int fd, uint64_t offset) { return ByteSink{nullptr, fd, offset}; }
  // The same sink, n bytes further on.
  ByteSink Advance(size_t n) const {
    return mem != nullptr ? Memory(static_cast<char*>(mem) + n) : File(fd, fd_offset + n);
  }
};

class S3Client {
 public:
  // Preconditions: transport and signer are not null. retry.max_attempts is
  // replaced by config.max_attempts.
  S3Client(S3Config config, std::shared_ptr<HttpTransport> transport,
           std::shared_ptr<RequestSigner> signer, RetryOptions retry = {});

  const S3Config& config() const { return config_; }
  // "s3://bucket/prefix".
  std::string Describe() const { return DescribeS3(config_); }

  // ---- writes ----
  // One PUT of the whole object.
  Status PutObject(std::string_view key, const void* data, size_t size,
                   const PutOptions& options = {});
  // PutObject up to config.multipart_threshold, a parallel multipart upload
  // above it.
  Status Upload(std::string_view key, const void* data, size_t size,
                const PutOptions& options = {});
  // Uploads every item through one pool of config.concurrency connections,
  // cut into requests by PlanUpload (upload_plan.h: whole-object PUTs and
  // parts of about the step's bytes / concurrency, largest first): the
  // multipart uploads are created, every request sent, then every multipart
  // upload completed. After the first failure no new request starts, the
  // multipart uploads this call created are aborted and the failure is
  // returned; objects already PUT stay (an uncommitted step's garbage).
  // `cancelled`, when given, is asked before each request; once it says
  // true the call stops the same way with kAborted. No conditional writes.
  Status UploadMany(const std::vector<UploadItem>& items,
                    const std::function<bool()>& cancelled = nullptr);
  // The steps of a multipart upload. Returns the upload id.
  Result<std::string> CreateMultipartUpload(std::string_view key);
  Result<CompletedPart> UploadPart(std::string_view key, std::string_view upload_id,
                                   int part_number, const void* data, size_t size);
  // `parts` ascending by number, each with its crc32c_value and size.
  // if_none_match sends If-None-Match: * as is (no probe, no fallback).
  Status CompleteMultipartUpload(std::string_view key, std::string_view upload_id,
                                 const std::vector<CompletedPart>& parts,
                                 const PutOptions& options = {});
  Status AbortMultipartUpload(std::string_view key, std::string_view upload_id);

  // ---- reads ----
  // Reads exactly [offset, offset + size) into dst with one ranged GET.
  // kNotFound if the key is absent; kCorruption if the object is shorter.
  // size 0 reads nothing and sends nothing.
  Status GetRange(std::string_view key, uint64_t offset, const ByteSink& dst, size_t size);
  Status GetRange(std::string_view key, uint64_t offset, void* dst, size_t size) {
    return GetRange(key, offset, ByteSink::Memory(dst), size);
  }
  // The same range as parallel ranged GETs on config.concurrency threads:
  // one range per thread, each at least config.part_size (fewer requests
  // than part_size ranges at the same parallelism).
  Status Download(std::string_view key, uint64_t offset, const ByteSink& dst, size_t size);
  Status Download(std::string_view key, uint64_t offset, void* dst, size_t size) {
    return Download(key, offset, ByteSink::Memory(dst), size);
  }
  // A whole (small) object; kResourceExhausted if it exceeds max_bytes.
  // With etag, sets *etag to the response's ETag ("" when it has none).
  Result<std::string> GetObject(std::string_view key, size_t max_bytes, std::string* etag = nullptr);
  // Size and ETag; kNotFound if absent.
  Result<ObjectInfo> HeadObject(std::string_view key);

  // ---- listing and deletion ----
  // ListObjectsV2 below `prefix`, following continuation tokens.
  Result<ListResult> ListObjects(std::string_view prefix, const ListOptions& options = {});
  Status DeleteObject(std::string_view key);
  // DeleteObjects in batches of 1,000 (in parallel), each with Content-MD5.
  // Keys that fail with a retryable per-key error are retried; any other
  // per-key <Error> fails the call naming the keys and codes. Absent keys are
  // not errors.
  Status DeleteObjects(const std::vector<std::string>& keys);
  // In-progress multipart uploads whose keys start with `prefix`.
  Result<std::vector<MultipartUpload>> ListMultipartUploads(std::string_view prefix);
  // Aborts them all (an upload gone meanwhile counts as aborted); returns how
  // many.
  Result<int> AbortMultipartUploads(std::string_view prefix);

  // ---- conditional writes ----
  // Whether If-None-Match: * is enforced: from config.conditional, probing
  // once in kAuto (see above). Errors are the probe's (not cached).
  Result<bool> ConditionalWritesSupported();

 private:
  // One logical request; Execute turns it into signed HttpRequests.
  struct Call {
    std::string_view op;          // "PutObject", for messages
    std::string method = "GET";
    std::optional<std::string_view> key;  // the object; nullopt = the bucket
    std::vector<std::pair<std::string, std::string>> query;
    Headers headers;
    const void* body = nullptr;
    size_t body_size = 0;
    SendOptions sink;
    bool error_in_200 = false;    // a 2xx may carry an <Error> body
  };

  // Sends `call` with retries. Returns the 2xx response, or the final error.
  // *attempts (if given) receives the number of attempts made.
  Result<HttpResponse> Execute(const Call& call, int* attempts = nullptr);
  HttpRequest BuildRequest(const Call& call, const std::string& payload_hash) const;
  // "PutObject s3://bucket/key" (or just the bucket).
  std::string What(std::string_view op, std::optional<std::string_view> key) const;

  Status PutOnce(std::string_view key, const void* data, size_t size, bool if_none_match);
  Status MultipartOnce(std::string_view key, const void* data, size_t size, bool if_none_match);
  // Writes with `write(conditional)` honouring the conditional-write mode.
  template <typename WriteFn>
  Status WriteIfAbsent(std::string_view key, const WriteFn& write);
  void MarkConditionalUnsupported(std::string_view why);
  void LogConditionalFallback(std::string_view why) const;
  Status DeleteBatch(const std::vector<std::string>& keys);
  // Sends plan's requests for items (UploadMany's sequence: creates, then
  // every request on config.concurrency threads, then completes, with
  // If-None-Match: * when if_none_match; any failure aborts the uploads
  // created).
  Status SendPlan(const std::vector<UploadItem>& items, const UploadPlan& plan,
                  const std::function<bool()>& cancelled, bool if_none_match);
  // Aborts upload_id of key, logging (not returning) a failure.
  void AbortQuietly(std::string_view key, std::string_view upload_id);

  // Const after construction.
  const S3Config config_;
  const std::shared_ptr<HttpTransport> transport_;
  const std::shared_ptr<RequestSigner> signer_;
  const RetryPolicy retry_;
  const std::string endpoint_;  // BucketEndpoint(config_)

  // Guarded by conditional_mu_ (held through the probe, so it runs once).
  Mutex conditional_mu_;
  std::optional<bool> conditional_supported_ GUARDED_BY(conditional_mu_);
};

}  // namespace tierckpt::s3
