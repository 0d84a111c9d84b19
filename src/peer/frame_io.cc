#include "peer/frame_io.h"

#include <array>

namespace tierckpt::peer {

Status WriteFrame(ByteChannel& ch, PeerFrameHeader header, std::string_view payload, Millis stall,
                  std::string_view who, const void* data, size_t data_size) {
  header.payload_len = static_cast<uint32_t>(payload.size() + data_size);
  uint8_t head[kPeerFrameHeaderSize];
  EncodePeerHeader(header, head);
  std::array<ConstBuffer, 3> bufs = {ConstBuffer{head, sizeof(head)},
                                     ConstBuffer{payload.data(), payload.size()},
                                     ConstBuffer{data, data_size}};
  Status s = ch.Write(bufs, stall);
  if (!s.ok()) {
    return s.WithContext("sending a " + std::string(FrameKindName(header.kind)) + " frame to " +
                         std::string(who));
  }
  return Status::Ok();
}

Result<PeerFrameHeader> ReadFrameHeader(ByteChannel& ch, Millis first, Millis stall, std::string_view who,
                                        uint16_t version, bool* idle) {
  *idle = false;
  uint8_t head[kPeerFrameHeaderSize];
  size_t got = 0;
  Status s = ch.Read(head, sizeof(head), first, stall, &got);
  if (!s.ok()) {
    if (s.code() == Code::kTimeout && got == 0) {
      *idle = true;
      return Timeout("no message from " + std::string(who) + " within " + std::to_string(first.count()) +
                     " ms");
    }
    return s.WithContext("reading a frame header from " + std::string(who));
  }
  if (got == 0) return Unavailable(std::string(who) + " closed the connection");
  if (got < sizeof(head)) {
    return ProtocolError(std::string(who) + ": truncated frame header: " + std::to_string(got) + " of " +
                         std::to_string(kPeerFrameHeaderSize) + " bytes, then the connection closed");
  }
  return DecodePeerHeader(head, who, version);
}

Status ReadFrameBytes(ByteChannel& ch, void* buf, size_t size, Millis stall, std::string_view who,
                      std::string_view what) {
  size_t got = 0;
  Status s = ch.Read(buf, size, stall, stall, &got);
  if (!s.ok()) return s.WithContext("reading " + std::string(what) + " from " + std::string(who));
  if (got < size) {
    return Unavailable(std::string(who) + " closed the connection after " + std::to_string(got) + " of " +
                       std::to_string(size) + " bytes of " + std::string(what) +
                       " (the peer died or gave up mid-message)");
  }
  return Status::Ok();
}

Result<std::string> ReadPayload(ByteChannel& ch, const PeerFrameHeader& header, Millis stall,
                                std::string_view who) {
  std::string payload(header.payload_len, '\0');
  if (header.payload_len == 0) return payload;
  TC_RETURN_IF_ERROR(
      ReadFrameBytes(ch, payload.data(), payload.size(), stall, who,
                     "the payload of a " + std::string(FrameKindName(header.kind)) + " frame"));
  return payload;
}

}  // namespace tierckpt::peer
