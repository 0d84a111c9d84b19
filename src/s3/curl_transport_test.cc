// CurlTransport against a tiny HTTP/1.1 server on a loopback socket: bodies
// both ways without copies, keep-alive reuse, fresh connections after
// ResetConnections, the sink's capacity check, and transport errors.

#include "s3/curl_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "os/fd.h"

namespace tierckpt::s3 {
namespace {

struct SeenRequest {
  int connection = 0;
  std::string head;  // request line and headers
  std::string body;
};

// Answers each request with handler(request) (a whole raw HTTP response);
// an empty answer closes the connection without replying.
class TinyServer {
 public:
  using Handler = std::function<std::string(const SeenRequest&)>;

  explicit TinyServer(Handler handler) : handler_(std::move(handler)) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listener_.get(), 16), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~TinyServer() {
    stopping_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    acceptor_.join();
    std::lock_guard lock(mu_);
    for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
    for (std::thread& t : workers_) t.join();
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::string Endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  std::vector<SeenRequest> Seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      int fd = ::accept(listener_.get(), nullptr, nullptr);
      if (fd < 0) return;
      const int id = ++connections_;
      std::lock_guard lock(mu_);
      open_.push_back(fd);
      workers_.emplace_back([this, fd, id] { Serve(fd, id); });
    }
  }
  void Serve(int raw_fd, int id) {
    UniqueFd fd(raw_fd);
    std::string buffer;
    char chunk[65536];
    for (;;) {
      size_t end;
      while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
      }
      SeenRequest r;
      r.connection = id;
      r.head = buffer.substr(0, end + 2);
      buffer.erase(0, end + 4);
      size_t length = 0;
      if (size_t cl = Lower(r.head).find("content-length:"); cl != std::string::npos) {
        length = std::stoul(r.head.substr(cl + 15));
      }
      while (buffer.size() < length) {
        ssize_t n = ::recv(fd.get(), chunk, sizeof(chunk), 0);
        if (n <= 0) return;
        buffer.append(chunk, static_cast<size_t>(n));
      }
      r.body = buffer.substr(0, length);
      buffer.erase(0, length);
      {
        std::lock_guard lock(mu_);
        seen_.push_back(r);
      }
      const std::string answer = handler_(r);
      if (answer.empty()) return;
      if (::send(fd.get(), answer.data(), answer.size(), MSG_NOSIGNAL) < 0) return;
      if (answer.find("Connection: close") != std::string::npos) return;
    }
  }
  static std::string Lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }

  Handler handler_;
  UniqueFd listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> workers_;
  std::vector<SeenRequest> seen_;
};

std::string Http(int status, const std::string& body, const std::string& extra = "") {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nX-Amz-Request-Id: ABC\r\nETag: \"tag\"\r\n" + extra + "\r\n" + body;
}

std::shared_ptr<CurlTransport> Transport(CurlOptions o = {}) {
  auto t = CurlTransport::Create(o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return *t;
}

HttpRequest Request(const TinyServer& server, std::string method, std::string path) {
  HttpRequest r;
  r.method = std::move(method);
  r.endpoint = server.Endpoint();
  r.path = std::move(path);
  return r;
}

TEST(CurlTransportTest, GetReturnsStatusLowerCasedHeadersAndBody) {
  TinyServer server([](const SeenRequest&) { return Http(404, "<Error/>"); });
  auto t = Transport();
  HttpRequest r = Request(server, "GET", "/bkt/a%20b");
  r.query = {{"list-type", "2"}, {"prefix", "a/b"}};
  r.headers = {{"x-amz-date", "20240101T000000Z"}};
  auto resp = t->Send(r);
  ASSERT_TRUE(resp.ok()) << resp.status().ToString();
  EXPECT_EQ(resp->status, 404);
  EXPECT_EQ(resp->body, "<Error/>");
  EXPECT_EQ(FindHeader(resp->headers, "x-amz-request-id").value_or(""), "ABC");
  EXPECT_EQ(FindHeader(resp->headers, "etag").value_or(""), "\"tag\"");
  auto seen = server.Seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].head.substr(0, seen[0].head.find("\r\n")),
            "GET /bkt/a%20b?list-type=2&prefix=a%2Fb HTTP/1.1");
  EXPECT_NE(seen[0].head.find("x-amz-date: 20240101T000000Z"), std::string::npos);
}

