#include "client/connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "os/files.h"
#include "wire/protocol.h"
#include "wire/unix_socket.h"

namespace tierckpt::client {
namespace {

// A one-connection fake agent: answers each request with respond(frame).
class FakeAgent {
 public:
  using Responder = std::function<bool(int sock, const wire::Frame& request)>;  // false: stop serving

  explicit FakeAgent(Responder respond) : respond_(std::move(respond)) {
    std::string tmpl = "/tmp/tc_conn_test_XXXXXX";
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/agent.sock";
    auto listener = wire::ListenUnix(path_);
    EXPECT_TRUE(listener.ok()) << listener.status().ToString();
    listener_ = std::move(listener).value();
    thread_ = std::thread([this] { Serve(); });
  }
  ~FakeAgent() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
    RemoveTree(dir_).IgnoreError();
  }
  const std::string& path() const { return path_; }

 private:
  void Serve() {
    int c = ::accept(listener_.get(), nullptr, nullptr);
    if (c < 0) return;
    UniqueFd conn(c);
    while (true) {
      auto frame = wire::RecvFrame(conn.get(), 5000);
      if (!frame.ok() || !respond_(conn.get(), *frame)) return;
    }
  }

  Responder respond_;
  std::string dir_, path_;
  UniqueFd listener_;
  std::thread thread_;
};

Status Answer(int sock, const wire::Frame& req, const Status& status, std::string_view body, uint32_t id_delta = 0,
              uint16_t type_override = 0) {
  uint16_t type = type_override != 0 ? type_override : static_cast<uint16_t>(req.header.type | wire::kResponseBit);
  return wire::SendFrame(sock, type, req.header.request_id + id_delta, wire::EncodeResponse(status, body));
}

TEST(ConnectionTest, RequestIdsIncreaseAndBodiesArrive) {
  std::vector<uint32_t> ids;
  FakeAgent agent([&](int sock, const wire::Frame& req) {
    ids.push_back(req.header.request_id);
    return Answer(sock, req, Status::Ok(), "body-" + req.payload).ok();
  });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  for (const char* p : {"a", "b", "c"}) {
    auto reply = (*conn)->Call(wire::MsgType::kStats, p);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
    EXPECT_EQ(reply->body, std::string("body-") + p);
    EXPECT_FALSE(reply->fd.valid());
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2, 3}));
}

TEST(ConnectionTest, AgentErrorsPassThroughAndKeepTheConnection) {
  int calls = 0;
  FakeAgent agent([&](int sock, const wire::Frame& req) {
    ++calls;
    Status s = calls == 1 ? NotFound("step job/3 is in no tier") : Status::Ok();
    return Answer(sock, req, s, "").ok();
  });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto first = (*conn)->Call(wire::MsgType::kShow, "");
  EXPECT_EQ(first.status().code(), Code::kNotFound);
  EXPECT_EQ(first.status().message(), "step job/3 is in no tier");
  EXPECT_TRUE((*conn)->Call(wire::MsgType::kShow, "").ok());
}

TEST(ConnectionTest, WrongResponseIdBreaksTheConnection) {
  FakeAgent agent([](int sock, const wire::Frame& req) { return Answer(sock, req, Status::Ok(), "", 7).ok(); });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto r = (*conn)->Call(wire::MsgType::kList, "");
  EXPECT_EQ(r.status().code(), Code::kProtocolError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("id 8"), std::string::npos) << r.status().message();
  auto later = (*conn)->Call(wire::MsgType::kList, "");
  EXPECT_EQ(later.status().code(), Code::kUnavailable);
  EXPECT_NE(later.status().message().find(agent.path()), std::string::npos) << later.status().message();
}

TEST(ConnectionTest, WrongResponseTypeBreaksTheConnection) {
  FakeAgent agent([](int sock, const wire::Frame& req) {
    return Answer(sock, req, Status::Ok(), "", 0, static_cast<uint16_t>(wire::MsgType::kStats) | wire::kResponseBit)
        .ok();
  });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  EXPECT_EQ((*conn)->Call(wire::MsgType::kList, "").status().code(), Code::kProtocolError);
  EXPECT_EQ((*conn)->Call(wire::MsgType::kList, "").status().code(), Code::kUnavailable);
}

TEST(ConnectionTest, PeerCloseIsUnavailable) {
  FakeAgent agent([](int, const wire::Frame&) { return false; });  // closes without answering
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto r = (*conn)->Call(wire::MsgType::kList, "");
  EXPECT_EQ(r.status().code(), Code::kUnavailable) << r.status().ToString();
  EXPECT_NE(r.status().message().find(agent.path()), std::string::npos);
}

