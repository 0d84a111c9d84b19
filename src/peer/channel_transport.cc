#include "peer/channel_transport.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/log.h"
#include "peer/framed_connection.h"
#include "peer/handshake.h"
#include "peer/handshaking_listener.h"

namespace tierckpt::peer {

Result<std::unique_ptr<Listener>> ChannelTransport::Listen(const std::string& address) {
  TC_ASSIGN_OR_RETURN(std::unique_ptr<ChannelAcceptor> acceptor, Bind(address));
  return std::unique_ptr<Listener>(std::make_unique<HandshakingListener>(std::move(acceptor), options_));
}

Result<std::unique_ptr<Connection>> ChannelTransport::Connect(const std::string& address, Millis timeout,
                                                              std::string_view expected_node_id) {
  auto start = std::chrono::steady_clock::now();
  TC_ASSIGN_OR_RETURN(std::unique_ptr<ByteChannel> channel, Dial(address, timeout));
  auto spent = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
  HandshakeParams params;
  params.node_id = options_.node_id;
  params.secret = &options_.secret;
  params.timeout = std::max(timeout - spent, Millis(1));
  params.expected_node_id = expected_node_id;
  Result<PeerInfo> info = ClientHandshake(*channel, params);
  if (!info.ok()) {
    Code c = info.status().code();
    if (c == Code::kPermissionDenied || c == Code::kProtocolError || c == Code::kFailedPrecondition) {
      Log(LogLevel::kWarn, c == Code::kPermissionDenied ? "peer_rejected" : "peer_handshake_failed")
          .Kv("side", "client")
          .Kv("peer", address)
          .Err(info.status());
    }
    return info.status().WithContext("connecting to peer " + address);
  }
  return std::unique_ptr<Connection>(
      std::make_unique<FramedConnection>(std::move(channel), std::move(*info), options_.connection));
}

Result<std::unique_ptr<TcpTransport>> TcpTransport::Create(TransportOptions options, SocketOptions socket) {
  TC_RETURN_IF_ERROR(ValidateTransportOptions(options));
  return std::unique_ptr<TcpTransport>(new TcpTransport(std::move(options), socket));
}

Result<std::unique_ptr<ChannelAcceptor>> TcpTransport::Bind(const std::string& address) {
  return TcpBind(address, socket_);
}

Result<std::unique_ptr<ByteChannel>> TcpTransport::Dial(const std::string& address, Millis timeout) {
  return TcpDial(address, timeout, socket_);
}

Result<std::unique_ptr<InMemoryTransport>> InMemoryTransport::Create(std::shared_ptr<InMemoryNetwork> network,
                                                                     TransportOptions options) {
  if (network == nullptr) return InvalidArgument("an in-memory transport needs an InMemoryNetwork");
  TC_RETURN_IF_ERROR(ValidateTransportOptions(options));
  return std::unique_ptr<InMemoryTransport>(new InMemoryTransport(std::move(network), std::move(options)));
}

Result<std::unique_ptr<ChannelAcceptor>> InMemoryTransport::Bind(const std::string& address) {
  return network_->Bind(address);
}

Result<std::unique_ptr<ByteChannel>> InMemoryTransport::Dial(const std::string& address, Millis /*timeout*/) {
  return network_->Dial(address);
}

}  // namespace tierckpt::peer
