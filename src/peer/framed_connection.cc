#include "peer/framed_connection.h"

#include <algorithm>
#include <utility>

#include "common/names.h"
#include "peer/frame_io.h"

namespace tierckpt::peer {
namespace {

// Received chunks are read (and hashed) in pieces of this size.
constexpr size_t kReceivePiece = 256u << 10;

std::string DescribePeer(const PeerInfo& p) {
  if (p.node_id.empty()) return "peer " + p.address;
  return "peer " + p.address + " (node " + p.node_id + ")";
}

}  // namespace

FramedConnection::FramedConnection(std::unique_ptr<ByteChannel> channel, PeerInfo info,
                                   ConnectionOptions options)
    : channel_(std::move(channel)), info_(std::move(info)), options_(options), who_(DescribePeer(info_)) {}

FramedConnection::~FramedConnection() { Close(); }

// ---- state ----

Status FramedConnection::CheckOpen() const {
  MutexLock lock(&mu_);
  if (closed_.ok()) return Status::Ok();
  if (closed_locally_)
    return Unavailable("the connection to " + who_ + " is closed (Close was called); reconnect");
  return Unavailable("the connection to " + who_ + " was closed after an earlier error (" +
                     closed_.ToString() + "); reconnect");
}

Status FramedConnection::Fail(Status status) {
  {
    MutexLock lock(&mu_);
    if (closed_.ok()) closed_ = status;
  }
  channel_->Shutdown();
  return status;
}

void FramedConnection::Close() {
  {
    MutexLock lock(&mu_);
    if (closed_.ok()) {
      closed_ = Unavailable("closed locally");
      closed_locally_ = true;
    }
  }
  channel_->Shutdown();
}

ConnectionStats FramedConnection::stats() const {
  ConnectionStats s;
  s.bytes_sent = bytes_sent_.load();
  s.bytes_received = bytes_received_.load();
  s.messages_sent = messages_sent_.load();
  s.messages_received = messages_received_.load();
  s.stream_bytes_sent = stream_bytes_sent_.load();
  s.stream_bytes_received = stream_bytes_received_.load();
  return s;
}

std::string FramedConnection::StreamName(const OpenStream& s) const {
  return "stream " + std::to_string(s.object_id) + " " + QuoteForMessage(s.metadata) + " with " + who_;
}

// ---- send side ----

Status FramedConnection::WriteOrFail(const PeerFrameHeader& header, std::string_view payload,
                                     const void* data, size_t data_size) {
  Status s = WriteFrame(*channel_, header, payload, options_.io_timeout, who_, data, data_size);
  if (!s.ok()) return Fail(s);
  bytes_sent_ += kPeerFrameHeaderSize + payload.size() + data_size;
  return Status::Ok();
}

Status FramedConnection::Send(const Frame& frame) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (send_.open) {
    return FailedPrecondition("Send to " + who_ + " while " + StreamName(send_) +
                              " is open; finish it with EndStream or AbortStream first");
  }
  if (frame.payload.size() > kMaxControlPayload) {
    return InvalidArgument("a control message to " + who_ + " has " + std::to_string(frame.payload.size()) +
                           " bytes; the limit is " + std::to_string(kMaxControlPayload) +
                           " (stream large data instead)");
  }
  PeerFrameHeader h;
  h.version = info_.version;
  h.kind = FrameKind::kControl;
  h.type = frame.type;
  h.request_id = frame.request_id;
  TC_RETURN_IF_ERROR(WriteOrFail(h, frame.payload));
  ++messages_sent_;
  return Status::Ok();
}

Status FramedConnection::BeginStream(const StreamHeader& header) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (send_.open) {
    return FailedPrecondition("BeginStream to " + who_ + " while " + StreamName(send_) +
                              " is open; finish it with EndStream or AbortStream first");
  }
  if (header.metadata.size() > kMaxStreamMetadata) {
    return InvalidArgument("stream metadata for " + who_ + " has " + std::to_string(header.metadata.size()) +
                           " bytes; the limit is " + std::to_string(kMaxStreamMetadata));
  }
  PeerFrameHeader h;
  h.version = info_.version;
  h.kind = FrameKind::kStreamBegin;
  h.type = header.type;
  h.request_id = header.request_id;
  TC_RETURN_IF_ERROR(
      WriteOrFail(h, StreamBeginPayload{header.object_id, header.size, header.metadata}.Encode()));
  send_ = OpenStream{true, header.object_id, header.size, 0, header.metadata};
  return Status::Ok();
}

