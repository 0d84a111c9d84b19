// mem_channel.h — in-process byte channels: a bounded pipe per direction,
// so a writer blocks (with its progress timeout) when the reader falls
// behind, exactly like a TCP socket whose buffers are full.
//
// An InMemoryNetwork is a namespace of addresses shared by every
// InMemoryTransport built on it: Bind("node-a:7000") makes an acceptor there,
// Dial("node-a:7000") connects to it. An address ending in ":0" gets a unique
// number instead of the 0 (like TCP port 0); the acceptor's address() tells
// which. Dialing an address nobody binds is kUnavailable.
//
// Thread safety: InMemoryNetwork is thread-safe; the channels and acceptors
// follow byte_channel.h.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "peer/byte_channel.h"

namespace tierckpt::peer {

class MemAcceptor;

class InMemoryNetwork : public std::enable_shared_from_this<InMemoryNetwork> {
 public:
  // pipe_capacity: bytes each direction buffers before the writer blocks.
  static std::shared_ptr<InMemoryNetwork> Create(size_t pipe_capacity = 256u << 10);

  // kInvalidArgument for an empty address, kAlreadyExists when taken. The
  // address is released when the acceptor shuts down or is destroyed.
  Result<std::unique_ptr<ChannelAcceptor>> Bind(const std::string& address);
  // kUnavailable when nobody binds address or its acceptor is shut down.
  Result<std::unique_ptr<ByteChannel>> Dial(const std::string& address);

  size_t pipe_capacity() const { return pipe_capacity_; }

 private:
  friend class MemAcceptor;
  explicit InMemoryNetwork(size_t pipe_capacity) : pipe_capacity_(pipe_capacity) {}
  void Unbind(const std::string& address, const MemAcceptor* acceptor);

  const size_t pipe_capacity_;
  Mutex mu_;
  std::map<std::string, MemAcceptor*> bound_ GUARDED_BY(mu_);
  uint64_t next_port_ GUARDED_BY(mu_) = 1;
  uint64_t next_client_ GUARDED_BY(mu_) = 1;
};

}  // namespace tierckpt::peer
