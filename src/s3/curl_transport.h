// curl_transport.h — the real HttpTransport, on libcurl's easy interface.
//
// Connections: easy handles are pooled; a Send borrows one (or makes one) and
// returns it, so its keep-alive connection serves the next request. Handles
// share a DNS cache and TLS session cache (CURLSH). ResetConnections() drops
// every pooled handle and marks those in flight as stale (dropped when they
// come back), so every later Send opens a fresh connection.
//
// Each request: HTTP/1.1, no signals (CURLOPT_NOSIGNAL), no "Expect:
// 100-continue", no redirects, CURLOPT_PATH_AS_IS (the path is sent as
// encoded), TCP keep-alive, a connect timeout and a low-speed abort
// (CurlOptions). Upload bodies are read straight from the request's borrowed
// buffer (READFUNCTION, no copy) and downloads written straight into
// SendOptions::sink (WRITEFUNCTION, no copy) when the response is 2xx, with
// the capacity check; other bodies land in HttpResponse::body. Response
// header names are lower-cased.
//
// Errors (no response arrived): kTimeout for timeouts and low-speed aborts,
// kCorruption when a 2xx body overflows the sink, kUnavailable otherwise;
// each message names the method, the URL and curl's error text.
//
// Thread safety: Send and ResetConnections may be called from many threads.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "s3/http.h"
#include "s3/s3_config.h"

namespace tierckpt::s3 {

struct CurlOptions {
  long connect_timeout_ms = 5000;
  long low_speed_bytes_per_s = 1024;  // abort a transfer slower than this...
  long low_speed_time_s = 30;         // ...for this long (0 = never)
  size_t max_idle_handles = 64;       // pooled handles (and their connections) kept
  // The options of an S3 config (timeouts, low-speed abort).
  static CurlOptions From(const S3Config& config);
};

// Move-only owner of a CURL easy handle.
class CurlEasy {
 public:
  CurlEasy() = default;
  explicit CurlEasy(CURL* handle) : handle_(handle) {}
  ~CurlEasy() { Reset(); }
  CurlEasy(CurlEasy&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }
  CurlEasy& operator=(CurlEasy&& other) noexcept;
  CurlEasy(const CurlEasy&) = delete;
  CurlEasy& operator=(const CurlEasy&) = delete;

  CURL* get() const { return handle_; }
  explicit operator bool() const { return handle_ != nullptr; }
  void Reset();

 private:
  CURL* handle_ = nullptr;
};

class CurlTransport final : public HttpTransport {
 public:
  // Initializes libcurl once per process (curl_global_init) and the share
  // handle. kInternal if libcurl cannot be initialized.
  static Result<std::shared_ptr<CurlTransport>> Create(CurlOptions options = {});
  ~CurlTransport() override;

  Result<HttpResponse> Send(const HttpRequest& request, const SendOptions& options = {}) override;
  void ResetConnections() override;

  // Handles idle in the pool now (tests).
  size_t idle_handles() const;

 private:
  struct Share;
  struct Pooled {
    CurlEasy easy;
    uint64_t generation = 0;
  };

  CurlTransport(CurlOptions options, std::unique_ptr<Share> share);
  Result<Pooled> Borrow();
  void Return(Pooled pooled);

  // Const after construction.
  const CurlOptions options_;
  const std::unique_ptr<Share> share_;

  // Guarded by mu_.
  mutable Mutex mu_;
  std::vector<Pooled> idle_ GUARDED_BY(mu_);
  uint64_t generation_ GUARDED_BY(mu_) = 0;  // bumped by ResetConnections
};

}  // namespace tierckpt::s3
