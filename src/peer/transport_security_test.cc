// One suite, every transport (transport_test_fixture.h): authentication with
// the cluster secret, peers that skip it or lack it, malformed frames before
// and after the handshake, and silent peers.

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/log.h"
#include "peer/transport_test_fixture.h"
#include "testing/temp_dir.h"

namespace tierckpt::peer {
namespace {

using testing_util::ConnectionPair;
using testing_util::DecodeReject;
using testing_util::MessageHas;
using testing_util::Options;
using testing_util::RawFrame;
using testing_util::RawPeer;
using testing_util::Secret;
using testing_util::Server;
using Clock = std::chrono::steady_clock;

class SecurityTest : public testing_util::TransportTest {
 protected:
  RawPeer DialRaw(const std::string& address) {
    auto raw = MakeBase(Options("raw"));
    auto ch = raw->Dial(address, Millis(3000));
    EXPECT_TRUE(ch.ok()) << ch.status().ToString();
    return RawPeer(ch.ok() ? std::move(*ch) : nullptr);
  }

  // A server that answers the handshake by hand: reads the client's Hello
  // and Proof, then sends `mac` as its proof; returns the client's answer.
  Result<RawFrame> FakeServer(ChannelAcceptor& acceptor, const std::string& mac) {
    TC_ASSIGN_OR_RETURN(std::unique_ptr<ByteChannel> ch, acceptor.Accept());
    RawPeer peer(std::move(ch));
    TC_ASSIGN_OR_RETURN(RawFrame hello, peer.Read());
    TC_RETURN_IF_ERROR(
        peer.Send(FrameKind::kHello,
                  HelloPayload{Role::kServer, 1, 1, "impostor", std::string(kNonceSize, 's')}.Encode()));
    TC_ASSIGN_OR_RETURN(RawFrame proof, peer.Read());
    TC_RETURN_IF_ERROR(peer.Send(FrameKind::kProof, ProofPayload{mac}.Encode()));
    return peer.Read();
  }
};

TEST_P(SecurityTest, WrongSecretIsRejectedOnBothSidesAndLogged) {
  tierckpt::testing_util::TempDir dir("tc_peer_log");
  std::string log_path = dir.Sub("log");
  ASSERT_TRUE(SetLogFile(log_path).ok());
  Server server = StartServer(Options("node-s", Secret("the-right-secret-0123456789")));
  auto client = Make(Options("node-c", Secret("a-wrong-secret-9876543210")));
  auto c = client->Connect(server.listener->address(), Millis(3000));
  ASSERT_EQ(c.status().code(), Code::kPermissionDenied) << c.status().ToString();
  EXPECT_TRUE(MessageHas(c.status(), server.listener->address())) << c.status().message();
  EXPECT_TRUE(MessageHas(c.status(), "secret")) << c.status().message();
  auto failure = failures_.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kPermissionDenied) << failure->second.ToString();
  EXPECT_TRUE(MessageHas(failure->second, "wrong proof")) << failure->second.message();
  EXPECT_TRUE(MessageHas(failure->second, "node-c")) << failure->second.message();
  EXPECT_TRUE(MessageHas(failure->second, failure->first)) << failure->second.message();
  ASSERT_TRUE(SetLogFile("").ok());
  std::stringstream log;
  log << std::ifstream(log_path).rdbuf();
  EXPECT_NE(log.str().find("event=peer_rejected"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("peer=" + failure->first), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("side=client peer=" + server.listener->address()), std::string::npos) << log.str();
  EXPECT_EQ(server.listener->Accept(Millis(50)).status().code(), Code::kTimeout);  // nothing got through
}

TEST_P(SecurityTest, ClientWithoutSecretIsRejected) {
  Server server = StartServer(Options("node-s"));
  RawPeer rogue = DialRaw(server.listener->address());
  auto answer = rogue.ClientHandshake("rogue", nullptr);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  RejectPayload reject = DecodeReject(*answer);
  EXPECT_EQ(reject.code, static_cast<uint32_t>(Code::kPermissionDenied));
  EXPECT_NE(reject.message.find("no proof"), std::string::npos) << reject.message;
  auto failure = failures_.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kPermissionDenied);
  EXPECT_TRUE(MessageHas(failure->second, "no proof")) << failure->second.message();
  EXPECT_TRUE(MessageHas(failure->second, "rogue")) << failure->second.message();
  EXPECT_EQ(server.listener->Accept(Millis(50)).status().code(), Code::kTimeout);
}

TEST_P(SecurityTest, ServerWithoutOrWithWrongSecretIsRejectedByTheClient) {
  auto raw = MakeBase(Options("raw"));
  auto acceptor = raw->Bind(ListenAddress());
  ASSERT_TRUE(acceptor.ok()) << acceptor.status().ToString();
  auto client = Make(Options("node-c"));
  struct Case {
    std::string mac;
    std::string expect;
  } cases[] = {{"", "presented no proof"}, {std::string(kMacSize, 'm'), "failed to prove"}};
  for (const Case& c : cases) {
    Result<RawFrame> answer = Internal("not run");
    std::thread fake([&] { answer = FakeServer(**acceptor, c.mac); });
    auto conn = client->Connect((*acceptor)->address(), Millis(3000));
    fake.join();
    EXPECT_EQ(conn.status().code(), Code::kPermissionDenied) << conn.status().ToString();
    EXPECT_TRUE(MessageHas(conn.status(), c.expect)) << conn.status().message();
    EXPECT_TRUE(MessageHas(conn.status(), "impostor")) << conn.status().message();
    ASSERT_TRUE(answer.ok()) << answer.status().ToString();
    EXPECT_EQ(DecodeReject(*answer).code, static_cast<uint32_t>(Code::kPermissionDenied));
  }
}

TEST_P(SecurityTest, PeerSkippingTheHandshakeIsRejected) {
  Server server = StartServer(Options("node-s"));
  RawPeer rogue = DialRaw(server.listener->address());
  ASSERT_TRUE(rogue.Send(FrameKind::kControl, "let me in", 5, 1).ok());
  auto answer = rogue.Read();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(DecodeReject(*answer).code, static_cast<uint32_t>(Code::kPermissionDenied));
  auto failure = failures_.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kPermissionDenied);
  EXPECT_TRUE(MessageHas(failure->second, "before authenticating")) << failure->second.message();
}

