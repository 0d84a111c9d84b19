// http_server.cc — see http_server.h.
#include "ops/http_server.h"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "common/log.h"
#include "ops/http_header_wait.h"
#include "os/process.h"
#include "peer/tcp_socket.h"

namespace tierckpt::agent {
namespace {

// addr as 16 bytes, IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d); false if neither.
bool ToV6(std::string_view text, std::array<uint8_t, 16>* out, bool* v4) {
  const std::string s(text);
  in_addr a4{};
  if (::inet_pton(AF_INET, s.c_str(), &a4) == 1) {
    out->fill(0);
    (*out)[10] = 0xff;
    (*out)[11] = 0xff;
    std::memcpy(out->data() + 12, &a4, 4);
    *v4 = true;
    return true;
  }
  in6_addr a6{};
  if (::inet_pton(AF_INET6, s.c_str(), &a6) == 1) {
    std::memcpy(out->data(), &a6, 16);
    *v4 = false;
    return true;
  }
  return false;
}

bool PrefixMatches(const std::array<uint8_t, 16>& a, const std::array<uint8_t, 16>& b, int bits) {
  int i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (a[i] != b[i]) return false;
  }
  if (bits == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits));
  return (a[i] & mask) == (b[i] & mask);
}

}  // namespace

Result<AllowList> AllowList::Parse(const std::vector<std::string>& entries) {
  AllowList list;
  for (const std::string& e : entries) {
    auto bad = [&](std::string_view why) {
      return InvalidArgument("allow-list entry \"" + e.substr(0, 100) + "\" " + std::string(why) +
                             "; give an address or a network, e.g. 127.0.0.1, 10.0.0.0/8, ::1 or fd00::/8");
    };
    const size_t slash = e.find('/');
    Net net;
    bool v4 = false;
    if (!ToV6(std::string_view(e).substr(0, slash), &net.addr, &v4)) return bad("is not an IP address");
    const int max_bits = v4 ? 32 : 128;
    int bits = max_bits;
    if (slash != std::string::npos) {
      const std::string len = e.substr(slash + 1);
      if (len.empty() || len.size() > 3 || len.find_first_not_of("0123456789") != std::string::npos) {
        return bad("has a prefix length that is not a number");
      }
      bits = std::stoi(len);
      if (bits > max_bits) return bad("has a prefix longer than the address");
    }
    net.prefix_bits = bits + (v4 ? 96 : 0);
    list.nets_.push_back(net);
    list.entries_.push_back(e);
  }
  return list;
}

bool AllowList::Allows(std::string_view address) const {
  if (nets_.empty()) return true;
  std::array<uint8_t, 16> a{};
  bool v4 = false;
  if (!ToV6(address, &a, &v4)) return false;
  for (const Net& n : nets_) {
    if (PrefixMatches(a, n.addr, n.prefix_bits)) return true;
  }
  return false;
}

