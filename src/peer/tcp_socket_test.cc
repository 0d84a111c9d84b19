// TCP specifics: address syntax, ephemeral ports, IPv6, refused connects and
// socket buffer tuning. What every transport shares is in the conformance
// suites.

#include "peer/tcp_socket.h"

#include <gtest/gtest.h>

#include <thread>

#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"

namespace tierckpt::peer {
namespace {

using testing_util::Options;
using testing_util::SharedBuffer;

TEST(TcpSocketTest, ParsesHostPortForms) {
  auto v4 = ParseHostPort("10.0.0.2:7100");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "10.0.0.2");
  EXPECT_EQ(v4->port, 7100);
  auto v6 = ParseHostPort("[fe80::1%eth0]:0");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "fe80::1%eth0");
  EXPECT_EQ(v6->port, 0);
  auto name = ParseHostPort("node-3.cluster:65535");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->host, "node-3.cluster");
  for (const char* bad : {"", "host", ":7100", "host:", "host:70000", "host:12a", "::1:7100", "[::1]7100",
                          "[::1", "host:123456"}) {
    auto r = ParseHostPort(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("host:port"), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(FormatHostPort("::1", 5), "[::1]:5");
  EXPECT_EQ(FormatHostPort("1.2.3.4", 5), "1.2.3.4:5");
}

TEST(TcpSocketTest, PeerSourceGroupsConnectionsByHost) {
  EXPECT_EQ(PeerSource("10.0.0.7:41234"), "10.0.0.7");
  EXPECT_EQ(PeerSource("127.0.0.1:1"), PeerSource("127.0.0.1:2"));
  EXPECT_EQ(PeerSource("[::ffff:10.0.0.7]:41234"), "10.0.0.7");  // IPv4 through a [::] listener
  EXPECT_EQ(PeerSource("[2001:db8:1:2:3:4:5:6]:9"), "2001:db8:1:2::/64");
  EXPECT_EQ(PeerSource("[2001:db8:1:2::ffff]:9"), PeerSource("[2001:db8:1:2:aaaa::1]:10"));  // one /64
  EXPECT_NE(PeerSource("[2001:db8:1:2::1]:9"), PeerSource("[2001:db8:1:3::1]:9"));
  EXPECT_EQ(PeerSource("[fe80::1%eth0]:9"), "fe80::/64");
  EXPECT_EQ(PeerSource("node-3:7100"), "node-3");
  EXPECT_EQ(PeerSource("mem:client-3"), "mem:client-3");  // not host:port: its own source
  EXPECT_NE(PeerSource("mem:client-3"), PeerSource("mem:client-4"));
}

TEST(TcpSocketTest, PortZeroBindsAnEphemeralPortAndTakenPortsAreReported) {
  auto a = TcpBind("127.0.0.1:0", {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  auto hp = ParseHostPort((*a)->address());
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "127.0.0.1");
  EXPECT_NE(hp->port, 0);
  auto again = TcpBind((*a)->address(), {});
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists);
  EXPECT_NE(again.status().message().find((*a)->address()), std::string::npos);
}

TEST(TcpSocketTest, RefusedConnectSaysWhatToCheck) {
  std::string address;
  {
    auto a = TcpBind("127.0.0.1:0", {});
    ASSERT_TRUE(a.ok());
    address = (*a)->address();
  }  // closed: nothing listens there now
  auto c = TcpDial(address, Millis(2000), {});
  EXPECT_EQ(c.status().code(), Code::kUnavailable) << c.status().ToString();
  EXPECT_NE(c.status().message().find(address), std::string::npos);
  EXPECT_NE(c.status().message().find("is the peer agent running"), std::string::npos);
  EXPECT_EQ(TcpDial("no-such-host.invalid:1", Millis(2000), {}).status().code(), Code::kUnavailable);
}

TEST(TcpSocketTest, AcceptorShutdownWakesAccept) {
  auto a = TcpBind("127.0.0.1:0", {});
  ASSERT_TRUE(a.ok());
  Status s;
  std::thread t([&] { s = (*a)->Accept().status(); });
  (*a)->Shutdown();
  t.join();
  EXPECT_EQ(s.code(), Code::kAborted);
}

TEST(TcpSocketTest, Ipv6LoopbackRoundTrip) {
  auto probe = TcpBind("[::1]:0", {});
  if (!probe.ok()) GTEST_SKIP() << "no IPv6 loopback on this machine: " << probe.status().ToString();
  probe->reset();
  auto server = TcpTransport::Create(Options("node-s"));
  auto client = TcpTransport::Create(Options("node-c"));
  ASSERT_TRUE(server.ok() && client.ok());
  auto listener = (*server)->Listen("[::1]:0");
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_EQ((*listener)->address().rfind("[::1]:", 0), 0u) << (*listener)->address();
  auto c = (*client)->Connect((*listener)->address(), Millis(3000));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*listener)->Accept(Millis(3000));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->peer().address.rfind("[::1]:", 0), 0u) << (*s)->peer().address;
  ASSERT_TRUE((*c)->Send(Frame{1, 2, "over v6"}).ok());
  auto m = (*s)->Receive(Millis(3000));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->frame.payload, "over v6");
}

TEST(TcpSocketTest, TunedBuffersAndLargeChunksStillStreamCorrectly) {
  SocketOptions tuned;
  tuned.send_buffer_bytes = 4u << 20;
  tuned.recv_buffer_bytes = 4u << 20;
  auto opts = Options("node-s");
  opts.connection.chunk_bytes = kMaxChunkBytes;
  auto server = TcpTransport::Create(opts, tuned);
  auto client = TcpTransport::Create(Options("node-c"), tuned);
  ASSERT_TRUE(server.ok() && client.ok());
  auto listener = (*server)->Listen("127.0.0.1:0");
  ASSERT_TRUE(listener.ok());
  auto c = (*client)->Connect((*listener)->address(), Millis(3000));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*listener)->Accept(Millis(3000));
  ASSERT_TRUE(s.ok());
  constexpr size_t kSize = (20u << 20) + 13;  // crosses a 16 MiB chunk
  SharedBuffer src(kSize), dst(kSize);
  src.Fill(3);
  Status sent;
  std::thread t(
      [&] { sent = (*s)->SendStream(StreamHeader{1, 1, 1, kSize, "big chunks"}, src.data(), kSize); });
  auto got = (*c)->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return dst.span(); }, Millis(3000));
  t.join();
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);
}

}  // namespace
}  // namespace tierckpt::peer
