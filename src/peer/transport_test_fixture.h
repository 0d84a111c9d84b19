// transport_test_fixture.h — the fixture of the transport conformance
// suites: every test runs against TCP on loopback, the in-memory transport,
// and the fault-injecting wrapper (empty plan) around each. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "peer/channel_transport.h"
#include "peer/peer_test_util.h"
#include "testing/fault_transport.h"

namespace tierckpt::peer::testing_util {

struct TransportKind {
  std::string name;
  bool tcp = false;
  bool fault_wrapped = false;
};

// gtest prints the transport's name, not its bytes.
inline void PrintTo(const TransportKind& kind, std::ostream* os) { *os << kind.name; }

inline std::vector<TransportKind> AllTransports() {
  return {{"Tcp", true, false},
          {"InMemory", false, false},
          {"FaultOverTcp", true, true},
          {"FaultOverInMemory", false, true}};
}

inline std::string KindName(const ::testing::TestParamInfo<TransportKind>& info) { return info.param.name; }

struct Server {
  std::shared_ptr<Transport> transport;
  std::unique_ptr<Listener> listener;
};

struct ConnectionPair {
  std::unique_ptr<Connection> client;
  std::unique_ptr<Connection> server;
};

class TransportTest : public ::testing::TestWithParam<TransportKind> {
 protected:
  void SetUp() override {
    if (!GetParam().tcp) network_ = InMemoryNetwork::Create(64u << 10);
  }

  // The transport under test, without any wrapper.
  std::shared_ptr<ChannelTransport> MakeBase(TransportOptions options) {
    if (GetParam().tcp) {
      auto t = TcpTransport::Create(std::move(options));
      EXPECT_TRUE(t.ok()) << t.status().ToString();
      return t.ok() ? std::shared_ptr<ChannelTransport>(std::move(*t)) : nullptr;
    }
    auto t = InMemoryTransport::Create(network_, std::move(options));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? std::shared_ptr<ChannelTransport>(std::move(*t)) : nullptr;
  }

  // The transport under test (wrapped when the kind says so).
  std::shared_ptr<Transport> Make(TransportOptions options) {
    std::shared_ptr<ChannelTransport> base = MakeBase(std::move(options));
    if (GetParam().fault_wrapped) return std::make_shared<FaultInjectingTransport>(base);
    return base;
  }

  // A fault-injecting wrapper around the transport under test.
  std::shared_ptr<FaultInjectingTransport> MakeFaulty(TransportOptions options) {
    return std::make_shared<FaultInjectingTransport>(Make(std::move(options)));
  }

  std::string ListenAddress() const { return GetParam().tcp ? "127.0.0.1:0" : "node-l:0"; }

  // A listening server whose turned-away peers land in failures_.
  Server StartServer(TransportOptions options) {
    options.on_handshake_failed = failures_.Hook();
    Server s;
    s.transport = Make(std::move(options));
    auto l = s.transport->Listen(ListenAddress());
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (l.ok()) s.listener = std::move(*l);
    return s;
  }

  ConnectionPair Connect(Transport& client, Listener& listener) {
    ConnectionPair p;
    auto c = client.Connect(listener.address(), Millis(3000));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return p;
    p.client = std::move(*c);
    auto s = listener.Accept(Millis(3000));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) p.server = std::move(*s);
    return p;
  }

  std::shared_ptr<InMemoryNetwork> network_;
  FailureLog failures_;
};

}  // namespace tierckpt::peer::testing_util