std::string AllowList::ToString() const {
  std::string out;
  for (const std::string& e : entries_) out += (out.empty() ? "" : ",") + e;
  return out;
}

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The host of a Host header value: "[::1]:9200" → "::1", "a.b:80" → "a.b".
std::string HostOnly(std::string_view value) {
  if (!value.empty() && value.front() == '[') {
    const size_t close = value.find(']');
    return std::string(value.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  const size_t colon = value.find(':');
  return std::string(value.substr(0, colon));
}

bool IsIpAddress(const std::string& host) {
  std::array<uint8_t, 16> a{};
  bool v4 = false;
  return ToV6(host, &a, &v4);
}

}  // namespace

Refusal ScreenRequest(const httplib::Request& req, const HttpServerOptions& options,
                      std::string_view own_hostname) {
  if (req.has_header("Transfer-Encoding")) {
    const std::string te = Lower(req.get_header_value("Transfer-Encoding"));
    if (req.has_header("Content-Length")) {
      return {400, "the request has both Transfer-Encoding and Content-Length (RFC 9112 section 6.1); send one"};
    }
    if (te != "chunked") {
      return {400, "Transfer-Encoding \"" + te.substr(0, 64) + "\" is not supported; send Content-Length"};
    }
  }
  if (req.has_header("Origin") || req.has_header("Sec-Fetch-Site")) {
    return {403, "a request from a web page (it carries Origin or Sec-Fetch-Site) is refused: " + options.flag +
                     " serves programs, and a page in a local browser must not drive it"};
  }
  const std::string host = Lower(HostOnly(req.get_header_value("Host")));
  if (host.empty() || host == "localhost" || host == Lower(own_hostname) || IsIpAddress(host)) return {};
  for (const std::string& h : options.hosts) {
    if (h == "*" || Lower(h) == host) return {};
  }
  const std::string flag = options.hosts_flag.empty() ? "" : ", or a name given to " + options.hosts_flag;
  return {403, "Host \"" + host.substr(0, 253) + "\" is not a name of this agent (an IP address, localhost, " +
                   std::string(own_hostname) + flag +
                   "); a page on a rebound DNS name is refused this way. Reach the agent by address" +
                   (options.hosts_flag.empty() ? "" : ", or add the name with " + options.hosts_flag)};
}

void SetTextResponse(httplib::Response& res, int status, std::string_view text) {
  res.status = status;
  std::string body(text);
  if (body.empty() || body.back() != '\n') body += '\n';
  res.set_content(body, "text/plain; charset=utf-8");
}

// The library's server, with its accepted sockets handed to the HeaderWait
// (overriding its private virtual process_and_close_socket is the one hook it
// has for them) and its protected process_request run by our workers.
class HttpServer::Library final : public httplib::Server {
 public:
  explicit Library(HttpServer& owner) : owner_(owner) {}

  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed
  // in Debian's shared library): a burst of ranks connecting while its accept
  // thread waits for a core overflows it, and each dropped SYN costs its
  // client a 1 s retransmit. listen(2) again on the bound socket raises it.
  void RaiseBacklog() { ::listen(svr_sock_, SOMAXCONN); }

  // One request from stream; false when the connection is to be closed.
  bool Process(HttpConnectionStream& stream, const HttpConnection& c, bool close_connection,
               bool& connection_closed) {
    const std::function<void(httplib::Request&)> headers_read = [&stream](httplib::Request&) {
      stream.HeadersRead();
    };
    return ProcessRequest(*this, stream, c, close_connection, connection_closed, headers_read);
  }

 private:
  bool process_and_close_socket(socket_t sock) override {
    auto conn = std::make_unique<HttpConnection>(UniqueFd(sock));
    conn->requests_left = std::max<size_t>(owner_.options_.keep_alive_requests, 1);
    if (owner_.stopping_) return false;  // closed by conn
    owner_.wait_->Add(std::move(conn));
    return true;
  }

  // cpp-httplib 0.18 passes the addresses in; 0.11 (Debian 12) asks the stream.
  template <typename S>
  static bool ProcessRequest(S& s, httplib::Stream& stream, const HttpConnection& c, bool close_connection,
                             bool& connection_closed, const std::function<void(httplib::Request&)>& setup) {
    if constexpr (requires {
                    s.process_request(stream, c.remote_ip, c.remote_port, c.local_ip, c.local_port,
                                      close_connection, connection_closed, setup);
                  }) {
      return s.process_request(stream, c.remote_ip, c.remote_port, c.local_ip, c.local_port, close_connection,
                               connection_closed, setup);
    } else {
      return s.process_request(stream, close_connection, connection_closed, setup);
    }
  }

  HttpServer& owner_;
};

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)), hostname_(HostName()), server_(std::make_unique<Library>(*this)) {
  httplib::Server& server = *server_;
  // Its accept loop only hands sockets over: one thread.
  server.new_task_queue = [] { return new httplib::ThreadPool(1); };
  server.set_payload_max_length(options_.max_body_bytes);
  // The library's default adds SO_REUSEPORT, which lets a second agent bind
  // the same port and take half the requests: SO_REUSEADDR only.
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.allow.Allows(req.remote_addr)) {
      const Refusal refused = ScreenRequest(req, options_, hostname_);
      if (refused.status == 0) return httplib::Server::HandlerResponse::Unhandled;
      Log(LogLevel::kWarn, "http_refused")
          .Kv("flag", options_.flag)
          .Kv("client", req.remote_addr)
          .Kv("path", req.path)
          .Kv("why", refused.why);
      SetTextResponse(res, refused.status, refused.why);
      res.set_header("Connection", "close");  // the body's end is unknown: read no further request
      return httplib::Server::HandlerResponse::Handled;
    }
    Log(LogLevel::kWarn, "http_refused")
        .Kv("flag", options_.flag)
        .Kv("client", req.remote_addr)
        .Kv("path", req.path);
    SetTextResponse(res, 403,
                    "client address " + req.remote_addr + " is not in the allow-list of this endpoint (" +
                        options_.allow.ToString() +
                        "); the agent's operator adds its network to the allow-list of " + options_.flag);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors the library answers itself come with an empty body: say what failed.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    switch (res.status) {
      case 404:
        SetTextResponse(res, 404, "no resource at " + req.path);
        break;
      case 400:
        SetTextResponse(res, 400, "the request is not valid HTTP/1.1");
        break;
      case 413:
        SetTextResponse(res, 413,
                        "the request body is over this endpoint's limit of " +
                            std::to_string(options_.max_body_bytes) + " bytes" +
                            (options_.body_limit_hint.empty() ? "" : ": " + options_.body_limit_hint));
        break;
      default:
        break;
    }
  });
  server.set_exception_handler(
      [](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        Log(LogLevel::kError, "http_handler_exception").Kv("path", req.path).Kv("what", what);
        SetTextResponse(res, 500, "tierckptd failed on " + req.method + " " + req.path + ": " + what);
      });
}

