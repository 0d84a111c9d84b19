// tcp_socket.h — TCP byte channels and acceptors for the peer transport.
//
// Addresses are "host:port": an IPv4 literal ("10.0.0.2:7100"), a bracketed
// IPv6 literal ("[::1]:7100", "[fe80::1%eth0]:7100"), or a name resolved with
// getaddrinfo ("node-3:7100"; resolution is not bounded by the timeout, so
// prefer literals on hot paths). Port 0 binds an ephemeral port; the
// acceptor's address() gives the real one. "0.0.0.0:port" / "[::]:port"
// listen on every interface.
//
// Every socket is non-blocking and close-on-exec; waits use poll(2) with the
// caller's timeout, sends use MSG_NOSIGNAL (no SIGPIPE). Sockets get
// TCP_NODELAY (frames are written whole, so Nagle only adds latency) and,
// when set, SO_SNDBUF/SO_RCVBUF. Leaving the buffer sizes at 0 keeps Linux's
// autotuning, which is usually best; a fixed size disables autotuning for
// that socket (the kernel doubles the value given).
//
// Thread safety: as byte_channel.h. ParseHostPort, FormatHostPort and
// PeerSource are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <sys/socket.h>

#include "peer/byte_channel.h"

namespace tierckpt::peer {

struct SocketOptions {
  bool no_delay = true;
  int send_buffer_bytes = 0;  // SO_SNDBUF; 0 = kernel default (autotuned)
  int recv_buffer_bytes = 0;  // SO_RCVBUF; 0 = kernel default (autotuned)
};

struct HostPort {
  std::string host;  // without brackets
  uint16_t port = 0;
};

// kInvalidArgument naming the address and the expected form otherwise.
Result<HostPort> ParseHostPort(std::string_view address);
// "1.2.3.4:5", "[::1]:5" (brackets when host contains ':').
std::string FormatHostPort(std::string_view host, uint16_t port);
// The numeric host and port of an AF_INET/AF_INET6 address; host "" for any other family.
HostPort HostPortOf(const sockaddr_storage& address);

// The source a connection counts against in per-source limits (the
// listener's pending handshakes, peer/handshaking_listener.h), from a peer
// address as ByteChannel::peer_address() gives it: the IPv4 address
// ("10.0.0.7:41234" -> "10.0.0.7"; an IPv4-mapped IPv6 address counts as its
// IPv4 address), the /64 prefix of an IPv6 address ("[2001:db8::5]:9" ->
// "2001:db8::/64": one host usually holds a whole /64), the host name
// otherwise. An address that is not "host:port" (an in-memory channel's
// "mem:client-3") is its own source.
std::string PeerSource(std::string_view peer_address);

// Binds and listens (SO_REUSEADDR, backlog 512). Errors name the address:
// kAlreadyExists when the port is taken. The acceptor drops, without an
// error, a connection whose socket options cannot be set (reset already).
Result<std::unique_ptr<ChannelAcceptor>> TcpBind(const std::string& address, const SocketOptions& options);

// Connects within timeout, trying each resolved address in order.
// kUnavailable when refused ("is the peer agent running?"), kTimeout when the
// connect does not complete in time.
Result<std::unique_ptr<ByteChannel>> TcpDial(const std::string& address, Millis timeout,
                                             const SocketOptions& options);

}  // namespace tierckpt::peer
