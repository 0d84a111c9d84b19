// byte_channel.h — the raw, unauthenticated byte pipe under a peer
// connection, and the acceptor that yields them.
//
// TCP sockets (peer/tcp_socket.h) and in-process pipes (peer/mem_channel.h)
// implement these; the handshake (peer/handshake.h) and the framing
// (peer/framed_connection.h) are written once on top. Tests use channels
// directly to speak malformed or unauthenticated protocol.
//
// Timeouts are progress timeouts: a Read or Write fails with kTimeout when no
// byte moved for the given time, so a large transfer never times out while the
// peer keeps up, and a stalled peer is detected within one timeout.
//
// Thread safety: a ByteChannel may be read by one thread and written by
// another at the same time; Shutdown() is safe from any thread and wakes both.
// A ChannelAcceptor's Accept() runs on one thread; Shutdown() is safe from
// any thread and wakes it.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "tierckpt/status.h"

namespace tierckpt::peer {

using Millis = std::chrono::milliseconds;

// now + wait, with wait clamped to [0, one year] so that "wait a very long
// time" (Millis::max()) cannot overflow the clock.
inline std::chrono::steady_clock::time_point DeadlineAfter(Millis wait) {
  constexpr Millis kLongest{365LL * 24 * 3600 * 1000};
  if (wait.count() < 0) wait = Millis(0);
  if (wait > kLongest) wait = kLongest;
  return std::chrono::steady_clock::now() + wait;
}

struct ConstBuffer {
  const void* data = nullptr;
  size_t size = 0;
};

class ByteChannel {
 public:
  virtual ~ByteChannel() = default;

  // Writes every byte of bufs, in order, from the caller's memory (no copy in
  // the TCP case). Waits at most `stall` each time for the peer to take more
  // bytes: kTimeout "no progress for N ms" otherwise. kUnavailable when the
  // peer closed its end or Shutdown() ran. After a failure the number of
  // bytes written is unknown: the caller must treat the channel as broken.
  virtual Status Write(std::span<const ConstBuffer> bufs, Millis stall) = 0;

  // Reads exactly size bytes into buf. Waits up to `first` for the first
  // byte, then at most `stall` between pieces. *got is set to the bytes read
  // (also on failure). A clean end of stream stops early: ok with *got < size.
  // kTimeout when a wait expires; kUnavailable after Shutdown().
  virtual Status Read(void* buf, size_t size, Millis first, Millis stall, size_t* got) = 0;

  // Closes both directions: blocked and later calls fail with kUnavailable;
  // the peer reads what was sent, then end of stream. Idempotent.
  virtual void Shutdown() = 0;

  // The far end, for messages: "127.0.0.1:41234", "[::1]:7000", "mem:client-3".
  virtual const std::string& peer_address() const = 0;
};

class ChannelAcceptor {
 public:
  virtual ~ChannelAcceptor() = default;

  // Blocks until a peer connects and returns its channel; kAborted once
  // Shutdown() has run. Other failures (e.g. out of fds) are returned as is;
  // the acceptor stays usable.
  virtual Result<std::unique_ptr<ByteChannel>> Accept() = 0;

  // Stops accepting and wakes Accept(); new peers are refused. Idempotent.
  virtual void Shutdown() = 0;

  // The bound address with its real port ("127.0.0.1:41234" for "127.0.0.1:0").
  virtual const std::string& address() const = 0;
};

}  // namespace tierckpt::peer
