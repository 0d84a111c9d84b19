// Regression tests for issue 16 item 10: unauthenticated denial of service on
// the peer port. 64-100 idle TCP connections that never sent more than a byte
// made every replication to the node fail (every handshake slot was held by a
// stranger), and a stranger trickling bytes held its slot far beyond the
// handshake deadline (each byte restarted the wait).
//
// Loopback only (127.0.0.1), bounded in seconds, and built to hold on a
// loaded 2-core machine: the bounds are generous multiples of what the
// listener needs, and nothing races a fixed sleep.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"
#include "peer/tcp_socket.h"

namespace tierckpt::peer {
namespace {

using testing_util::ClosedWithin;
using testing_util::FailureLog;
using testing_util::Options;
using testing_util::Since;
using Clock = std::chrono::steady_clock;

struct TcpServer {
  std::unique_ptr<TcpTransport> transport;
  std::unique_ptr<Listener> listener;
};

// A listener with the production limits (TransportOptions' defaults) unless
// the test changes them in `options`.
TcpServer StartTcpServer(TransportOptions options, FailureLog* failures) {
  options.on_handshake_failed = failures->Hook();
  TcpServer s;
  auto t = TcpTransport::Create(std::move(options));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return s;
  s.transport = std::move(*t);
  auto l = s.transport->Listen("127.0.0.1:0");
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  if (l.ok()) s.listener = std::move(*l);
  return s;
}

// The server's options with the production handshake limits and deadline.
TransportOptions ProductionServerOptions() {
  TransportOptions defaults;
  TransportOptions o = Options("node-s");
  o.handshake_timeout = defaults.handshake_timeout;
  o.max_pending_handshakes = defaults.max_pending_handshakes;
  return o;
}

// A real agent connects, is accepted and exchanges a frame, each within
// `bound`.
void ExpectPeerGetsThrough(Transport& client, Listener& listener, Millis bound, int attempt) {
  const auto start = Clock::now();
  auto c = client.Connect(listener.address(), bound);
  ASSERT_TRUE(c.ok()) << "attempt " << attempt << ": " << c.status().ToString();
  auto s = listener.Accept(bound);
  ASSERT_TRUE(s.ok()) << "attempt " << attempt << ": " << s.status().ToString();
  ASSERT_TRUE((*c)->Send(Frame{7, 1, "replicate"}).ok());
  auto m = (*s)->Receive(bound);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->frame.payload, "replicate");
  EXPECT_LT(Since(start), bound) << "attempt " << attempt;
}

TEST(PeerPortDosTest, HundredIdleStrangersDoNotLockAnAuthenticatedPeerOut) {
  FailureLog failures;
  TcpServer server = StartTcpServer(ProductionServerOptions(), &failures);
  ASSERT_NE(server.listener, nullptr);
  const std::string address = server.listener->address();

  // 100 strangers: half never send a byte, half send one and stall.
  std::vector<std::unique_ptr<ByteChannel>> strangers;
  for (int i = 0; i < 100; ++i) {
    auto ch = TcpDial(address, Millis(3000), SocketOptions{});
    ASSERT_TRUE(ch.ok()) << i << ": " << ch.status().ToString();
    if (i % 2 == 1) {
      ConstBuffer b{"T", 1};
      ASSERT_TRUE((*ch)->Write(std::span<const ConstBuffer>(&b, 1), Millis(2000)).ok());
    }
    strangers.push_back(std::move(*ch));
  }

  // Connections are accepted in order, so every stranger is in the listener
  // before the agent below: it must still get through, again and again,
  // long before any stranger's handshake deadline.
  auto client = TcpTransport::Create(Options("node-c"));
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  for (int attempt = 0; attempt < 5; ++attempt) {
    ExpectPeerGetsThrough(**client, *server.listener, Millis(2500), attempt);
  }
}

TEST(PeerPortDosTest, StrangersFromManyAddressesDoNotLockAnAuthenticatedPeerOut) {
  // The in-memory network gives every dialer its own address, so this is
  // the many-hosts attack (a botnet, or one host with many IPv6 addresses)
  // that a per-source limit alone does not stop.
  auto network = InMemoryNetwork::Create(64u << 10);
  FailureLog failures;
  TransportOptions so = ProductionServerOptions();
  so.on_handshake_failed = failures.Hook();
  auto server = InMemoryTransport::Create(network, so);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto listener = (*server)->Listen("node-s:0");
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();

  auto raw = InMemoryTransport::Create(network, Options("raw"));
  ASSERT_TRUE(raw.ok());
  std::vector<std::unique_ptr<ByteChannel>> strangers;
  for (int i = 0; i < 200; ++i) {
    auto ch = (*raw)->Dial((*listener)->address(), Millis(1000));
    ASSERT_TRUE(ch.ok()) << ch.status().ToString();
    strangers.push_back(std::move(*ch));
  }
  auto client = InMemoryTransport::Create(network, Options("node-c"));
  ASSERT_TRUE(client.ok());
  for (int attempt = 0; attempt < 5; ++attempt) {
    ExpectPeerGetsThrough(**client, **listener, Millis(2500), attempt);
  }
}

TEST(PeerPortDosTest, StrangerTricklingBytesIsDroppedAtTheHandshakeDeadline) {
  FailureLog failures;
  TransportOptions so = ProductionServerOptions();
  so.handshake_timeout = Millis(600);
  TcpServer server = StartTcpServer(so, &failures);
  ASSERT_NE(server.listener, nullptr);

  auto ch = TcpDial(server.listener->address(), Millis(3000), SocketOptions{});
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  ByteChannel* stranger = ch->get();
  // A well-formed Hello, one byte every 150 ms: each byte is progress, but
  // the whole would take seconds.
  PeerFrameHeader h;
  h.kind = FrameKind::kHello;
  std::string hello = HelloPayload{Role::kClient, 1, 1, "slowloris", std::string(kNonceSize, 'n')}.Encode();
  h.payload_len = static_cast<uint32_t>(hello.size());
  uint8_t head[kPeerFrameHeaderSize];
  EncodePeerHeader(h, head);
  const std::string frame = std::string(reinterpret_cast<char*>(head), sizeof(head)) + hello;

  const auto start = Clock::now();
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    for (char c : frame) {
      if (stop.load()) return;
      ConstBuffer b{&c, 1};
      if (!stranger->Write(std::span<const ConstBuffer>(&b, 1), Millis(1000)).ok()) return;
      std::this_thread::sleep_for(Millis(150));
    }
  });
  const bool closed = ClosedWithin(*stranger, Millis(2500));
  const Millis took = Since(start);
  stop = true;
  stranger->Shutdown();
  trickle.join();
  ASSERT_TRUE(closed) << "a stranger trickling one byte per 150 ms still held its handshake after " << took.count()
                      << " ms; the deadline is 600 ms";
  EXPECT_GE(took, Millis(550));
  EXPECT_LT(took, Millis(2000));
  auto failure = failures.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kTimeout) << failure->second.ToString();
  EXPECT_NE(failure->second.message().find("600 ms"), std::string::npos) << failure->second.message();
}

TEST(PeerPortDosTest, StrangerSendingOneByteIsDroppedAtTheHandshakeDeadline) {
  FailureLog failures;
  TransportOptions so = ProductionServerOptions();
  so.handshake_timeout = Millis(600);
  TcpServer server = StartTcpServer(so, &failures);
  ASSERT_NE(server.listener, nullptr);
  auto ch = TcpDial(server.listener->address(), Millis(3000), SocketOptions{});
  ASSERT_TRUE(ch.ok()) << ch.status().ToString();
  const auto start = Clock::now();
  ConstBuffer b{"T", 1};
  ASSERT_TRUE((*ch)->Write(std::span<const ConstBuffer>(&b, 1), Millis(1000)).ok());
  ASSERT_TRUE(ClosedWithin(**ch, Millis(3000)));
  const Millis took = Since(start);
  EXPECT_GE(took, Millis(550));
  EXPECT_LT(took, Millis(2000));
  auto failure = failures.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kTimeout) << failure->second.ToString();
}

}  // namespace
}  // namespace tierckpt::peer
