#include "peer/transport.h"

#include <algorithm>
#include <optional>

#include "common/names.h"
#include "peer/peer_frame.h"

namespace tierckpt::peer {

std::string Connection::Describe() const {
  const PeerInfo& p = peer();
  if (p.node_id.empty()) return "peer " + p.address;
  return "peer " + p.address + " (node " + p.node_id + ")";
}

Status Connection::SendStream(const StreamHeader& header, const void* data, size_t size) {
  return SendStreamImpl(header, data, size, std::nullopt);
}

Status Connection::SendStreamKnown(const StreamHeader& header, const void* data, size_t size, Checksum known) {
  return SendStreamImpl(header, data, size, known);
}

Status Connection::SendStreamImpl(const StreamHeader& header, const void* data, size_t size,
                                  std::optional<Checksum> known) {
  if (header.size != size) {
    return InvalidArgument("SendStream to " + Describe() + ": header.size " + std::to_string(header.size) +
                           " differs from the " + std::to_string(size) + " bytes given");
  }
  if (size > 0 && data == nullptr) {
    return InvalidArgument("SendStream to " + Describe() + ": data is null for " + std::to_string(size) +
                           " bytes");
  }
  TC_RETURN_IF_ERROR(BeginStream(header));
  const auto* p = static_cast<const uint8_t*>(data);
  size_t step = std::max<size_t>(chunk_bytes(), 1);
  Hasher hasher;
  for (size_t off = 0; off < size; off += step) {
    size_t n = std::min(step, size - off);
    if (!known) hasher.Update(p + off, n);
    TC_RETURN_IF_ERROR(SendStreamChunk(p + off, n));
  }
  return EndStream(known ? *known : hasher.Finish());
}

Result<ReceivedStream> Connection::ReceiveStream(const StreamSink& sink, Millis timeout) {
  TC_ASSIGN_OR_RETURN(Message m, Receive(timeout));
  if (m.kind != Message::Kind::kStream) {
    return ProtocolError("expected a stream from " + Describe() + " but it sent a control message (type " +
                         std::to_string(m.frame.type) + ", request " + std::to_string(m.frame.request_id) +
                         ")");
  }
  Result<std::span<uint8_t>> dest = sink(m.stream);
  if (!dest.ok()) {
    TC_RETURN_IF_ERROR(DiscardStream());
    return dest.status().WithContext("refusing stream " + std::to_string(m.stream.object_id) + " " +
                                     QuoteForMessage(m.stream.metadata) + " from " + Describe());
  }
  Result<Checksum> sum = ReceiveStreamBody(*dest);
  if (!sum.ok()) {
    if (sum.status().code() == Code::kInvalidArgument) TC_RETURN_IF_ERROR(DiscardStream());
    return sum.status();
  }
  return ReceivedStream{std::move(m.stream), *sum};
}

Status ValidateTransportOptions(const TransportOptions& options) {
  Status id = cluster::ValidateNodeId(options.node_id);
  if (!id.ok()) return id.WithContext("peer transport node_id");
  if (options.secret.empty()) {
    return InvalidArgument("the peer transport has no cluster secret; load the same secret (at least " +
                           std::to_string(kMinSecretBytes) + " bytes) on every agent");
  }
  const ConnectionOptions& c = options.connection;
  if (c.chunk_bytes < 1 || c.chunk_bytes > kMaxChunkBytes) {
    return InvalidArgument("peer transport chunk_bytes " + std::to_string(c.chunk_bytes) + " is outside 1.." +
                           std::to_string(kMaxChunkBytes));
  }
  if (c.io_timeout.count() <= 0) return InvalidArgument("peer transport io_timeout must be positive");
  if (options.handshake_timeout.count() <= 0) {
    return InvalidArgument("peer transport handshake_timeout must be positive");
  }
  if (options.max_pending_handshakes < 1 || options.max_pending_handshakes_per_source < 1 ||
      options.max_unaccepted < 1) {
    return InvalidArgument(
        "peer transport max_pending_handshakes, max_pending_handshakes_per_source and max_unaccepted must be at "
        "least 1");
  }
  return Status::Ok();
}

}  // namespace tierckpt::peer