HttpServer::~HttpServer() { Stop(); }

httplib::Server& HttpServer::server() { return *server_; }

void HttpServer::Serve(std::unique_ptr<HttpConnection> conn) {
  if (stopping_) return;  // closed by conn
  HttpConnectionStream stream(*conn, options_.limits);
  const bool last = conn->requests_left <= 1;
  bool closed = false;
  const bool ok = server_->Process(stream, *conn, last, closed);
  if (!ok || closed || last || stopping_) {
    ::shutdown(conn->fd.get(), SHUT_RDWR);
    return;
  }
  --conn->requests_left;
  conn->Compact();
  wait_->Add(std::move(conn));
}

Status HttpServer::Start(const std::string& address) {
  Result<peer::HostPort> hp = peer::ParseHostPort(address);
  if (!hp.ok()) return hp.status().WithContext(options_.flag);
  int port = hp->port;
  errno = 0;
  if (port == 0) {
    port = server_->bind_to_any_port(hp->host);
    if (port <= 0) port = -1;
  } else if (!server_->bind_to_port(hp->host, port)) {
    port = -1;
  }
  if (port < 0) {
    const int err = errno;
    const std::string why = err == EADDRINUSE ? "the port is taken by another process"
                            : err != 0        ? std::string(std::strerror(err))
                                       : "the host is not an address of this machine, or the port is taken";
    return Status(err == EADDRINUSE ? Code::kAlreadyExists : Code::kInvalidArgument,
                  "cannot listen on " + address + " (" + options_.flag + "): " + why +
                      "; choose another address or port");
  }
  address_ = peer::FormatHostPort(hp->host, static_cast<uint16_t>(port));
  server_->RaiseBacklog();
  workers_ = std::make_unique<httplib::ThreadPool>(std::max<size_t>(options_.threads, 1));
  wait_ = std::make_unique<HeaderWait>(options_.limits, options_.max_waiting, options_.flag,
                                       [this](std::unique_ptr<HttpConnection> conn) {
                                         auto* raw = conn.release();
                                         workers_->enqueue([this, raw] { Serve(std::unique_ptr<HttpConnection>(raw)); });
                                       });
  thread_ = std::thread([this] {
    server_->listen_after_bind();
    stopped_ = true;
  });
  // Stop() before the library marks itself running would not stop it.
  while (!server_->is_running() && !stopped_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return Status::Ok();
}

void HttpServer::Stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  server_->stop();  // no more accepts; the accept loop's hand-overs are done when it returns
  thread_.join();
  wait_->Stop();         // closes the connections waiting for a request
  workers_->shutdown();  // requests in progress finish; queued ones are closed (Serve)
}

}  // namespace tierckpt::agent
