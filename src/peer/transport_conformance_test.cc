// One suite, every transport (transport_test_fixture.h): control messages,
// streams between shared-memory mappings, stream faults, timeouts, closing,
// and many concurrent connections. Authentication and malformed frames are
// in transport_security_test.cc.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "peer/transport_test_fixture.h"

namespace tierckpt::peer {
namespace {

using testing_util::ConnectionPair;
using testing_util::Options;
using testing_util::Server;
using testing_util::SharedBuffer;
using testing_util::Since;
using Clock = std::chrono::steady_clock;

class ConformanceTest : public testing_util::TransportTest {};

TEST_P(ConformanceTest, ControlFramesRoundTripBothWays) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  EXPECT_EQ(p.client->peer().node_id, "node-s");
  EXPECT_EQ(p.server->peer().node_id, "node-c");
  EXPECT_EQ(p.client->peer().version, kPeerProtocolVersion);
  EXPECT_NE(p.client->Describe().find("node-s"), std::string::npos);

  std::string big(1u << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 7) big[i] = static_cast<char>(i);
  std::vector<Frame> frames = {{1, 10, ""}, {2, 11, "hello"}, {0xffff, 0xffffffff, big}};
  // Three threads: a 1 MiB frame does not fit in the pipes, so sends block
  // until the other side reads.
  std::thread sender([&] {
    for (const Frame& f : frames) ASSERT_TRUE(p.client->Send(f).ok());
  });
  std::thread echo([&] {
    for (const Frame& f : frames) {
      auto m = p.server->Receive(Millis(3000));
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      ASSERT_EQ(m->kind, Message::Kind::kControl);
      EXPECT_EQ(m->frame.type, f.type);
      EXPECT_EQ(m->frame.request_id, f.request_id);
      EXPECT_EQ(m->frame.payload, f.payload);
      ASSERT_TRUE(
          p.server->Send(Frame{static_cast<uint16_t>(f.type ^ 1), f.request_id, "re:" + f.payload}).ok());
    }
  });
  for (const Frame& f : frames) {
    auto m = p.client->Receive(Millis(3000));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->frame.type, static_cast<uint16_t>(f.type ^ 1));
    EXPECT_EQ(m->frame.request_id, f.request_id);
    EXPECT_EQ(m->frame.payload, "re:" + f.payload);
  }
  sender.join();
  echo.join();
  EXPECT_EQ(p.client->stats().messages_sent, 3u);
  EXPECT_EQ(p.client->stats().messages_received, 3u);
  EXPECT_GT(p.server->stats().bytes_received, big.size());
}

TEST_P(ConformanceTest, SendAndReceiveRunConcurrently) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  constexpr uint32_t kCount = 200;
  std::string payload(40000, 'p');  // several pipe buffers' worth in flight
  std::thread echo([&] {
    for (uint32_t i = 0; i < kCount; ++i) {
      auto m = p.server->Receive(Millis(3000));
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      ASSERT_TRUE(p.server->Send(Frame{2, m->frame.request_id, m->frame.payload}).ok());
    }
  });
  std::thread sender([&] {
    for (uint32_t i = 0; i < kCount; ++i) ASSERT_TRUE(p.client->Send(Frame{1, i, payload}).ok());
  });
  for (uint32_t i = 0; i < kCount; ++i) {
    auto m = p.client->Receive(Millis(3000));
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->frame.request_id, i);
  }
  sender.join();
  echo.join();
}

TEST_P(ConformanceTest, StreamOf64MiBArrivesByteIdenticalBetweenMappings) {
  constexpr size_t kSize = 64u << 20;
  SharedBuffer src(kSize);
  SharedBuffer dst(kSize);
  src.Fill(42);
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);

  StreamHeader h{7, 99, 1234, kSize, "ns1/step_0000000042/__0_0.distcp"};
  Status sent;
  std::thread sender([&] { sent = p.client->SendStream(h, src.data(), kSize); });
  StreamHeader seen;
  auto got = p.server->ReceiveStream(
      [&](const StreamHeader& header) -> Result<std::span<uint8_t>> {
        seen = header;
        return dst.span();
      },
      Millis(3000));
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(seen.size, kSize);
  EXPECT_EQ(got->header.type, 7);
  EXPECT_EQ(got->header.request_id, 99u);
  EXPECT_EQ(got->header.object_id, 1234u);
  EXPECT_EQ(got->header.metadata, h.metadata);
  EXPECT_EQ(got->checksum, ComputeChecksum(src.data(), kSize));
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);
  EXPECT_EQ(p.client->stats().stream_bytes_sent, kSize);
  EXPECT_EQ(p.server->stats().stream_bytes_received, kSize);
}

