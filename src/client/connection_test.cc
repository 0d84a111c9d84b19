#include "client/connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
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

}  // namespace
}  // namespace tierckpt::client