TEST_P(SecurityTest, IncompatibleVersionsAreRefused) {
  Server server = StartServer(Options("node-s"));
  RawPeer future = DialRaw(server.listener->address());
  auto hello = future.ClientHello("future-node", 7, 9);
  EXPECT_EQ(hello.status().code(), Code::kInternal);  // a Reject came instead of a Hello
  EXPECT_TRUE(MessageHas(hello.status(), "7..9")) << hello.status().message();
  auto failure = failures_.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kProtocolError);
  EXPECT_TRUE(MessageHas(failure->second, "versions 7..9")) << failure->second.message();
}

TEST_P(SecurityTest, MalformedFramesAreProtocolErrorsAndTheListenerKeepsServing) {
  Server server = StartServer(Options("node-s"));
  uint8_t oversized[kPeerFrameHeaderSize];
  PeerFrameHeader h;
  h.kind = FrameKind::kHello;
  h.payload_len = 1u << 20;
  EncodePeerHeader(h, oversized);
  struct Case {
    std::string bytes;
    std::string field;
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "field magic"},
      {std::string(reinterpret_cast<char*>(oversized), sizeof(oversized)), "field payload_len"},
      {std::string("TCPR\x01\x00\x01", 7), "truncated frame header"},
  };
  size_t n = 0;
  for (const Case& c : cases) {
    RawPeer rogue = DialRaw(server.listener->address());
    ASSERT_TRUE(rogue.SendBytes(c.bytes).ok());
    rogue.channel().Shutdown();  // the truncated header ends here
    auto failure = failures_.Wait(++n);
    ASSERT_TRUE(failure.has_value()) << c.field;
    EXPECT_EQ(failure->second.code(), Code::kProtocolError) << failure->second.ToString();
    EXPECT_TRUE(MessageHas(failure->second, c.field)) << failure->second.message();
    EXPECT_TRUE(MessageHas(failure->second, failure->first)) << failure->second.message();  // names the peer
  }
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  ASSERT_TRUE(p.client->Send(Frame{1, 1, "fine"}).ok());
  auto m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->frame.payload, "fine");
}