TEST_P(ConformanceTest, ChunkApiZeroSizeStreamsAndControlFramesInterleave) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  std::string a = "first piece|", b = "second piece";
  std::string whole = a + b;
  ASSERT_TRUE(p.client->BeginStream(StreamHeader{1, 1, 5, whole.size(), "pieces"}).ok());
  EXPECT_EQ(p.client->Send(Frame{1, 2, "x"}).code(), Code::kFailedPrecondition);  // stream open
  ASSERT_TRUE(p.client->SendStreamChunk(a.data(), a.size()).ok());
  EXPECT_EQ(p.client->EndStream(ComputeChecksum(whole.data(), whole.size())).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(p.client->SendStreamChunk(whole.data(), whole.size()).code(),
            Code::kInvalidArgument);  // too long
  ASSERT_TRUE(p.client->SendStreamChunk(b.data(), b.size()).ok());
  ASSERT_TRUE(p.client->EndStream(ComputeChecksum(whole.data(), whole.size())).ok());
  ASSERT_TRUE(p.client->SendStream(StreamHeader{2, 3, 6, 0, "empty"}, nullptr, 0).ok());
  ASSERT_TRUE(p.client->Send(Frame{3, 4, "after"}).ok());

  auto m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->kind, Message::Kind::kStream);
  EXPECT_EQ(m->stream.size, whole.size());
  EXPECT_EQ(p.server->Receive(Millis(10)).status().code(), Code::kFailedPrecondition);  // body unread
  std::vector<uint8_t> out(whole.size());
  auto sum = p.server->ReceiveStreamBody(out);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(std::string(out.begin(), out.end()), whole);
  auto empty = p.server->ReceiveStream(
      [](const StreamHeader&) -> Result<std::span<uint8_t>> { return std::span<uint8_t>(); }, Millis(3000));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->header.metadata, "empty");
  EXPECT_EQ(empty->checksum, ComputeChecksum(nullptr, 0));
  auto after = p.server->Receive(Millis(3000));
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->frame.payload, "after");
}

TEST_P(ConformanceTest, AKnownChecksumIsSentUnhashedAndVerifiedByTheReceiver) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  std::string data(3 * p.client->chunk_bytes() + 17, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  const Checksum right = ComputeChecksum(data.data(), data.size());
  const Checksum wrong{right.value ^ 1};
  std::thread sender([&] {
    EXPECT_TRUE(p.client->SendStreamKnown(StreamHeader{1, 1, 1, data.size(), "right"}, data.data(), data.size(), right)
                    .ok());
    EXPECT_TRUE(p.client->SendStreamKnown(StreamHeader{1, 2, 2, data.size(), "wrong"}, data.data(), data.size(), wrong)
                    .ok());
    EXPECT_TRUE(p.client->Send(Frame{3, 3, "after"}).ok());
  });
  std::vector<uint8_t> out(data.size());
  auto sink = [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return std::span<uint8_t>(out); };
  auto first = p.server->ReceiveStream(sink, Millis(3000));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->checksum, right);
  EXPECT_EQ(std::string(out.begin(), out.end()), data);
  auto second = p.server->ReceiveStream(sink, Millis(3000));
  EXPECT_EQ(second.status().code(), Code::kCorruption) << second.status().ToString();
  auto after = p.server->Receive(Millis(3000));  // the connection stays usable
  sender.join();
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->frame.payload, "after");
}

