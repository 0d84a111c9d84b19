// The fault plan itself (stream corruption, stalls and truncation are
// exercised against every transport in transport_conformance_test.cc).

#include "testing/fault_transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"

namespace tierckpt::peer {
namespace {

using testing_util::Options;

class FaultTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    net_ = InMemoryNetwork::Create();
    auto server = InMemoryTransport::Create(net_, Options("node-s"));
    auto base = InMemoryTransport::Create(net_, Options("node-c"));
    ASSERT_TRUE(server.ok() && base.ok());
    server_ = std::move(*server);
    auto l = server_->Listen("srv:0");
    ASSERT_TRUE(l.ok());
    listener_ = std::move(*l);
    faulty_ = std::make_shared<FaultInjectingTransport>(std::shared_ptr<Transport>(std::move(*base)));
  }

  std::shared_ptr<InMemoryNetwork> net_;
  std::unique_ptr<Transport> server_;
  std::unique_ptr<Listener> listener_;
  std::shared_ptr<FaultInjectingTransport> faulty_;
};

TEST_F(FaultTransportTest, FailNthAndEveryConnect) {
  EXPECT_EQ(faulty_->Describe(), "fault(in-memory)");
  faulty_->FailNthConnect(2, Timeout("scripted timeout"));
  EXPECT_TRUE(faulty_->Connect(listener_->address(), Millis(3000)).ok());
  auto second = faulty_->Connect(listener_->address(), Millis(3000));
  EXPECT_EQ(second.status().code(), Code::kTimeout);
  EXPECT_NE(second.status().message().find("injected fault on Connect #2: scripted timeout"),
            std::string::npos)
      << second.status().message();
  EXPECT_TRUE(faulty_->Connect(listener_->address(), Millis(3000)).ok());  // once only

  faulty_->FailEveryConnect(Status::Ok());
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(faulty_->Connect(listener_->address(), Millis(3000)).status().code(), Code::kUnavailable);
  }
  faulty_->ClearFaults();
  EXPECT_TRUE(faulty_->Connect(listener_->address(), Millis(3000)).ok());
  EXPECT_EQ(faulty_->ConnectCount(), 6u);
  EXPECT_EQ(faulty_->InjectedFaults(), 3u);
}

TEST_F(FaultTransportTest, DroppedSendClosesTheConnectionOnBothSides) {
  auto c = faulty_->Connect(listener_->address(), Millis(3000));
  ASSERT_TRUE(c.ok());
  auto s = listener_->Accept(Millis(3000));
  ASSERT_TRUE(s.ok());
  faulty_->DropNthSend(2);
  ASSERT_TRUE((*c)->Send(Frame{1, 1, "one"}).ok());
  Status dropped = (*c)->Send(Frame{1, 2, "two"});
  EXPECT_EQ(dropped.code(), Code::kUnavailable);
  EXPECT_NE(dropped.message().find("injected fault on Send #2"), std::string::npos) << dropped.message();
  auto first = (*s)->Receive(Millis(3000));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->frame.payload, "one");
  EXPECT_EQ((*s)->Receive(Millis(3000)).status().code(), Code::kUnavailable);  // never arrives: closed
  EXPECT_EQ((*c)->Send(Frame{1, 3, "three"}).code(), Code::kUnavailable);
  EXPECT_EQ(faulty_->SendCount(), 3u);
}

// The byte counters CommitTreeBytesTest reads (decision 108): every Send's
// payload, dropped ones included, and the largest.
TEST_F(FaultTransportTest, SendBytesAddsUpEveryPayloadAndLargestSendIsTheLargest) {
  auto c = faulty_->Connect(listener_->address(), Millis(3000));
  ASSERT_TRUE(c.ok());
  auto s = listener_->Accept(Millis(3000));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(faulty_->SendBytes(), 0u);
  EXPECT_EQ(faulty_->LargestSend(), 0u);
  ASSERT_TRUE((*c)->Send(Frame{1, 1, "one"}).ok());
  ASSERT_TRUE((*c)->Send(Frame{1, 2, std::string(70, 'x')}).ok());
  ASSERT_TRUE((*c)->Send(Frame{1, 3, "three"}).ok());
  EXPECT_EQ(faulty_->SendBytes(), 3u + 70u + 5u);
  EXPECT_EQ(faulty_->LargestSend(), 70u);
}

TEST_F(FaultTransportTest, DelayHoldsEverySendAndStallsStickToTheirConnection) {
  auto c = faulty_->Connect(listener_->address(), Millis(3000));
  ASSERT_TRUE(c.ok());
  auto s = listener_->Accept(Millis(3000));
  ASSERT_TRUE(s.ok());
  faulty_->DelayEverySend(Millis(50));
  auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE((*c)->Send(Frame{1, 1, "slow"}).ok());
  ASSERT_TRUE((*c)->Send(Frame{1, 2, "slower"}).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(100));
  faulty_->ClearFaults();

  faulty_->StallNthStream(1, 0);
  std::string data(1000, 'd');
  Status stalled = (*c)->SendStream(StreamHeader{1, 1, 1, data.size(), "frozen"}, data.data(), data.size());
  EXPECT_EQ(stalled.code(), Code::kAborted);
  EXPECT_NE(stalled.message().find("injected fault on stream #1"), std::string::npos) << stalled.message();
  EXPECT_EQ((*c)->Send(Frame{1, 3, "after"}).code(), Code::kAborted);  // still frozen
  EXPECT_EQ(faulty_->StreamCount(), 1u);
  // The receiver sees the two slow frames and the begun stream, then nothing.
  for (const char* payload : {"slow", "slower"}) {
    auto f = (*s)->Receive(Millis(3000));
    ASSERT_TRUE(f.ok());
    EXPECT_EQ(f->frame.payload, payload);
  }
  auto m = (*s)->Receive(Millis(3000));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->kind, Message::Kind::kStream);
}

TEST_F(FaultTransportTest, CorruptionPastTheEndAltersNothing) {
  auto c = faulty_->Connect(listener_->address(), Millis(3000));
  ASSERT_TRUE(c.ok());
  auto s = listener_->Accept(Millis(3000));
  ASSERT_TRUE(s.ok());
  faulty_->CorruptNthStream(1, 1u << 30);
  std::string data(5000, 'e');
  std::thread t([&] {
    EXPECT_TRUE(
        (*c)->SendStream(StreamHeader{1, 1, 1, data.size(), "intact"}, data.data(), data.size()).ok());
  });
  std::vector<uint8_t> out(data.size());
  auto got = (*s)->ReceiveStream(
      [&](const StreamHeader&) -> Result<std::span<uint8_t>> { return std::span(out); }, Millis(3000));
  t.join();
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(faulty_->InjectedFaults(), 0u);
}

}  // namespace
}  // namespace tierckpt::peer
