// Issue 37 item 10 (slowloris): clients that send their requests slowly, or
// never finish them, must not keep others from being answered, and must be
// cut off. Before decision 81 each worker waited on one client with only a
// per-read timeout, so a byte every few seconds held it for good.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "ops/http_server.h"
#include "os/fd.h"
#include "peer/tcp_socket.h"

namespace tierckpt::agent {
namespace {

using std::chrono::milliseconds;

HttpServerOptions SmallServer() {
  HttpServerOptions o;
  o.flag = "--test-listen";
  o.threads = 1;  // one worker: a single held worker would starve every other client
  o.limits.header_timeout = milliseconds(1000);
  o.limits.grace = milliseconds(500);
  o.limits.min_bytes_per_s = 64 * 1024;
  o.limits.max_header_bytes = 4096;
  return o;
}

// A raw client socket to the server, with a receive timeout so a test never hangs.
UniqueFd Connect(const HttpServer& server) {
  Result<peer::HostPort> hp = peer::ParseHostPort(server.address());
  EXPECT_TRUE(hp.ok());
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(hp->port);
  ::inet_pton(AF_INET, hp->host.c_str(), &a.sin_addr);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

bool SendAll(int fd, std::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::send(fd, s.data(), s.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    s.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Everything the server sends until it closes (or 10 s pass without a byte).
std::string ReadToClose(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

class SlowClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.server().Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      SetTextResponse(res, 200, "hi");
    });
    server_.server().Post("/upload", [](const httplib::Request& req, httplib::Response& res) {
      SetTextResponse(res, 200, std::to_string(req.body.size()));
    });
    ASSERT_TRUE(server_.Start("127.0.0.1:0").ok());
  }

  // A client that answers within `timeout_s`, or fails: with the one worker
  // held by a slow client it would wait far longer.
  std::string Hello(int timeout_s = 3) {
    httplib::Client c("http://" + server_.address());
    c.set_connection_timeout(timeout_s, 0);
    c.set_read_timeout(timeout_s, 0);
    auto r = c.Get("/hello");
    return r ? std::to_string(r->status) + " " + r->body : "no answer: " + httplib::to_string(r.error());
  }

  HttpServer server_{SmallServer()};
};

TEST_F(SlowClientsTest, ClientsDrippingTheirHeadersHoldNoWorkerAndAreCutOff) {
  constexpr int kDrippers = 8;
  std::vector<UniqueFd> drippers;
  for (int i = 0; i < kDrippers; ++i) {
    drippers.push_back(Connect(server_));
    ASSERT_TRUE(SendAll(drippers.back().get(), "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  }
  std::atomic<bool> stop{false};
  std::thread drip([&] {  // a header byte from each, every 100 ms, until the server hangs up
    while (!stop) {
      for (auto& d : drippers) (void)::send(d.get(), "X", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Hello(), "200 hi\n") << "request " << i << " while the headers drip";
  // Each dripper is answered 408 once its header block is a second late, and closed.
  for (auto& d : drippers) {
    const std::string answer = ReadToClose(d.get());
    EXPECT_EQ(answer.rfind("HTTP/1.1 408 ", 0), 0u) << answer;
    EXPECT_NE(answer.find("--test-listen"), std::string::npos) << answer;
  }
  stop = true;
  drip.join();
  EXPECT_EQ(Hello(), "200 hi\n");
}

TEST_F(SlowClientsTest, ConnectionsThatSendNothingAreClosedAndStarveNobody) {
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 32; ++i) idle.push_back(Connect(server_));
  EXPECT_EQ(Hello(), "200 hi\n");
  for (auto& c : idle) EXPECT_EQ(ReadToClose(c.get()), "");  // closed, no answer owed
}

TEST_F(SlowClientsTest, ABodyDrippedSlowerThanTheFloorIsCutOffAndTheWorkerFreed) {
  UniqueFd slow = Connect(server_);
  ASSERT_TRUE(SendAll(slow.get(), "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\n\r\n"));
  std::atomic<bool> stop{false};
  std::thread drip([&] {
    while (!stop && ::send(slow.get(), "b", 1, MSG_NOSIGNAL) == 1) std::this_thread::sleep_for(milliseconds(50));
  });
  // The worker is free again after the grace (0.5 s) and what 20 bytes/s earn.
  EXPECT_EQ(Hello(), "200 hi\n");
  const std::string answer = ReadToClose(slow.get());
  EXPECT_EQ(answer.find("HTTP/1.1 200"), std::string::npos) << answer;  // never taken as whole
  stop = true;
  drip.join();
}

TEST_F(SlowClientsTest, ABodyAtAFairRateIsTakenWhole) {
  // 256 KiB in 64 KiB pieces, with pauses the bytes already sent pay for.
  UniqueFd c = Connect(server_);
  ASSERT_TRUE(SendAll(c.get(), "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 262144\r\n"
                                "Connection: close\r\n\r\n"));
  const std::string piece(64 * 1024, 'p');
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(SendAll(c.get(), piece));
    std::this_thread::sleep_for(milliseconds(300));
  }
  const std::string answer = ReadToClose(c.get());
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("\r\n\r\n262144\n"), std::string::npos) << answer;
}

TEST_F(SlowClientsTest, PipelinedAndKeptAliveRequestsAreAllAnswered) {
  UniqueFd c = Connect(server_);
  ASSERT_TRUE(SendAll(c.get(),
                      "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      "POST /upload HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc"
                      "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"));
  const std::string answers = ReadToClose(c.get());
  size_t oks = 0;
  for (size_t at = answers.find("HTTP/1.1 200"); at != std::string::npos; at = answers.find("HTTP/1.1 200", at + 1)) {
    ++oks;
  }
  EXPECT_EQ(oks, 3u) << answers;
  EXPECT_NE(answers.find("\r\n\r\n3\n"), std::string::npos) << answers;
  httplib::Client kept("http://" + server_.address());  // one connection, kept alive
  for (int i = 0; i < 5; ++i) {
    auto r = kept.Get("/hello");
    ASSERT_TRUE(r) << i;
    EXPECT_EQ(r->status, 200);
  }
}

TEST_F(SlowClientsTest, AHeaderBlockOverTheLimitIsAnswered431) {
  UniqueFd c = Connect(server_);
  ASSERT_TRUE(SendAll(c.get(), "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + std::string(8192, 'x')));
  const std::string answer = ReadToClose(c.get());
  EXPECT_EQ(answer.rfind("HTTP/1.1 431 ", 0), 0u) << answer;
  EXPECT_EQ(Hello(), "200 hi\n");
}

}  // namespace
}  // namespace tierckpt::agent