Status FramedConnection::SendStreamChunk(const void* data, size_t size) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!send_.open)
    return FailedPrecondition("SendStreamChunk to " + who_ + " with no open stream; call BeginStream");
  if (size > send_.size - send_.done) {
    return InvalidArgument(StreamName(send_) + ": a chunk of " + std::to_string(size) + " bytes at offset " +
                           std::to_string(send_.done) + " runs past the stream's size " +
                           std::to_string(send_.size));
  }
  if (size > 0 && data == nullptr) return InvalidArgument(StreamName(send_) + ": chunk data is null");
  const auto* p = static_cast<const uint8_t*>(data);
  size_t step = std::min<size_t>(options_.chunk_bytes, kMaxChunkBytes);
  PeerFrameHeader h;
  h.version = info_.version;
  h.kind = FrameKind::kStreamData;
  for (size_t off = 0; off < size; off += step) {
    size_t n = std::min(step, size - off);
    uint8_t prefix[kStreamDataPrefix];
    StreamDataPrefix{send_.object_id, send_.done, static_cast<uint32_t>(n)}.Encode(prefix);
    std::string_view prefix_view(reinterpret_cast<const char*>(prefix), sizeof(prefix));
    Status s = WriteOrFail(h, prefix_view, p + off, n);
    if (!s.ok()) {
      send_.open = false;
      return s.WithContext(StreamName(send_) + " at offset " + std::to_string(send_.done));
    }
    send_.done += n;
    stream_bytes_sent_ += n;
  }
  return Status::Ok();
}

Status FramedConnection::EndStream(Checksum checksum) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!send_.open) return FailedPrecondition("EndStream to " + who_ + " with no open stream");
  if (send_.done != send_.size) {
    return FailedPrecondition(StreamName(send_) + ": EndStream after " + std::to_string(send_.done) + " of " +
                              std::to_string(send_.size) + " bytes; send the rest or AbortStream");
  }
  PeerFrameHeader h;
  h.version = info_.version;
  h.kind = FrameKind::kStreamEnd;
  send_.open = false;
  TC_RETURN_IF_ERROR(WriteOrFail(h, StreamEndPayload{send_.object_id, send_.size, checksum.value}.Encode()));
  ++messages_sent_;
  return Status::Ok();
}

Status FramedConnection::AbortStream(std::string_view reason) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!send_.open) return FailedPrecondition("AbortStream to " + who_ + " with no open stream");
  PeerFrameHeader h;
  h.version = info_.version;
  h.kind = FrameKind::kStreamAbort;
  send_.open = false;
  return WriteOrFail(h, StreamAbortPayload{send_.object_id, std::string(reason)}.Encode());
}

// ---- receive side ----

Result<Message> FramedConnection::Receive(Millis timeout) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (recv_.open) {
    return FailedPrecondition("Receive from " + who_ + ": " + StreamName(recv_) +
                              " is unread; call ReceiveStreamBody or DiscardStream first");
  }
  bool idle = false;
  Result<PeerFrameHeader> h =
      ReadFrameHeader(*channel_, timeout, options_.io_timeout, who_, info_.version, &idle);
  if (!h.ok()) return idle ? h.status() : Fail(h.status());
  if (h->kind != FrameKind::kControl && h->kind != FrameKind::kStreamBegin) {
    return Fail(ProtocolError(who_ + ": frame header field kind: a " + std::string(FrameKindName(h->kind)) +
                              " frame arrived between messages (only Control and StreamBegin start one)"));
  }
  Result<std::string> payload = ReadPayload(*channel_, *h, options_.io_timeout, who_);
  if (!payload.ok()) return Fail(payload.status());
  bytes_received_ += kPeerFrameHeaderSize + h->payload_len;
  Message m;
  if (h->kind == FrameKind::kControl) {
    ++messages_received_;
    m.kind = Message::Kind::kControl;
    m.frame = Frame{h->type, h->request_id, std::move(*payload)};
    return m;
  }
  Result<StreamBeginPayload> begin = StreamBeginPayload::Decode(*payload);
  if (!begin.ok()) return Fail(ProtocolError(who_ + ": " + begin.status().message()));
  recv_ = OpenStream{true, begin->object_id, begin->size, 0, begin->metadata};
  m.kind = Message::Kind::kStream;
  m.stream = StreamHeader{h->type, h->request_id, begin->object_id, begin->size, std::move(begin->metadata)};
  return m;
}

