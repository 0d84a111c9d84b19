// channel_transport.h — the transports built on byte channels: TCP (the real
// one) and in-memory (in-process pipes, for unit tests of higher layers).
//
// Both run the same handshake (peer/handshake.h), framing
// (peer/framed_connection.h) and listener (peer/handshaking_listener.h) over
// their channels, so they behave alike; the conformance suite
// (transport_conformance_test.cc) holds them to that. Connect logs a peer
// that fails authentication (event peer_rejected, with its address) before
// returning the error; listeners log the peers they turn away.
//
// Dial and Bind expose the raw channels under the protocol, before any
// handshake, for tests and diagnostics (speaking malformed frames, playing a
// silent peer). Production code uses Listen and Connect.
//
// Thread safety: thread-safe; connections and listeners follow transport.h.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "peer/byte_channel.h"
#include "peer/mem_channel.h"
#include "peer/tcp_socket.h"
#include "peer/transport.h"

namespace tierckpt::peer {

class ChannelTransport : public Transport {
 public:
  Result<std::unique_ptr<Listener>> Listen(const std::string& address) final;
  Result<std::unique_ptr<Connection>> Connect(const std::string& address, Millis timeout,
                                              std::string_view expected_node_id = {}) final;

  // Raw channels: no handshake, no framing.
  virtual Result<std::unique_ptr<ChannelAcceptor>> Bind(const std::string& address) = 0;
  virtual Result<std::unique_ptr<ByteChannel>> Dial(const std::string& address, Millis timeout) = 0;

  const TransportOptions& options() const { return options_; }

 protected:
  // Precondition: ValidateTransportOptions(options).ok() (the factories check).
  explicit ChannelTransport(TransportOptions options) : options_(std::move(options)) {}

 private:
  const TransportOptions options_;
};

// TCP between hosts. Addresses: peer/tcp_socket.h ("10.0.0.2:7100",
// "[::1]:0").
class TcpTransport final : public ChannelTransport {
 public:
  // kInvalidArgument from ValidateTransportOptions.
  static Result<std::unique_ptr<TcpTransport>> Create(TransportOptions options, SocketOptions socket = {});

  std::string Describe() const override { return "tcp"; }
  Result<std::unique_ptr<ChannelAcceptor>> Bind(const std::string& address) override;
  Result<std::unique_ptr<ByteChannel>> Dial(const std::string& address, Millis timeout) override;

 private:
  TcpTransport(TransportOptions options, SocketOptions socket)
      : ChannelTransport(std::move(options)), socket_(socket) {}
  const SocketOptions socket_;
};

// In-process pipes on a shared InMemoryNetwork (peer/mem_channel.h): every
// transport on the same network reaches the others' listeners.
class InMemoryTransport final : public ChannelTransport {
 public:
  static Result<std::unique_ptr<InMemoryTransport>> Create(std::shared_ptr<InMemoryNetwork> network,
                                                           TransportOptions options);

  std::string Describe() const override { return "in-memory"; }
  Result<std::unique_ptr<ChannelAcceptor>> Bind(const std::string& address) override;
  Result<std::unique_ptr<ByteChannel>> Dial(const std::string& address, Millis timeout) override;

 private:
  InMemoryTransport(std::shared_ptr<InMemoryNetwork> network, TransportOptions options)
      : ChannelTransport(std::move(options)), network_(std::move(network)) {}
  const std::shared_ptr<InMemoryNetwork> network_;
};

}  // namespace tierckpt::peer