TEST_P(ConformanceTest, RefusedTooSmallAndAbortedStreamsLeaveTheConnectionUsable) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  std::string data(3u << 20, 'd');
  std::thread sender([&] {
    EXPECT_TRUE(
        p.client->SendStream(StreamHeader{1, 1, 1, data.size(), "refused"}, data.data(), data.size()).ok());
    EXPECT_TRUE(
        p.client->SendStream(StreamHeader{1, 2, 2, data.size(), "too-small"}, data.data(), data.size()).ok());
    EXPECT_TRUE(p.client->BeginStream(StreamHeader{1, 3, 3, data.size(), "aborted"}).ok());
    EXPECT_TRUE(p.client->SendStreamChunk(data.data(), 1000).ok());
    EXPECT_TRUE(p.client->AbortStream("source object vanished").ok());
    EXPECT_TRUE(p.client->Send(Frame{9, 4, "still here"}).ok());
  });
  auto refused = p.server->ReceiveStream(
      [](const StreamHeader&) -> Result<std::span<uint8_t>> { return ResourceExhausted("no room"); },
      Millis(3000));
  EXPECT_EQ(refused.status().code(), Code::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("refused"), std::string::npos) << refused.status().message();
  std::vector<uint8_t> small(100);
  auto too_small = p.server->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return std::span<uint8_t>(small); },
      Millis(3000));
  EXPECT_EQ(too_small.status().code(), Code::kInvalidArgument);
  std::vector<uint8_t> big(data.size());
  auto aborted = p.server->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return std::span<uint8_t>(big); },
      Millis(3000));
  EXPECT_EQ(aborted.status().code(), Code::kAborted);
  EXPECT_NE(aborted.status().message().find("source object vanished"), std::string::npos);
  auto m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->frame.payload, "still here");
  sender.join();
}

TEST_P(ConformanceTest, CorruptedStreamIsCorruptionAndTheConnectionStaysUsable) {
  constexpr size_t kSize = 5u << 20;
  SharedBuffer src(kSize), dst(kSize);
  src.Fill(7);
  Server server = StartServer(Options("node-s"));
  auto faulty = MakeFaulty(Options("node-c"));
  faulty->CorruptNthStream(1, kSize / 2 + 3);
  ConnectionPair p = Connect(*faulty, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  std::thread sender([&] {
    EXPECT_TRUE(p.client->SendStream(StreamHeader{1, 1, 77, kSize, "victim"}, src.data(), kSize).ok());
    EXPECT_TRUE(p.client->SendStream(StreamHeader{1, 2, 78, kSize, "healthy"}, src.data(), kSize).ok());
  });
  auto sink = [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return dst.span(); };
  auto bad = p.server->ReceiveStream(sink, Millis(3000));
  EXPECT_EQ(bad.status().code(), Code::kCorruption) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("victim"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("node-c"), std::string::npos) << bad.status().message();
  EXPECT_EQ(dst.data()[kSize / 2 + 3], static_cast<uint8_t>(src.data()[kSize / 2 + 3] ^ 0xff));
  auto good = p.server->ReceiveStream(sink, Millis(3000));
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);
  sender.join();
  EXPECT_EQ(faulty->InjectedFaults(), 1u);
}