Result<Checksum> FramedConnection::ReceiveStreamBody(std::span<uint8_t> dest) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!recv_.open)
    return FailedPrecondition("ReceiveStreamBody from " + who_ + " with no announced stream; call Receive");
  if (dest.size() < recv_.size || (recv_.size > 0 && dest.data() == nullptr)) {
    return InvalidArgument(StreamName(recv_) + " has " + std::to_string(recv_.size) +
                           " bytes but the destination holds " + std::to_string(dest.size()) +
                           "; give a large enough buffer or DiscardStream");
  }
  return ReadStreamBody(dest.data());
}

Result<Checksum> FramedConnection::ReceiveStreamPieces(const StreamPieceWriter& write) {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!recv_.open)
    return FailedPrecondition("ReceiveStreamPieces from " + who_ + " with no announced stream; call Receive");
  if (!scratch_) scratch_ = std::make_unique<uint8_t[]>(kReceivePiece);
  pieces_ = &write;
  Result<Checksum> r = ReadStreamBody(nullptr);
  pieces_ = nullptr;
  return r;
}

Status FramedConnection::DiscardStream() {
  TC_RETURN_IF_ERROR(CheckOpen());
  if (!recv_.open) return FailedPrecondition("DiscardStream from " + who_ + " with no announced stream");
  if (!scratch_) scratch_ = std::make_unique<uint8_t[]>(kReceivePiece);
  Result<Checksum> r = ReadStreamBody(nullptr);
  if (!r.ok() && r.status().code() != Code::kAborted) return r.status();
  return Status::Ok();
}

Status FramedConnection::ReadData(const PeerFrameHeader& h, uint8_t* dest, Hasher* hasher) {
  if (h.payload_len <= kStreamDataPrefix) {
    return ProtocolError(who_ + ": frame header field payload_len: a StreamData frame of " +
                         std::to_string(h.payload_len) + " bytes cannot hold its " +
                         std::to_string(kStreamDataPrefix) + "-byte prefix and at least one data byte");
  }
  uint8_t raw[kStreamDataPrefix];
  TC_RETURN_IF_ERROR(ReadFrameBytes(*channel_, raw, sizeof(raw), options_.io_timeout, who_,
                                    "the prefix of a StreamData frame"));
  StreamDataPrefix p = StreamDataPrefix::Decode(raw);
  std::string field = who_ + ": StreamData field ";
  if (p.object_id != recv_.object_id) {
    return ProtocolError(field + "object_id is " + std::to_string(p.object_id) + " inside " +
                         StreamName(recv_));
  }
  if (p.length != h.payload_len - kStreamDataPrefix) {
    return ProtocolError(field + "length " + std::to_string(p.length) +
                         " disagrees with the frame's payload_len " + std::to_string(h.payload_len));
  }
  if (p.offset != recv_.done) {
    return ProtocolError(field + "offset is " + std::to_string(p.offset) + " where " +
                         std::to_string(recv_.done) +
                         " was expected (chunks must arrive in order, without gaps)");
  }
  if (p.length > recv_.size - recv_.done) {
    return ProtocolError(field + "length: a chunk of " + std::to_string(p.length) + " bytes at offset " +
                         std::to_string(p.offset) + " runs past the stream's size " +
                         std::to_string(recv_.size));
  }
  for (size_t off = 0; off < p.length; off += kReceivePiece) {
    size_t n = std::min<size_t>(kReceivePiece, p.length - off);
    uint8_t* to = dest != nullptr ? dest + p.offset + off : scratch_.get();
    TC_RETURN_IF_ERROR(ReadFrameBytes(*channel_, to, n, options_.io_timeout, who_, "stream data"));
    if (hasher != nullptr) hasher->Update(to, n);
    if (dest == nullptr && pieces_ != nullptr) {
      Status written = (*pieces_)(p.offset + off, to, n);
      if (!written.ok()) {
        // The rest of the stream is unread: the connection cannot continue.
        return Fail(written.WithContext("writing " + StreamName(recv_) + " at offset " +
                                        std::to_string(p.offset + off)));
      }
    }
  }
  recv_.done += p.length;
  bytes_received_ += kPeerFrameHeaderSize + h.payload_len;
  stream_bytes_received_ += p.length;
  return Status::Ok();
}

