// The listener's bounds on strangers (handshaking_listener.h): which pending
// handshake makes room for a newcomer, per source and in total; that
// authenticated connections count against neither; and that rejections are
// logged within a budget. The denial-of-service regressions themselves are
// in peer_port_dos_test.cc. Loopback only, bounded in seconds.

#include "peer/handshaking_listener.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/log.h"
#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"
#include "peer/tcp_socket.h"
#include "testing/temp_dir.h"

namespace tierckpt::peer {
namespace {

using testing_util::ClosedWithin;
using testing_util::FailureLog;
using testing_util::MessageHas;
using testing_util::Options;

size_t CountOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

struct Tcp {
  std::unique_ptr<TcpTransport> transport;
  std::unique_ptr<Listener> listener;

  static Tcp Start(TransportOptions options, FailureLog* failures) {
    options.on_handshake_failed = failures->Hook();
    Tcp s;
    auto t = TcpTransport::Create(std::move(options));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    if (!t.ok()) return s;
    s.transport = std::move(*t);
    auto l = s.transport->Listen("127.0.0.1:0");
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) s.listener = std::move(*l);
    return s;
  }

  std::vector<std::unique_ptr<ByteChannel>> Strangers(int n) {
    std::vector<std::unique_ptr<ByteChannel>> out;
    for (int i = 0; i < n; ++i) {
      auto ch = TcpDial(listener->address(), Millis(3000), SocketOptions{});
      EXPECT_TRUE(ch.ok()) << ch.status().ToString();
      if (ch.ok()) out.push_back(std::move(*ch));
    }
    return out;
  }
};

TEST(HandshakingListenerTest, OneSourceOnlyDisplacesItsOwnOldestHandshakes) {
  FailureLog failures;
  TransportOptions o = Options("node-s");
  o.handshake_timeout = Millis(20000);  // nothing here waits for the deadline
  o.max_pending_handshakes_per_source = 4;
  Tcp server = Tcp::Start(o, &failures);
  ASSERT_NE(server.listener, nullptr);
  std::vector<std::unique_ptr<ByteChannel>> strangers = server.Strangers(10);
  ASSERT_EQ(strangers.size(), 10u);
  for (size_t n = 1; n <= 6; ++n) {
    auto f = failures.Wait(n);
    ASSERT_TRUE(f.has_value()) << "eviction " << n;
    EXPECT_EQ(f->second.code(), Code::kResourceExhausted) << f->second.ToString();
    EXPECT_TRUE(MessageHas(f->second, "from 127.0.0.1")) << f->second.message();
    EXPECT_TRUE(MessageHas(f->second, "max_pending_handshakes_per_source")) << f->second.message();
    EXPECT_TRUE(MessageHas(f->second, f->first)) << f->second.message();  // names the dropped peer
  }
  for (size_t i = 0; i < 6; ++i) EXPECT_TRUE(ClosedWithin(*strangers[i], Millis(3000))) << "stranger " << i;
  for (size_t i = 6; i < 10; ++i) EXPECT_FALSE(ClosedWithin(*strangers[i], Millis(100))) << "stranger " << i;

  // An agent on the same host still gets in; it displaces the oldest left.
  auto client = TcpTransport::Create(Options("node-c"));
  ASSERT_TRUE(client.ok());
  auto c = (*client)->Connect(server.listener->address(), Millis(3000));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(server.listener->Accept(Millis(3000)).ok());
  EXPECT_TRUE(ClosedWithin(*strangers[6], Millis(3000)));
  EXPECT_FALSE(ClosedWithin(*strangers[7], Millis(50)));
}

TEST(HandshakingListenerTest, TheOldestHandshakeMakesRoomWhenEverySlotIsTaken) {
  auto network = InMemoryNetwork::Create(64u << 10);  // every dialer has its own address
  FailureLog failures;
  TransportOptions o = Options("node-s");
  o.handshake_timeout = Millis(20000);
  o.max_pending_handshakes = 4;
  o.on_handshake_failed = failures.Hook();
  auto server = InMemoryTransport::Create(network, o);
  ASSERT_TRUE(server.ok());
  auto listener = (*server)->Listen("node-s:0");
  ASSERT_TRUE(listener.ok());
  std::vector<std::unique_ptr<ByteChannel>> strangers;
  for (int i = 0; i < 7; ++i) {
    auto ch = network->Dial((*listener)->address());
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    strangers.push_back(std::move(*ch));
  }
  std::set<std::string> dropped;  // each dropped handshake reports from its own thread: any order
  for (size_t n = 1; n <= 3; ++n) {
    auto f = failures.Wait(n);
    ASSERT_TRUE(f.has_value()) << "eviction " << n;
    EXPECT_EQ(f->second.code(), Code::kResourceExhausted) << f->second.ToString();
    EXPECT_TRUE(MessageHas(f->second, "(max_pending_handshakes)")) << f->second.message();
    dropped.insert(f->first);
  }
  EXPECT_EQ(dropped, (std::set<std::string>{"mem:client-1", "mem:client-2", "mem:client-3"}))
      << "the oldest go first";
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(ClosedWithin(*strangers[i], Millis(3000))) << "stranger " << i;
  for (size_t i = 3; i < 7; ++i) EXPECT_FALSE(ClosedWithin(*strangers[i], Millis(100))) << "stranger " << i;
}

TEST(HandshakingListenerTest, AuthenticatedConnectionsDoNotCountAgainstTheHandshakeLimits) {
  FailureLog failures;
  TransportOptions o = Options("node-s");
  o.max_pending_handshakes = 1;
  o.max_pending_handshakes_per_source = 1;
  Tcp server = Tcp::Start(o, &failures);
  ASSERT_NE(server.listener, nullptr);
  auto client = TcpTransport::Create(Options("node-c"));
  ASSERT_TRUE(client.ok());
  std::vector<std::unique_ptr<Connection>> held;  // every one stays open
  for (int i = 0; i < 6; ++i) {
    auto c = (*client)->Connect(server.listener->address(), Millis(3000));
    ASSERT_TRUE(c.ok()) << i << ": " << c.status().ToString();
    auto s = server.listener->Accept(Millis(3000));
    ASSERT_TRUE(s.ok()) << i << ": " << s.status().ToString();
    held.push_back(std::move(*c));
    held.push_back(std::move(*s));
  }
  EXPECT_EQ(failures.size(), 0u);
}

TEST(HandshakingListenerTest, RejectionsAreLoggedWithinABudget) {
  tierckpt::testing_util::TempDir dir("tc_peer_budget");
  const std::string log_path = dir.Sub("log");
  ASSERT_TRUE(SetLogFile(log_path).ok());
  FailureLog failures;
  TransportOptions o = Options("node-s");
  o.handshake_timeout = Millis(20000);
  o.max_pending_handshakes_per_source = 1;
  Tcp server = Tcp::Start(o, &failures);
  ASSERT_NE(server.listener, nullptr);
  std::vector<std::unique_ptr<ByteChannel>> strangers = server.Strangers(40);
  ASSERT_TRUE(failures.Wait(39).has_value()) << failures.size();  // the hook sees every one
  server.listener->Close();  // reports what the budget suppressed
  ASSERT_TRUE(SetLogFile("").ok());
  std::stringstream log;
  log << std::ifstream(log_path).rdbuf();
  EXPECT_EQ(CountOf(log.str(), "event=peer_handshake_failed"), kRejectLogBurst) << log.str();
  EXPECT_EQ(CountOf(log.str(), "event=peer_rejections_suppressed"), 1u) << log.str();
  EXPECT_NE(log.str().find("count=" + std::to_string(39 - kRejectLogBurst)), std::string::npos) << log.str();
}

}  // namespace
}  // namespace tierckpt::peer