TEST_P(ConformanceTest, StreamsReceivedInPiecesArriveInOrderHashedAndCheckedAndAWriterErrorCloses) {
  constexpr size_t kSize = (3u << 20) + 12345;
  SharedBuffer src(kSize), dst(kSize);
  src.Fill(11);
  Server server = StartServer(Options("node-s"));
  auto faulty = MakeFaulty(Options("node-c"));
  faulty->CorruptNthStream(2, 4097);
  ConnectionPair p = Connect(*faulty, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  std::thread sender([&] {
    EXPECT_TRUE(p.client->SendStream(StreamHeader{1, 1, 1, kSize, "whole"}, src.data(), kSize).ok());
    EXPECT_TRUE(p.client->SendStream(StreamHeader{1, 2, 2, kSize, "damaged"}, src.data(), kSize).ok());
    (void)p.client->SendStream(StreamHeader{1, 3, 3, kSize, "refused"}, src.data(), kSize);
  });
  uint64_t expect = 0;
  size_t pieces = 0;
  auto writer = [&](uint64_t offset, const uint8_t* data, size_t n) -> Status {
    EXPECT_EQ(offset, expect);  // in order, no gaps
    EXPECT_LE(n, 256u << 10);   // bounded
    std::memcpy(dst.data() + offset, data, n);
    expect += n;
    ++pieces;
    return Status::Ok();
  };
  auto m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok() && m->kind == Message::Kind::kStream);
  auto sum = p.server->ReceiveStreamPieces(writer);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(*sum, ComputeChecksum(src.data(), kSize));
  EXPECT_EQ(expect, kSize);
  EXPECT_GT(pieces, 12u);
  EXPECT_EQ(std::memcmp(src.data(), dst.data(), kSize), 0);

  expect = 0;
  m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok() && m->kind == Message::Kind::kStream);
  auto bad = p.server->ReceiveStreamPieces(writer);
  EXPECT_EQ(bad.status().code(), Code::kCorruption) << bad.status().ToString();

  m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok() && m->kind == Message::Kind::kStream);
  auto refused = p.server->ReceiveStreamPieces(
      [](uint64_t, const uint8_t*, size_t) -> Status { return IoError("disk full (test)"); });
  EXPECT_EQ(refused.status().code(), Code::kIoError) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("refused"), std::string::npos) << refused.status().message();
  EXPECT_EQ(p.server->Receive(Millis(100)).status().code(), Code::kUnavailable);  // closed
  sender.join();
}

TEST_P(ConformanceTest, StalledStreamTimesOutWithinTheIoTimeout) {
  constexpr size_t kSize = 4u << 20;
  SharedBuffer src(kSize), dst(kSize);
  auto server_options = Options("node-s");
  server_options.connection.io_timeout = Millis(300);
  Server server = StartServer(server_options);
  auto faulty = MakeFaulty(Options("node-c"));
  faulty->StallNthStream(1, (1u << 20) + 100);
  ConnectionPair p = Connect(*faulty, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  Status sent;
  std::thread sender(
      [&] { sent = p.client->SendStream(StreamHeader{1, 1, 5, kSize, "stalls"}, src.data(), kSize); });
  Clock::time_point start;
  auto got = p.server->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> {
        start = Clock::now();
        return dst.span();
      },
      Millis(3000));
  sender.join();
  EXPECT_EQ(sent.code(), Code::kAborted) << sent.ToString();  // the injected stall
  EXPECT_EQ(got.status().code(), Code::kTimeout) << got.status().ToString();
  EXPECT_NE(got.status().message().find("stalled"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("stalls"), std::string::npos) << got.status().message();
  EXPECT_LT(Since(start), Millis(3000));
  EXPECT_EQ(p.server->Receive(Millis(10)).status().code(), Code::kUnavailable);  // closed after the timeout
}

TEST_P(ConformanceTest, TruncatedStreamIsUnavailableNamingTheOffset) {
  constexpr size_t kSize = 2u << 20;
  SharedBuffer src(kSize), dst(kSize);
  Server server = StartServer(Options("node-s"));
  auto faulty = MakeFaulty(Options("node-c"));
  faulty->TruncateNthStream(1, 1u << 20);
  ConnectionPair p = Connect(*faulty, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  Status sent;
  std::thread sender(
      [&] { sent = p.client->SendStream(StreamHeader{1, 1, 5, kSize, "cut"}, src.data(), kSize); });
  auto got = p.server->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return dst.span(); }, Millis(3000));
  sender.join();
  EXPECT_EQ(sent.code(), Code::kUnavailable) << sent.ToString();
  EXPECT_EQ(got.status().code(), Code::kUnavailable) << got.status().ToString();
  EXPECT_NE(got.status().message().find("offset 1048576"), std::string::npos) << got.status().message();
}

TEST_P(ConformanceTest, ReceiveTimeoutLeavesTheConnectionUsable) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  auto start = Clock::now();
  auto none = p.server->Receive(Millis(100));
  EXPECT_EQ(none.status().code(), Code::kTimeout);
  EXPECT_GE(Since(start), Millis(90));
  ASSERT_TRUE(p.client->Send(Frame{1, 1, "late"}).ok());
  auto m = p.server->Receive(Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->frame.payload, "late");
}

