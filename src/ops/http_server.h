// http_server.h — the agent's one HTTP server, over cpp-httplib (Debian's
// libcpp-httplib-dev; docs/dependencies.md): the metrics endpoint
// (--metrics-listen, ops/metrics_server.h) and the checkpoint API
// (--http-listen, agent/http_api.h) are each an HttpServer with their routes.
//
// What it adds to the library, once for both:
//   * Start binds "HOST:PORT" (port 0 picks one; "[::1]:P" for IPv6) and names
//     the flag in its errors; address() is the bound address;
//   * an allow-list of client networks (AllowList below): a request from any
//     other address is answered 403 with the address and the flag to change,
//     before any route runs;
//   * requests a web page can make are refused before any route runs
//     (decision 73): one that carries Origin or Sec-Fetch-Site (a browser's
//     cross-site POST, a page's fetch) gets 403, and one whose Host names a
//     host other than an IP address, localhost, this machine's hostname or
//     HttpServerOptions::hosts gets 403 (a page on a rebound DNS name reaches
//     loopback with its own name as Host);
//   * a request with both Transfer-Encoding and Content-Length gets 400 (RFC
//     9112 6.1: the two disagree on where the body ends; smuggling), as does
//     any Transfer-Encoding but chunked (any case);
//   * a route that returns without setting a status answers 500 naming the
//     route, never the library's default 200 with an empty body;
//   * every error the library answers itself (no route, a bad request line,
//     a body over the limit) carries a one-line text body saying what failed;
//   * an exception escaping a route is a 500 naming it, never a dead thread.
//
//   * no thread waits on a client: a request reaches a worker only once its
//     whole header block has arrived (HeaderWait, http_header_wait.h), within
//     HttpLimits::header_timeout; once routed, the time a worker waits on its
//     client is bounded by the bytes the client moves (HttpConnectionStream,
//     http_connection.h). Slow clients cannot hold the workers (slowloris;
//     decision 81).
//
// Routes are registered on server() before Start; `threads` workers run
// them, one request per worker. The library's own accept loop is kept; its
// accepted sockets are handed to the HeaderWait.
//
// Thread-safe as the library is; Stop() (or the destructor) stops accepting,
// waits for the requests in progress and joins.
#pragma once

#include <httplib.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ops/http_connection.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// Client networks, as "10.0.0.0/8", "192.168.1.7", "::1", "fd00::/8"; an
// empty list allows every address.
class AllowList {
 public:
  // kInvalidArgument naming the entry and the expected form.
  static Result<AllowList> Parse(const std::vector<std::string>& entries);
  bool Allows(std::string_view address) const;  // as httplib's remote_addr
  bool empty() const { return nets_.empty(); }
  std::string ToString() const;  // the entries, comma-separated

 private:
  struct Net {
    std::array<uint8_t, 16> addr{};  // IPv4 as IPv4-mapped IPv6
    int prefix_bits = 0;             // of the 128
  };
  std::vector<Net> nets_;
  std::vector<std::string> entries_;
};

struct HttpServerOptions {
  std::string flag;  // the option that configures it, for messages ("--http-listen")
  AllowList allow;
  size_t threads = 4;
  size_t keep_alive_requests = 100;  // 1 = close after each answer
  HttpLimits limits;                 // what a slow client may cost (http_connection.h)
  size_t max_waiting = 256;          // connections waiting for their next request's headers
  uint64_t max_body_bytes = 1 << 20;
  std::string body_limit_hint;  // the 413's explanation ("" = generic)
  // Host header names accepted besides IP addresses, "localhost" and this
  // machine's hostname (case-insensitive, port ignored); "*" accepts any.
  std::vector<std::string> hosts;
  std::string hosts_flag;  // the option that adds to hosts, for messages
};

// A request refused before routing: the status to answer (400 for framing,
// 403 for a browser or a foreign Host) and why; status 0 = not refused.
struct Refusal {
  int status = 0;
  std::string why;
};
// The browser, Host and framing rules above. own_hostname: this machine's.
Refusal ScreenRequest(const httplib::Request& req, const HttpServerOptions& options,
                      std::string_view own_hostname);

class HeaderWait;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  httplib::Server& server();

  // Binds address and serves on a thread. Errors name the address and the flag.
  Status Start(const std::string& address);
  std::string address() const { return address_; }
  void Stop();

 private:
  class Library;  // httplib::Server, its accepted sockets handed to the HeaderWait

  // Runs one request of conn on a worker, then hands conn back to the wait or closes it.
  void Serve(std::unique_ptr<HttpConnection> conn);

  const HttpServerOptions options_;
  const std::string hostname_;  // this machine's, for ScreenRequest
  std::unique_ptr<Library> server_;
  std::unique_ptr<httplib::ThreadPool> workers_;  // from Start to Stop
  std::unique_ptr<HeaderWait> wait_;              // from Start to Stop
  std::string address_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};  // the accepting thread returned
  std::thread thread_;
};

// A text/plain body ending in a newline.
void SetTextResponse(httplib::Response& res, int status, std::string_view text);

}  // namespace tierckpt::agent