TEST(CurlTransportTest, PutAndPostSendTheBorrowedBodyWithoutExpectContinue) {
  TinyServer server([](const SeenRequest&) { return Http(200, ""); });
  auto t = Transport();
  const std::string body(3 << 20, 'z');  // larger than curl's upload buffer
  HttpRequest put = Request(server, "PUT", "/bkt/k");
  put.body = body.data();
  put.body_size = body.size();
  put.headers = {{"x-amz-checksum-crc32c", "AAAAAA=="}, {"if-none-match", "*"}};
  ASSERT_EQ(t->Send(put)->status, 200);
  HttpRequest post = Request(server, "POST", "/bkt");
  post.query = {{"delete", ""}};
  const std::string xml = "<Delete/>";
  post.body = xml.data();
  post.body_size = xml.size();
  ASSERT_EQ(t->Send(post)->status, 200);
  HttpRequest del = Request(server, "DELETE", "/bkt/k");
  ASSERT_EQ(t->Send(del)->status, 200);
  auto seen = server.Seen();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].body, body);
  EXPECT_EQ(seen[0].head.find("Expect"), std::string::npos) << seen[0].head;
  EXPECT_NE(seen[0].head.find("if-none-match: *"), std::string::npos);
  EXPECT_EQ(seen[1].head.substr(0, 22), "POST /bkt?delete= HTTP");
  EXPECT_EQ(seen[1].body, xml);
  EXPECT_EQ(seen[1].head.find("Content-Type"), std::string::npos) << seen[1].head;
  EXPECT_EQ(seen[2].head.substr(0, 18), "DELETE /bkt/k HTTP");
}

TEST(CurlTransportTest, ConnectionsAreReusedUntilResetConnections) {
  TinyServer server([](const SeenRequest&) { return Http(200, "ok"); });
  auto t = Transport();
  for (int i = 0; i < 3; ++i) ASSERT_EQ(t->Send(Request(server, "GET", "/a"))->status, 200);
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(t->idle_handles(), 1u);
  t->ResetConnections();
  EXPECT_EQ(t->idle_handles(), 0u);
  ASSERT_EQ(t->Send(Request(server, "GET", "/a"))->status, 200);
  EXPECT_EQ(server.connections(), 2);
  // A server that closes after answering is handled: the next send reconnects.
  TinyServer closing([](const SeenRequest&) { return Http(200, "x", "Connection: close\r\n"); });
  ASSERT_EQ(t->Send(Request(closing, "GET", "/a"))->status, 200);
  ASSERT_EQ(t->Send(Request(closing, "GET", "/a"))->status, 200);
  EXPECT_EQ(closing.connections(), 2);
}

TEST(CurlTransportTest, SuccessBodiesGoIntoTheSinkAndOverflowIsCorruption) {
  TinyServer server([](const SeenRequest& r) {
    if (r.head.find("/err") != std::string::npos) return Http(404, "<Error>missing</Error>");
    if (r.head.find("/head") != std::string::npos) return Http(200, "12345");
    return Http(206, "0123456789");
  });
  auto t = Transport();
  std::string buf(10, '-');
  auto ok = t->Send(Request(server, "GET", "/k"), SendOptions{buf.data(), buf.size()});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->sink_bytes, 10u);
  EXPECT_EQ(ok->body, "");
  EXPECT_EQ(buf, "0123456789");
  auto err = t->Send(Request(server, "GET", "/err"), SendOptions{buf.data(), 3});
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->status, 404);
  EXPECT_EQ(err->body, "<Error>missing</Error>");  // error bodies never touch the sink
  auto over = t->Send(Request(server, "GET", "/k"), SendOptions{buf.data(), 9});
  EXPECT_EQ(over.status().code(), Code::kCorruption);
  EXPECT_NE(over.status().message().find("more than the 9 bytes"), std::string::npos);
  auto head = t->Send(Request(server, "HEAD", "/head"));
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(FindHeader(head->headers, "content-length").value_or(""), "5");
  EXPECT_EQ(head->body, "");
}