Result<Checksum> FramedConnection::ReadStreamBody(uint8_t* dest) {
  Hasher hasher;
  while (true) {
    bool idle = false;
    Result<PeerFrameHeader> h =
        ReadFrameHeader(*channel_, options_.io_timeout, options_.io_timeout, who_, info_.version, &idle);
    Status s = h.ok() ? Status::Ok() : h.status();
    if (s.ok() && h->kind == FrameKind::kStreamData) {
      s = ReadData(*h, dest, dest != nullptr || pieces_ != nullptr ? &hasher : nullptr);
      if (s.ok()) continue;
    }
    if (!s.ok()) {
      std::string where = StreamName(recv_) + " at offset " + std::to_string(recv_.done) + " of " +
                          std::to_string(recv_.size);
      recv_.open = false;
      if (s.code() == Code::kTimeout) {
        return Fail(Timeout(where + ": the sender stalled (no data for " +
                            std::to_string(options_.io_timeout.count()) + " ms)"));
      }
      return Fail(s.WithContext(where));
    }
    if (h->kind != FrameKind::kStreamEnd && h->kind != FrameKind::kStreamAbort) {
      recv_.open = false;
      return Fail(ProtocolError(who_ + ": frame header field kind: a " + std::string(FrameKindName(h->kind)) +
                                " frame arrived inside " + StreamName(recv_) +
                                " (only StreamData, StreamEnd and StreamAbort may)"));
    }
    Result<std::string> payload = ReadPayload(*channel_, *h, options_.io_timeout, who_);
    if (!payload.ok()) {
      recv_.open = false;
      return Fail(payload.status());
    }
    bytes_received_ += kPeerFrameHeaderSize + h->payload_len;
    OpenStream s_done = recv_;
    recv_.open = false;
    if (h->kind == FrameKind::kStreamAbort) {
      Result<StreamAbortPayload> abort = StreamAbortPayload::Decode(*payload);
      if (!abort.ok()) return Fail(ProtocolError(who_ + ": " + abort.status().message()));
      if (abort->object_id != s_done.object_id) {
        return Fail(ProtocolError(who_ + ": StreamAbort field object_id is " +
                                  std::to_string(abort->object_id) + " inside " + StreamName(s_done)));
      }
      return Aborted(StreamName(s_done) + " was aborted by the sender at offset " +
                     std::to_string(s_done.done) + ": " + abort->reason);
    }
    Result<StreamEndPayload> end = StreamEndPayload::Decode(*payload);
    if (!end.ok()) return Fail(ProtocolError(who_ + ": " + end.status().message()));
    if (end->object_id != s_done.object_id || end->size != s_done.size || s_done.done != s_done.size) {
      return Fail(
          ProtocolError(who_ + ": StreamEnd fields object_id/size (" + std::to_string(end->object_id) + ", " +
                        std::to_string(end->size) + ") do not close " + StreamName(s_done) + " after " +
                        std::to_string(s_done.done) + " of " + std::to_string(s_done.size) + " bytes"));
    }
    ++messages_received_;
    Checksum sent{end->checksum};
    if (dest == nullptr && pieces_ == nullptr) return sent;  // discarded
    Checksum got = hasher.Finish();
    if (got != sent) {
      return Corruption(
          StreamName(s_done) + ": the " + std::to_string(s_done.size) + " received bytes hash to " +
          got.ToString() + " but the sender's checksum is " + sent.ToString() +
          "; the bytes were damaged on the way, so the destination holds bad data: discard it and "
          "fetch the object again");
    }
    return got;
  }
}

}  // namespace tierckpt::peer