TEST_P(SecurityTest, MalformedFramesAfterTheHandshakeCloseTheConnection) {
  Server server = StartServer(Options("node-s"));
  ClusterSecret secret = Secret();
  auto send_and_receive = [&](const std::function<void(RawPeer&)>& send_bad) -> Status {
    RawPeer peer = DialRaw(server.listener->address());
    auto answer = peer.ClientHandshake("member", &secret);
    if (!answer.ok()) return answer.status();
    EXPECT_EQ(answer->header.kind, FrameKind::kProof);
    auto conn = server.listener->Accept(Millis(3000));
    if (!conn.ok()) return conn.status();
    send_bad(peer);
    Status s = (*conn)->Receive(Millis(3000)).status();
    if (s.code() == Code::kOk) s = (*conn)->DiscardStream();
    EXPECT_EQ((*conn)->Receive(Millis(10)).status().code(), Code::kUnavailable);  // closed
    return s;
  };
  Status oversized = send_and_receive([](RawPeer& p) {
    uint8_t head[kPeerFrameHeaderSize];
    PeerFrameHeader h;
    h.payload_len = kMaxControlPayload + 1;
    EncodePeerHeader(h, head);
    ASSERT_TRUE(p.SendBytes(std::string(reinterpret_cast<char*>(head), sizeof(head))).ok());
  });
  EXPECT_EQ(oversized.code(), Code::kProtocolError) << oversized.ToString();
  EXPECT_TRUE(MessageHas(oversized, "payload_len")) << oversized.message();
  EXPECT_TRUE(MessageHas(oversized, "node member")) << oversized.message();

  Status unknown_kind = send_and_receive([](RawPeer& p) {
    uint8_t head[kPeerFrameHeaderSize];
    EncodePeerHeader(PeerFrameHeader{}, head);
    head[6] = 42;
    ASSERT_TRUE(p.SendBytes(std::string(reinterpret_cast<char*>(head), sizeof(head))).ok());
  });
  EXPECT_EQ(unknown_kind.code(), Code::kProtocolError);
  EXPECT_TRUE(MessageHas(unknown_kind, "field kind")) << unknown_kind.message();

  Status gap = send_and_receive([](RawPeer& p) {
    ASSERT_TRUE(p.Send(FrameKind::kStreamBegin, StreamBeginPayload{3, 100, "obj"}.Encode(), 1).ok());
    uint8_t prefix[kStreamDataPrefix];
    StreamDataPrefix{3, 50, 10}.Encode(prefix);  // offset 50 where 0 is due
    ASSERT_TRUE(p.Send(FrameKind::kStreamData,
                       std::string(reinterpret_cast<char*>(prefix), sizeof(prefix)) + std::string(10, 'z'))
                    .ok());
  });
  EXPECT_EQ(gap.code(), Code::kProtocolError);
  EXPECT_TRUE(MessageHas(gap, "offset is 50")) << gap.message();

  Status handshake_again =
      send_and_receive([](RawPeer& p) { ASSERT_TRUE(p.Send(FrameKind::kHello, "").ok()); });
  EXPECT_EQ(handshake_again.code(), Code::kProtocolError);
}

TEST_P(SecurityTest, ConnectToASilentPeerTimesOut) {
  auto raw = MakeBase(Options("raw"));
  auto silent = raw->Bind(ListenAddress());  // never accepts, never answers
  ASSERT_TRUE(silent.ok()) << silent.status().ToString();
  auto client = Make(Options("node-c"));
  auto start = Clock::now();
  auto c = client->Connect((*silent)->address(), Millis(300));
  auto took = std::chrono::duration_cast<Millis>(Clock::now() - start);
  EXPECT_EQ(c.status().code(), Code::kTimeout) << c.status().ToString();
  EXPECT_TRUE(MessageHas(c.status(), "handshake")) << c.status().message();
  EXPECT_TRUE(MessageHas(c.status(), (*silent)->address())) << c.status().message();
  EXPECT_GE(took, Millis(250));
  EXPECT_LT(took, Millis(3000));
}

TEST_P(SecurityTest, SilentClientTimesOutWhileOthersAreServed) {
  auto options = Options("node-s");
  options.handshake_timeout = Millis(1500);
  Server server = StartServer(options);
  RawPeer silent = DialRaw(server.listener->address());
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);  // accepted after the silent one
  ASSERT_TRUE(p.client && p.server);
  EXPECT_EQ(failures_.size(), 0u);  // the silent peer is still pending, yet we got in
  auto failure = failures_.Wait(1);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->second.code(), Code::kTimeout) << failure->second.ToString();
  EXPECT_TRUE(MessageHas(failure->second, "did not complete the handshake")) << failure->second.message();
}

TEST_P(SecurityTest, ClosingTheListenerAbortsPendingHandshakesPromptly) {
  auto options = Options("node-s");
  options.handshake_timeout = Millis(20000);
  Server server = StartServer(options);
  RawPeer silent = DialRaw(server.listener->address());
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);  // the silent one is being handshaken by now
  ASSERT_TRUE(p.client && p.server);
  auto start = Clock::now();
  server.listener->Close();
  EXPECT_LT(std::chrono::duration_cast<Millis>(Clock::now() - start), Millis(3000));
  EXPECT_EQ(failures_.size(), 0u);  // aborts caused by Close are not reported
  size_t got = 0;
  char byte;
  Status s = silent.channel().Read(&byte, 1, Millis(3000), Millis(3000), &got);
  EXPECT_TRUE(s.ok() && got == 0) << s.ToString();  // the server closed it
}

INSTANTIATE_TEST_SUITE_P(AllTransports, SecurityTest, ::testing::ValuesIn(testing_util::AllTransports()),
                         testing_util::KindName);

}  // namespace
}  // namespace tierckpt::peer
