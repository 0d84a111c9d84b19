// http.h — one HTTP exchange, and the transport that carries it.
//
// The S3 client, the credential providers and S3 Express sessions all speak
// HTTP through HttpTransport, so each has three implementations to run
// against (style.md): CurlTransport (libcurl, the real one), FakeTransport
// (testing/fake_transport.h: scripted responses, unit tests) and the fault-injecting proxy the
// integration tests put in front of a real S3 server.
//
// Bodies are borrowed, never copied: a request's body points at the caller's
// bytes (a shared-memory object being uploaded), and a response may be
// written straight into a caller's buffer (a ranged GET into the memory tier).
//
// Errors: Send returns a Status only when no HTTP response arrived
// (connection refused or reset, DNS, timeout, low-speed abort: kUnavailable or
// kTimeout, the message naming method, host and path, and curl's reason). Any
// response, 4xx and 5xx included, is a value: interpreting it is the caller's
// job (s3_errors.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

// Header names are stored lower-case; values verbatim.
using Headers = std::vector<std::pair<std::string, std::string>>;

// The value of header `name` (lower-case), if present.
std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name);

struct HttpRequest {
  std::string method = "GET";  // GET, PUT, POST, HEAD, DELETE
  // Where to: "http://127.0.0.1:9000" or "https://bucket.s3.us-east-1.amazonaws.com".
  std::string endpoint;
  // The path exactly as it goes on the wire, already URI-encoded ("/bucket/a%20b").
  std::string path = "/";
  // Query parameters, not encoded; the signer and the transport encode them
  // (sigv4.h UriEncode) in sorted order.
  std::vector<std::pair<std::string, std::string>> query;
  Headers headers;  // lower-case names; the signer adds its own
  const void* body = nullptr;  // borrowed; must outlive Send
  size_t body_size = 0;
};

struct HttpResponse {
  int status = 0;
  Headers headers;  // lower-case names
  std::string body;  // unless the request wrote into a sink
  // Bytes written into the sink (SendOptions::sink) when one was given.
  size_t sink_bytes = 0;
};

struct SendOptions {
  // If set, a 2xx response body goes here instead of HttpResponse::body
  // (error bodies still land in HttpResponse::body). More than sink_capacity
  // bytes is an error (kCorruption: the server sent more than asked for).
  void* sink = nullptr;
  size_t sink_capacity = 0;
  // Or, with sink null and sink_fd >= 0: a 2xx body is written with pwrite(2)
  // to sink_fd at sink_fd_offset onwards (sink_capacity bytes at most, same
  // rule). The descriptor is borrowed. Writing into a fresh tmpfs file this
  // way costs the kernel about half of what populating a mapping of it and
  // copying into that does (no page zeroing; docs/benchmarks.md). A failed
  // write is kIo naming the descriptor's offset and errno.
  int sink_fd = -1;
  uint64_t sink_fd_offset = 0;
};

// For transports that hold a whole response body in memory (the fakes): moves
// a 2xx body into options' sink (memory or descriptor) and sets sink_bytes;
// other responses, and requests without a sink, are left alone. kCorruption
// when the body exceeds sink_capacity, kIoError when the write fails; `who`
// names the transport in the message.
Status DeliverToSink(const SendOptions& options, HttpResponse* response, std::string_view who);

// RFC 3986 encoding as SigV4 wants it: unreserved characters (A-Z a-z 0-9
// - _ . ~) kept, everything else %XX upper-case; '/' kept unless encode_slash.
std::string UriEncode(std::string_view s, bool encode_slash);

// Decodes %XX escapes; with plus_is_space, '+' becomes ' ' (form encoding,
// which S3's encoding-type=url listings use). nullopt for a '%' not followed
// by two hex digits: the caller says where.
std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space = false);

// ASCII lower case (header names, schemes, host names, config keys).
std::string AsciiLower(std::string_view s);

// The query string: parameters sorted by encoded name then value, each
// "name=value" encoded with encode_slash, joined by '&' ("uploads=" for a
// valueless one). The same string the SigV4 canonical request uses.
std::string CanonicalQuery(const HttpRequest& request);

// The full URL of a request: endpoint + path + "?" + encoded, sorted query.
std::string RequestUrl(const HttpRequest& request);

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  // Sends one request and waits for its whole response. Thread-safe: many
  // threads send at once (parallel multipart parts, ranged GETs).
  virtual Result<HttpResponse> Send(const HttpRequest& request, const SendOptions& options = {}) = 0;
  // Drops pooled connections, so the next Send opens a fresh one (after a
  // reset or a 5xx, as the retry rules ask).
  virtual void ResetConnections() {}
};

}  // namespace tierckpt::s3