TEST(ConnectionTest, NobodyListeningIsUnavailable) {
  auto conn = Connection::Open("/tmp/tc_conn_test_no_such_dir/agent.sock");
  EXPECT_EQ(conn.status().code(), Code::kUnavailable) << conn.status().ToString();
}

// ---- Refusals and timeouts (issue 16, item 11) ----

// Regression: the agent's refusal (an error frame with request id 0, e.g. at
// its connection limit) was reported as "response ... id 0; expected id 1".
TEST(ConnectionTest, RefusalWithRequestIdZeroIsReportedNotAMismatch) {
  FakeAgent agent([](int sock, const wire::Frame& req) {
    (void)wire::SendFrame(sock, static_cast<uint16_t>(req.header.type | wire::kResponseBit), 0,
                          wire::EncodeResponse(ResourceExhausted("it already serves 1024 connections, its limit"), ""));
    return false;
  });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto r = (*conn)->Call(wire::MsgType::kHello, "");
  EXPECT_EQ(r.status().code(), Code::kResourceExhausted) << r.status().ToString();
  EXPECT_NE(r.status().message().find("tierckptd at " + agent.path()), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("1024 connections"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("expected"), std::string::npos) << r.status().message();
}

// Regression: a request to an agent that never answered waited forever.
TEST(ConnectionTest, RequestTimesOutWhenTheAgentNeverAnswers) {
  FakeAgent agent([](int, const wire::Frame&) { return true; });  // reads, never answers
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto start = std::chrono::steady_clock::now();
  auto r = (*conn)->Call(wire::MsgType::kStats, "", 100);
  EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
  EXPECT_NE(r.status().message().find("100 ms"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST(ConnectionTest, OversizedRequestIsRefusedBeforeSending) {
  FakeAgent agent([](int sock, const wire::Frame& req) { return Answer(sock, req, Status::Ok(), "").ok(); });
  auto conn = Connection::Open(agent.path());
  ASSERT_TRUE(conn.ok());
  auto r = (*conn)->Call(wire::MsgType::kShow, std::string(wire::kMaxSmallRequestPayload + 1, 'x'));
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
  EXPECT_TRUE((*conn)->Call(wire::MsgType::kShow, "").ok());  // nothing was sent: still in step
}

// ---- Whom the client trusts (issue 16, item 9) ----

TEST(ConnectionTest, SocketDirectoryOthersMayWriteIsRefused) {
  FakeAgent agent([](int sock, const wire::Frame& req) { return Answer(sock, req, Status::Ok(), "").ok(); });
  const std::string dir = DirName(agent.path());
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto conn = Connection::Open(agent.path());
  ::chmod(dir.c_str(), 0700);
  EXPECT_EQ(conn.status().code(), Code::kPermissionDenied) << conn.status().ToString();
  EXPECT_NE(conn.status().message().find("refusing to talk to tierckptd at " + agent.path()), std::string::npos)
      << conn.status().message();
}

// Regression: the client talked to whatever listened on the socket path. A
// listener running as another uid (here: bound by us, then listening after
// dropping to uid 65534, which is what SO_PEERCRED reports) is refused, and
// the message names both uids.
TEST(ConnectionTest, AgentRunningAsAnotherUidIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a listener as another uid";
  std::string tmpl = "/tmp/tc_conn_test_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string path = tmpl + "/agent.sock";
  UniqueFd sock(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ASSERT_EQ(::bind(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  int ready[2];
  int done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    char c = 0;
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(2);
    if (::listen(sock.get(), 8) != 0) ::_exit(3);
    if (::write(ready[1], &c, 1) != 1) ::_exit(4);
    (void)!::read(done[0], &c, 1);  // until the parent is done
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  auto conn = Connection::Open(path);
  ASSERT_EQ(::write(done[1], &c, 1), 1);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) UniqueFd closer(fd);
  RemoveTree(tmpl).IgnoreError();
  EXPECT_EQ(conn.status().code(), Code::kPermissionDenied) << conn.status().ToString();
  EXPECT_NE(conn.status().message().find("runs as uid 65534"), std::string::npos) << conn.status().message();
  EXPECT_NE(conn.status().message().find("(uid 0)"), std::string::npos) << conn.status().message();
  // Told to expect that uid, the client accepts it.
}

}  // namespace
}  // namespace tierckpt::client
