// s3_client.cc — request execution (signing, retries), single-object writes
// and reads, conditional writes. Multipart is in s3_multipart.cc, listing and
// deletion in s3_listing.cc.
#include "s3/s3_client.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>

#include "common/log.h"
#include "os/parallel.h"
#include "s3/crc32c.h"
#include "s3/sigv4.h"

namespace tierckpt::s3 {
namespace {

RetryOptions WithAttempts(RetryOptions retry, int max_attempts) {
  retry.max_attempts = std::max(1, max_attempts);
  return retry;
}

std::string RandomHex() {
  std::random_device rd;
  const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

}  // namespace

S3Client::S3Client(S3Config config, std::shared_ptr<HttpTransport> transport,
                   std::shared_ptr<RequestSigner> signer, RetryOptions retry)
    : config_(std::move(config)),
      transport_(std::move(transport)),
      signer_(std::move(signer)),
      retry_(WithAttempts(std::move(retry), config_.max_attempts)),
      endpoint_(BucketEndpoint(config_)) {}

std::string S3Client::What(std::string_view op, std::optional<std::string_view> key) const {
  std::string out = std::string(op) + " s3://" + config_.bucket;
  if (key) out += "/" + std::string(*key);
  return out;
}

HttpRequest S3Client::BuildRequest(const Call& call, const std::string& payload_hash) const {
  HttpRequest r;
  r.method = call.method;
  r.endpoint = endpoint_;
  std::string path;
  if (config_.addressing == Addressing::kPath) path = "/" + config_.bucket;
  if (call.key) {
    path += "/" + UriEncode(*call.key, /*encode_slash=*/false);
  } else if (path.empty()) {
    path = "/";
  }
  r.path = std::move(path);
  r.query = call.query;
  r.headers = call.headers;
  r.headers.emplace_back("x-amz-content-sha256", payload_hash);
  r.body = call.body;
  r.body_size = call.body_size;
  return r;
}

Result<HttpResponse> S3Client::Execute(const Call& call, int* attempts) {
  const std::string payload_hash =
      config_.sign_payload
          ? Sha256Hex(call.body != nullptr ? call.body : "", call.body != nullptr ? call.body_size : 0)
          : std::string(kUnsignedPayload);
  const int max_attempts = retry_.max_attempts();
  for (int attempt = 1;; ++attempt) {
    if (attempts != nullptr) *attempts = attempt;
    HttpRequest request = BuildRequest(call, payload_hash);
    Status signed_ok = signer_->Sign(request, config_.bucket);
    if (!signed_ok.ok()) {
      return signed_ok.WithContext(What(call.op, call.key) + ": cannot sign the request");
    }
    Result<HttpResponse> response = transport_->Send(request, call.sink);
    AttemptError error;
    if (!response.ok()) {
      error = ErrorFromTransport(response.status());
    } else if (response->status / 100 == 2) {
      if (!call.error_in_200) return response;
      std::optional<S3ErrorBody> body = ParseErrorBody(response->body);
      if (!body) return response;
      error = ErrorFromResponse(*response);
    } else {
      error = ErrorFromResponse(*response);
    }
    if (!IsRetryable(error) || attempt >= max_attempts) {
      return FinalError(error, What(call.op, call.key), endpoint_, attempt);
    }
    if (WantsFreshConnection(error)) transport_->ResetConnections();
    Log(LogLevel::kDebug, "s3_retry")
        .Kv("op", call.op)
        .Kv("bucket", config_.bucket)
        .Kv("key", call.key.value_or(""))
        .Kv("attempt", attempt)
        .Kv("http_status", error.http_status)
        .Kv("code", error.http_status == 0 ? error.transport.message() : error.s3.code);
    retry_.Backoff(attempt);
  }
}

// ---- writes -----------------------------------------------------------------

Status S3Client::PutOnce(std::string_view key, const void* data, size_t size, bool if_none_match) {
  Call call;
  call.op = "PutObject";
  call.method = "PUT";
  call.key = key;
  call.body = data;
  call.body_size = size;
  call.headers.emplace_back("x-amz-checksum-crc32c", Crc32cBase64(Crc32c(data, size)));
  if (if_none_match) call.headers.emplace_back("if-none-match", "*");
  int attempts = 0;
  Result<HttpResponse> r = Execute(call, &attempts);
  if (r.ok()) return Status::Ok();
  if (r.status().code() != Code::kAlreadyExists || attempts <= 1) return r.status();
  // A 412 after a retry: perhaps our own earlier attempt landed. Read it back.
  auto existing = GetObject(key, size);
  if (existing.ok() && existing->size() == size &&
      (size == 0 || std::memcmp(existing->data(), data, size) == 0)) {
    return Status::Ok();
  }
  return r.status();
}

Status S3Client::PutObject(std::string_view key, const void* data, size_t size,
                           const PutOptions& options) {
  auto write = [&](bool conditional) { return PutOnce(key, data, size, conditional); };
  if (!options.if_none_match) return write(false);
  return WriteIfAbsent(key, write);
}

Status S3Client::Upload(std::string_view key, const void* data, size_t size,
                        const PutOptions& options) {
  auto write = [&](bool conditional) {
    if (size <= config_.multipart_threshold) return PutOnce(key, data, size, conditional);
    return MultipartOnce(key, data, size, conditional);
  };
  if (!options.if_none_match) return write(false);
  return WriteIfAbsent(key, write);
}

template <typename WriteFn>
Status S3Client::WriteIfAbsent(std::string_view key, const WriteFn& write) {
  TC_ASSIGN_OR_RETURN(bool supported, ConditionalWritesSupported());
  if (supported) {
    Status s = write(true);
    if (s.code() != Code::kUnimplemented || config_.conditional == ConditionalWrites::kOn) return s;
    MarkConditionalUnsupported("a conditional write to " + std::string(key) + " got 501 NotImplemented");
  }
  Result<ObjectInfo> head = HeadObject(key);
  if (head.ok()) {
    return AlreadyExists(What("PutObject", key) + " at " + endpoint_ +
                         ": the key already exists (checked with HEAD: this store does not "
                         "enforce If-None-Match); it was already committed, keep the existing one");
  }
  if (head.status().code() != Code::kNotFound) return head.status();
  return write(false);
}

void S3Client::MarkConditionalUnsupported(std::string_view why) {
  {
    MutexLock lock(&conditional_mu_);
    if (conditional_supported_ == false) return;  // warned already
    conditional_supported_ = false;
  }
  LogConditionalFallback(why);
}

void S3Client::LogConditionalFallback(std::string_view why) const {
  Log(LogLevel::kWarn, "s3_conditional_writes_unsupported")
      .Kv("store", Describe())
      .Kv("endpoint", endpoint_)
      .Kv("why", why)
      .Kv("fallback", "HEAD before PUT; two concurrent committers of one step could both win");
}

Result<bool> S3Client::ConditionalWritesSupported() {
  if (config_.conditional == ConditionalWrites::kOn) return true;
  if (config_.conditional == ConditionalWrites::kOff) return false;
  MutexLock lock(&conditional_mu_);
  if (conditional_supported_) return *conditional_supported_;
  const std::string key =
      (config_.prefix.empty() ? "" : config_.prefix + "/") + "_tierckpt_probe/" + RandomHex();
  constexpr std::string_view kBody = "tierckpt conditional-write probe";
  Status first = PutOnce(key, kBody.data(), kBody.size(), /*if_none_match=*/true);
  std::string why;
  if (first.code() == Code::kUnimplemented) {
    why = "If-None-Match: * got 501 NotImplemented";
  } else if (!first.ok() && first.code() != Code::kAlreadyExists) {
    return first.WithContext("probing whether " + endpoint_ + " enforces If-None-Match");
  } else {
    Status second = PutOnce(key, kBody.data(), kBody.size(), /*if_none_match=*/true);
    if (second.ok()) {
      why = "a second PUT of the probe key with If-None-Match: * succeeded instead of 412";
    } else if (second.code() == Code::kUnimplemented) {
      why = "If-None-Match: * got 501 NotImplemented";
    } else if (second.code() != Code::kAlreadyExists) {
      DeleteObject(key).IgnoreError();
      return second.WithContext("probing whether " + endpoint_ + " enforces If-None-Match");
    }
  }
  Status cleaned = DeleteObject(key);
  if (!cleaned.ok()) {
    Log(LogLevel::kWarn, "s3_probe_cleanup_failed").Kv("key", key).Err(cleaned);
  }
  conditional_supported_ = why.empty();
  lock.Unlock();
  // Logged once: the answer is cached for the client's lifetime.
  if (!why.empty()) LogConditionalFallback(why);
  return why.empty();
}

// ---- reads ------------------------------------------------------------------

Status S3Client::GetRange(std::string_view key, uint64_t offset, const ByteSink& dst, size_t size) {
  if (size == 0) return Status::Ok();
  if (offset > UINT64_MAX - size) {
    return Corruption(What("GetObject", key) + ": the range at offset " + std::to_string(offset) +
                      " of " + std::to_string(size) + " bytes lies past any object's end");
  }
  Call call;
  call.op = "GetObject";
  call.key = key;
  call.headers.emplace_back("range", "bytes=" + std::to_string(offset) + "-" +
                                         std::to_string(offset + size - 1));
  call.sink.sink = dst.mem;
  call.sink.sink_fd = dst.fd;
  call.sink.sink_fd_offset = dst.fd_offset;
  call.sink.sink_capacity = size;
  TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
  const bool whole_ok = r.status == 200 && offset == 0;  // a server that ignores Range
  if ((r.status != 206 && !whole_ok) || r.sink_bytes != size) {
    std::string total = "unknown";
    if (auto range = FindHeader(r.headers, "content-range")) {
      if (size_t slash = range->rfind('/'); slash != std::string_view::npos) {
        total = std::string(range->substr(slash + 1));
      }
    }
    return Corruption(What("GetObject", key) + " at " + endpoint_ + ": asked for " +
                      std::to_string(size) + " bytes at offset " + std::to_string(offset) +
                      ", got " + std::to_string(r.sink_bytes) + " (HTTP " +
                      std::to_string(r.status) + ", object size " + total +
                      "); the object is shorter than expected: truncated or replaced");
  }
  return Status::Ok();
}

Status S3Client::Download(std::string_view key, uint64_t offset, const ByteSink& dst, size_t size) {
  // One range per connection, each at least part_size: the same parallelism
  // as part_size ranges with fewer requests (each request costs the server a
  // lookup and the client a round trip).
  const size_t concurrency = static_cast<size_t>(std::max(1, config_.concurrency));
  const size_t chunk = std::max<size_t>({1, config_.part_size, (size + concurrency - 1) / concurrency});
  if (size <= chunk) return GetRange(key, offset, dst, size);
  const size_t count = (size + chunk - 1) / chunk;
  return ParallelFor(count, config_.concurrency, [&](size_t i) {
    const size_t start = i * chunk;
    const size_t len = std::min(chunk, size - start);
    return GetRange(key, offset + start, dst.Advance(start), len);
  });
}

Result<std::string> S3Client::GetObject(std::string_view key, size_t max_bytes, std::string* etag) {
  Call call;
  call.op = "GetObject";
  call.key = key;
  TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
  if (etag != nullptr) {
    auto header = FindHeader(r.headers, "etag");
    *etag = header ? std::string(*header) : std::string();
  }
  if (r.body.size() > max_bytes) {
    return ResourceExhausted(What("GetObject", key) + ": the object is " +
                             std::to_string(r.body.size()) + " bytes, more than the " +
                             std::to_string(max_bytes) + " expected");
  }
  return std::move(r.body);
}

Result<ObjectInfo> S3Client::HeadObject(std::string_view key) {
  Call call;
  call.op = "HeadObject";
  call.method = "HEAD";
  call.key = key;
  TC_ASSIGN_OR_RETURN(HttpResponse r, Execute(call));
  ObjectInfo info;
  auto length = FindHeader(r.headers, "content-length");
  if (!length) {
    return ProtocolError(What("HeadObject", key) + " at " + endpoint_ +
                         ": the response has no Content-Length");
  }
  const std::string text(*length);
  char* end = nullptr;
  info.size = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size()) {
    return ProtocolError(What("HeadObject", key) + " at " + endpoint_ +
                         ": bad Content-Length " + text);
  }
  if (auto etag = FindHeader(r.headers, "etag")) info.etag = *etag;
  return info;
}

}  // namespace tierckpt::s3