TEST(CurlTransportTest, SuccessBodiesGoIntoAFileDescriptorAtItsOffset) {
  TinyServer server([](const SeenRequest& r) {
    if (r.head.find("/err") != std::string::npos) return Http(404, "<Error>missing</Error>");
    return Http(206, "0123456789");
  });
  auto t = Transport();
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  const int fd = ::fileno(file);
  SendOptions at3;
  at3.sink_fd = fd;
  at3.sink_fd_offset = 3;
  at3.sink_capacity = 10;
  auto ok = t->Send(Request(server, "GET", "/k"), at3);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->sink_bytes, 10u);
  EXPECT_EQ(ok->body, "");
  std::string got(13, '\0');
  ASSERT_EQ(::pread(fd, got.data(), got.size(), 0), 13);
  EXPECT_EQ(got, std::string(3, '\0') + "0123456789");
  auto err = t->Send(Request(server, "GET", "/err"), at3);  // error bodies never touch the file
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(err->body, "<Error>missing</Error>");
  SendOptions small = at3;
  small.sink_capacity = 9;
  auto over = t->Send(Request(server, "GET", "/k"), small);
  EXPECT_EQ(over.status().code(), Code::kCorruption);
  SendOptions closed;  // a descriptor that cannot be written: kIoError naming it
  closed.sink_fd = ::open("/dev/null", O_RDONLY);
  closed.sink_capacity = 10;
  auto bad = t->Send(Request(server, "GET", "/k"), closed);
  EXPECT_EQ(bad.status().code(), Code::kIoError) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("file descriptor " + std::to_string(closed.sink_fd)), std::string::npos)
      << bad.status().message();
  ::close(closed.sink_fd);
  std::fclose(file);
}

TEST(CurlTransportTest, RefusedAndDroppedConnectionsAreUnavailableNamingMethodAndUrl) {
  int port = 0;
  {
    TinyServer gone([](const SeenRequest&) { return std::string(); });
    port = std::stoi(gone.Endpoint().substr(gone.Endpoint().rfind(':') + 1));
    auto t = Transport();
    auto dropped = t->Send(Request(gone, "PUT", "/bkt/k"));
    EXPECT_EQ(dropped.status().code(), Code::kUnavailable) << dropped.status().ToString();
    EXPECT_NE(dropped.status().message().find("PUT " + gone.Url("/bkt/k")), std::string::npos)
        << dropped.status().message();
  }
  auto t = Transport(CurlOptions{500, 1024, 30, 4});
  HttpRequest r;
  r.endpoint = "http://127.0.0.1:" + std::to_string(port);
  r.path = "/x";
  auto refused = t->Send(r);
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);
  EXPECT_NE(refused.status().message().find("GET http://127.0.0.1:" + std::to_string(port) + "/x: "),
            std::string::npos) << refused.status().message();
}

TEST(CurlTransportTest, AStalledTransferIsAbortedAsTimeout) {
  TinyServer stall([](const SeenRequest&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    return std::string("HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx");
  });
  CurlOptions o;
  o.low_speed_bytes_per_s = 1000;
  o.low_speed_time_s = 1;
  auto t = Transport(o);
  auto r = t->Send(Request(stall, "GET", "/slow"));
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
  EXPECT_NE(r.status().message().find("low-speed abort"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::s3