TEST_P(ConformanceTest, CloseWakesABlockedReceiveAndThePeerSeesUnavailable) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  ConnectionPair p = Connect(*client, *server.listener);
  ASSERT_TRUE(p.client && p.server);
  auto start = Clock::now();
  Status blocked;
  std::thread receiver([&] { blocked = p.server->Receive(Millis::max()).status(); });
  p.server->Close();
  receiver.join();
  EXPECT_EQ(blocked.code(), Code::kUnavailable) << blocked.ToString();
  EXPECT_LT(Since(start), Millis(5000));
  auto far = p.client->Receive(Millis(3000));
  EXPECT_EQ(far.status().code(), Code::kUnavailable) << far.status().ToString();
  EXPECT_NE(far.status().message().find("closed"), std::string::npos);
  EXPECT_EQ(p.server->Send(Frame{1, 1, "x"}).code(), Code::kUnavailable);
}

TEST_P(ConformanceTest, ManyConcurrentConnections) {
  Server server = StartServer(Options("node-s"));
  constexpr int kClients = 16;
  constexpr int kRounds = 20;
  std::atomic<int> served{0};
  std::vector<std::thread> handlers;
  std::thread acceptor([&] {
    for (int i = 0; i < kClients; ++i) {
      auto c = server.listener->Accept(Millis(4000));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      handlers.emplace_back([conn = std::shared_ptr<Connection>(std::move(*c)), &served] {
        for (int r = 0; r < kRounds; ++r) {
          auto m = conn->Receive(Millis(4000));
          ASSERT_TRUE(m.ok()) << m.status().ToString();
          ASSERT_TRUE(
              conn->Send(Frame{2, m->frame.request_id, conn->peer().node_id + ":" + m->frame.payload}).ok());
        }
        ++served;
      });
    }
  });
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([&, i] {
      std::string node = "client-" + std::to_string(i);
      auto transport = Make(Options(node));
      auto c = transport->Connect(server.listener->address(), Millis(4000));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      for (int r = 0; r < kRounds; ++r) {
        ASSERT_TRUE((*c)->Send(Frame{1, static_cast<uint32_t>(r), std::to_string(r)}).ok());
        auto m = (*c)->Receive(Millis(4000));
        ASSERT_TRUE(m.ok()) << m.status().ToString();
        EXPECT_EQ(m->frame.payload, node + ":" + std::to_string(r));
      }
    });
  }
  for (auto& t : clients) t.join();
  acceptor.join();
  for (auto& t : handlers) t.join();
  EXPECT_EQ(served.load(), kClients);
}

TEST_P(ConformanceTest, ConnectErrorsNameTheAddress) {
  Server server = StartServer(Options("node-s"));
  auto client = Make(Options("node-c"));
  auto wrong = client->Connect(server.listener->address(), Millis(3000), "node-other");
  EXPECT_EQ(wrong.status().code(), Code::kFailedPrecondition) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("node-other"), std::string::npos);
  auto right = client->Connect(server.listener->address(), Millis(3000), "node-s");
  EXPECT_TRUE(right.ok()) << right.status().ToString();

  std::string address = server.listener->address();
  auto taken = server.transport->Listen(address);
  EXPECT_EQ(taken.status().code(), Code::kAlreadyExists) << taken.status().ToString();
  server.listener->Close();
  EXPECT_EQ(server.listener->Accept(Millis(10)).status().code(), Code::kUnavailable);
  server.listener.reset();
  auto nobody = client->Connect(address, Millis(3000));
  EXPECT_EQ(nobody.status().code(), Code::kUnavailable) << nobody.status().ToString();
  EXPECT_NE(nobody.status().message().find(address), std::string::npos) << nobody.status().message();
}

INSTANTIATE_TEST_SUITE_P(AllTransports, ConformanceTest, ::testing::ValuesIn(testing_util::AllTransports()),
                         testing_util::KindName);

}  // namespace
}  // namespace tierckpt::peer
