// framed_connection.h — the Connection of every byte-stream transport (TCP,
// in-memory): peer frames (peer_frame.h) on an authenticated ByteChannel.
//
// Sending a chunk is one gathered write of frame header, chunk prefix and the
// caller's bytes (no copy). Receiving a chunk reads its bytes straight into
// the destination, in pieces of at most kReceivePiece, and hashes each piece
// right after it lands (while it is in cache). Every data frame is checked
// against the open stream: object id, offset == bytes so far (in order, no
// gaps), offset + length <= size; StreamEnd must come after exactly size
// bytes and repeat the size. A violation is kProtocolError naming the field.
//
// Contracts and thread safety: transport.h (Connection). Internally one
// mutex guards the closed state; each side's state is owned by its thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "common/checksum.h"
#include "common/mutex.h"
#include "peer/byte_channel.h"
#include "peer/peer_frame.h"
#include "peer/transport.h"

namespace tierckpt::peer {

class FramedConnection final : public Connection {
 public:
  // channel: authenticated (the handshake is done); info: what it proved.
  FramedConnection(std::unique_ptr<ByteChannel> channel, PeerInfo info, ConnectionOptions options);
  ~FramedConnection() override;

  const PeerInfo& peer() const override { return info_; }

  Status Send(const Frame& frame) override;
  Status BeginStream(const StreamHeader& header) override;
  Status SendStreamChunk(const void* data, size_t size) override;
  Status EndStream(Checksum checksum) override;
  Status AbortStream(std::string_view reason) override;
  size_t chunk_bytes() const override { return options_.chunk_bytes; }

  Result<Message> Receive(Millis timeout) override;
  Result<Checksum> ReceiveStreamBody(std::span<uint8_t> dest) override;
  Result<Checksum> ReceiveStreamPieces(const StreamPieceWriter& write) override;
  Status DiscardStream() override;

  void Close() override;
  ConnectionStats stats() const override;

 private:
  // The stream being sent or received.
  struct OpenStream {
    bool open = false;
    uint64_t object_id = 0;
    uint64_t size = 0;
    uint64_t done = 0;  // bytes sent / received so far
    std::string metadata;
  };

  // ok, or kUnavailable naming why the connection is closed.
  Status CheckOpen() const;
  // Records the first fatal error, shuts the channel down, returns status.
  Status Fail(Status status);
  // Writes one frame; a failure is fatal.
  Status WriteOrFail(const PeerFrameHeader& header, std::string_view payload, const void* data = nullptr,
                     size_t data_size = 0);
  // Reads the announced stream to its end into dest, or drops it when dest
  // is null. Returns the received bytes' checksum (dest only).
  Result<Checksum> ReadStreamBody(uint8_t* dest);
  Status ReadData(const PeerFrameHeader& h, uint8_t* dest, Hasher* hasher);
  // "stream 7 \"ns/42/a\" from peer ... (node ...)".
  std::string StreamName(const OpenStream& s) const;

  // Const after construction.
  const std::unique_ptr<ByteChannel> channel_;
  const PeerInfo info_;
  const ConnectionOptions options_;
  const std::string who_;

  // Send side: used by the one sending thread.
  OpenStream send_;
  // Receive side: used by the one receiving thread.
  OpenStream recv_;
  std::unique_ptr<uint8_t[]> scratch_;  // DiscardStream's and ReceiveStreamPieces' buffer
  const StreamPieceWriter* pieces_ = nullptr;  // set during ReceiveStreamPieces

  mutable Mutex mu_;
  Status closed_ GUARDED_BY(mu_);  // ok while open
  bool closed_locally_ GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0}, messages_sent_{0}, messages_received_{0},
      stream_bytes_sent_{0}, stream_bytes_received_{0};
};

}  // namespace tierckpt::peer
