// fake_s3.h — an in-memory S3 bucket behind the HttpTransport interface, for
// unit tests of the S3 client and the S3 ObjectStore (no server, no network).
// Test-only: library tc_testing_s3, linked by tests, never by tierckptd, the CLI or
// the Python extension.
//
// It implements the subset tierckpt uses, with S3's observable behaviour:
// PutObject (If-None-Match: *, x-amz-checksum-crc32c verified: BadDigest),
// GetObject (Range, 206/416), HeadObject, DeleteObject, DeleteObjects
// (Content-MD5 required, per-key errors injectable), ListObjectsV2 (prefix,
// delimiter, max-keys, continuation tokens, encoding-type=url), multipart
// (create, parts with CRC32C, complete with ETags checked, abort, list
// uploads). Both addressing styles are accepted. Requests are not
// authenticated.
//
// Faults: `SetInterceptor` sees every request first and may answer it (a 503,
// a transport error) instead of the bucket. Conditional writes can be
// enforced, ignored, or answered with 501 (ConditionalMode).
//
// Thread-safe: one mutex around the bucket.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "s3/http.h"

namespace tierckpt::s3 {

class FakeS3 final : public HttpTransport {
 public:
  enum class ConditionalMode { kEnforce, kIgnore, kNotImplemented };
  // Returns a response (or transport error) to short-circuit the request, or
  // nullopt to let the bucket answer. Called without the lock held.
  using Interceptor =
      std::function<std::optional<Result<HttpResponse>>(const HttpRequest&, std::string_view body)>;

  explicit FakeS3(std::string bucket) : bucket_(std::move(bucket)) {}

  Result<HttpResponse> Send(const HttpRequest& request, const SendOptions& options = {}) override;
  void ResetConnections() override;

  void SetInterceptor(Interceptor interceptor);
  void SetConditionalMode(ConditionalMode mode);
  // Keys DeleteObjects reports as <Error><Code>code</Code> (once each).
  void FailDeleteOnce(const std::string& key, const std::string& code);
  // Largest page ListObjectsV2 returns (S3: 1000).
  void SetMaxKeys(int max_keys);

  // Inspection.
  std::optional<std::string> Object(const std::string& key) const;
  void PutRaw(const std::string& key, std::string data);
  std::vector<std::string> Keys() const;
  size_t UploadsInProgress() const;
  int resets() const;
  // "METHOD op" for each request answered, in order (op: the query's first
  // name, or "object"/"bucket").
  std::vector<std::string> Log() const;

 private:
  struct Upload {
    std::string key;
    std::map<int, std::pair<std::string, std::string>> parts;  // number → (etag, data)
  };
  struct Parsed {
    std::string key;  // decoded; empty = bucket
    std::map<std::string, std::string> query;
  };

  Result<Parsed> Parse(const HttpRequest& request) const;
  HttpResponse Handle(const HttpRequest& request, const Parsed& p, std::string_view body) REQUIRES(mu_);
  HttpResponse Put(const HttpRequest& request, const Parsed& p, std::string_view body) REQUIRES(mu_);
  HttpResponse Get(const HttpRequest& request, const Parsed& p) REQUIRES(mu_);
  HttpResponse List(const Parsed& p) REQUIRES(mu_);
  HttpResponse DeleteMany(const HttpRequest& request, std::string_view body) REQUIRES(mu_);
  HttpResponse Complete(const HttpRequest& request, const Parsed& p, std::string_view body) REQUIRES(mu_);
  HttpResponse ListUploads(const Parsed& p) REQUIRES(mu_);

  // Const after construction.
  const std::string bucket_;

  // Guarded by mu_.
  mutable Mutex mu_;
  Interceptor interceptor_ GUARDED_BY(mu_);
  ConditionalMode conditional_ GUARDED_BY(mu_) = ConditionalMode::kEnforce;
  std::map<std::string, std::string> objects_ GUARDED_BY(mu_);
  std::map<std::string, Upload> uploads_ GUARDED_BY(mu_);  // by upload id
  std::map<std::string, std::string> delete_failures_ GUARDED_BY(mu_);
  int max_keys_ GUARDED_BY(mu_) = 1000;
  int next_upload_ GUARDED_BY(mu_) = 1;
  int resets_ GUARDED_BY(mu_) = 0;
  std::vector<std::string> log_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::s3
