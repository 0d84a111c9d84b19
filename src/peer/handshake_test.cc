// The handshake functions on their own, over in-memory channels.

#include "peer/handshake.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "peer/mem_channel.h"
#include "peer/peer_test_util.h"

namespace tierckpt::peer {
namespace {

using testing_util::RawPeer;
using testing_util::Secret;

struct ChannelPair {
  std::unique_ptr<ChannelAcceptor> acceptor;
  std::unique_ptr<ByteChannel> client;
  std::unique_ptr<ByteChannel> server;
};

ChannelPair MakePair(const std::shared_ptr<InMemoryNetwork>& net) {
  ChannelPair p;
  auto a = net->Bind("hs:0");
  EXPECT_TRUE(a.ok());
  p.acceptor = std::move(*a);
  auto c = net->Dial(p.acceptor->address());
  EXPECT_TRUE(c.ok());
  p.client = std::move(*c);
  auto s = p.acceptor->Accept();
  EXPECT_TRUE(s.ok());
  p.server = std::move(*s);
  return p;
}

TEST(HandshakeTest, BothSidesLearnTheOthersNodeAndVersion) {
  auto net = InMemoryNetwork::Create();
  ChannelPair p = MakePair(net);
  ClusterSecret secret = Secret();
  Result<PeerInfo> server = Internal("not run");
  std::thread t([&] { server = ServerHandshake(*p.server, {"srv", &secret, Millis(3000), {}}); });
  Result<PeerInfo> client = ClientHandshake(*p.client, {"cli", &secret, Millis(3000), "srv"});
  t.join();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(client->node_id, "srv");
  EXPECT_EQ(server->node_id, "cli");
  EXPECT_EQ(client->version, kPeerProtocolVersion);
  EXPECT_EQ(server->address, p.server->peer_address());
}

TEST(HandshakeTest, RefusesToRunWithoutASecret) {
  auto net = InMemoryNetwork::Create();
  ChannelPair p = MakePair(net);
  ClusterSecret none;
  EXPECT_EQ(ClientHandshake(*p.client, {"cli", &none, Millis(100), {}}).status().code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(ServerHandshake(*p.server, {"srv", nullptr, Millis(100), {}}).status().code(),
            Code::kFailedPrecondition);
}

TEST(HandshakeTest, VersionNegotiationPicksTheHighestCommon) {
  EXPECT_EQ(*NegotiateVersion(1, 3, 2, 5, "p"), 3);
  EXPECT_EQ(*NegotiateVersion(1, 1, 1, 1, "p"), 1);
  auto none = NegotiateVersion(1, 1, 2, 4, "peer x");
  EXPECT_EQ(none.status().code(), Code::kProtocolError);
  EXPECT_NE(none.status().message().find("2..4"), std::string::npos);
}

TEST(HandshakeTest, AReadyWithAPayloadOrAClientPosingAsServerIsAProtocolError) {
  auto net = InMemoryNetwork::Create();
  ClusterSecret secret = Secret();
  {
    ChannelPair p = MakePair(net);
    Result<PeerInfo> server = Internal("not run");
    std::thread t([&] { server = ServerHandshake(*p.server, {"srv", &secret, Millis(3000), {}}); });
    RawPeer raw(std::move(p.client));
    auto hello = raw.ClientHello("cli");
    ASSERT_TRUE(hello.ok()) << hello.status().ToString();
    std::string mac = ComputeProof(
        secret, ProofInput{Role::kClient, "cli", "srv", std::string(kNonceSize, 'c'), hello->nonce, 1});
    ASSERT_TRUE(raw.Send(FrameKind::kProof, ProofPayload{mac}.Encode()).ok());
    ASSERT_TRUE(raw.Read().ok());  // the server's proof
    ASSERT_TRUE(raw.Send(FrameKind::kReady, "junk").ok());
    t.join();
    EXPECT_EQ(server.status().code(), Code::kProtocolError) << server.status().ToString();
  }
  {
    ChannelPair p = MakePair(net);
    Result<PeerInfo> client = Internal("not run");
    std::thread t([&] { client = ClientHandshake(*p.client, {"cli", &secret, Millis(3000), {}}); });
    RawPeer raw(std::move(p.server));
    ASSERT_TRUE(raw.Read().ok());  // the client's Hello
    ASSERT_TRUE(raw.Send(FrameKind::kHello,
                         HelloPayload{Role::kClient, 1, 1, "x", std::string(kNonceSize, 'n')}.Encode())
                    .ok());
    t.join();
    EXPECT_EQ(client.status().code(), Code::kProtocolError);
    EXPECT_NE(client.status().message().find("Hello.role"), std::string::npos) << client.status().message();
  }
}

TEST(HandshakeTest, TheWholeHandshakeSharesOneDeadline) {
  auto net = InMemoryNetwork::Create();
  ChannelPair p = MakePair(net);
  ClusterSecret secret = Secret();
  RawPeer raw(std::move(p.client));
  ASSERT_TRUE(raw.Send(FrameKind::kHello,
                       HelloPayload{Role::kClient, 1, 1, "slow", std::string(kNonceSize, 'c')}.Encode())
                  .ok());
  auto start = std::chrono::steady_clock::now();
  auto server = ServerHandshake(*p.server, {"srv", &secret, Millis(200), {}});  // no Proof ever comes
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(server.status().code(), Code::kTimeout);
  EXPECT_NE(server.status().message().find("slow"), std::string::npos) << server.status().message();
  EXPECT_NE(server.status().message().find("Proof"), std::string::npos) << server.status().message();
  EXPECT_LT(took, std::chrono::seconds(3));
}

// A peer trickling a frame byte by byte makes progress with every byte, so
// a per-read timeout never fires; the handshake deadline must still hold on
// both sides (issue 16, item 10).
TEST(HandshakeTest, APeerTricklingBytesCannotStretchTheDeadline) {
  auto net = InMemoryNetwork::Create();
  ClusterSecret secret = Secret();
  PeerFrameHeader h;
  h.kind = FrameKind::kHello;
  std::string hello = HelloPayload{Role::kServer, 1, 1, "slowloris", std::string(kNonceSize, 'n')}.Encode();
  h.payload_len = static_cast<uint32_t>(hello.size());
  uint8_t head[kPeerFrameHeaderSize];
  EncodePeerHeader(h, head);
  const std::string frame = std::string(reinterpret_cast<char*>(head), sizeof(head)) + hello;
  for (bool trickler_is_server : {true, false}) {
    ChannelPair p = MakePair(net);
    std::unique_ptr<ByteChannel>& ours = trickler_is_server ? p.client : p.server;
    RawPeer raw(std::move(trickler_is_server ? p.server : p.client));
    std::atomic<bool> stop{false};
    std::thread trickle([&] {
      for (char c : frame) {
        if (stop.load() || !raw.SendBytes(std::string_view(&c, 1)).ok()) return;
        std::this_thread::sleep_for(Millis(200));
      }
    });
    auto start = std::chrono::steady_clock::now();
    HandshakeParams params{trickler_is_server ? "cli" : "srv", &secret, Millis(400), {}, {}};
    Result<PeerInfo> r = trickler_is_server ? ClientHandshake(*ours, params) : ServerHandshake(*ours, params);
    auto took = std::chrono::steady_clock::now() - start;
    stop = true;
    ours->Shutdown();
    trickle.join();
    EXPECT_EQ(r.status().code(), Code::kTimeout) << r.status().ToString();
    EXPECT_NE(r.status().message().find("400 ms"), std::string::npos) << r.status().message();
    EXPECT_LT(took, std::chrono::milliseconds(1500)) << (trickler_is_server ? "client" : "server")
                                                      << " side; the frame header alone takes 4 s to trickle";
  }
}

}  // namespace
}  // namespace tierckpt::peer
