#include "wire/protocol.h"

#include <utility>

#include "wire/le.h"

namespace tierckpt::wire {
namespace {

// Longest error message an agent puts in a response; longer ones are cut so
// a response always fits in one frame.

}  // namespace

std::string_view MsgTypeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
#define TIERCKPT_WIRE_MSG_NAME(name, number, text, Request, Response, limit) \
  case MsgType::name:                                                        \
    return text;
    TIERCKPT_WIRE_MSG_TYPES(TIERCKPT_WIRE_MSG_NAME)
#undef TIERCKPT_WIRE_MSG_NAME
  }
  return "unknown";
}

bool IsKnownRequestType(uint16_t type) { return MsgTypeName(type) != "unknown"; }

uint32_t MaxRequestPayload(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
#define TIERCKPT_WIRE_MSG_LIMIT(name, number, text, Request, Response, limit) \
  case MsgType::name:                                                         \
    return limit;
    TIERCKPT_WIRE_MSG_TYPES(TIERCKPT_WIRE_MSG_LIMIT)
#undef TIERCKPT_WIRE_MSG_LIMIT
  }
  return kMaxSmallRequestPayload;
}

void EncodeHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]) {
  StoreLe(out, h.magic, 4);
  StoreLe(out + 4, h.version, 2);
  StoreLe(out + 6, h.type, 2);
  StoreLe(out + 8, h.request_id, 4);
  StoreLe(out + 12, h.payload_len, 4);
}

Result<FrameHeader> DecodeHeader(const uint8_t in[kFrameHeaderSize]) {
  FrameHeader h;
  h.magic = static_cast<uint32_t>(LoadLe(in, 4));
  h.version = static_cast<uint16_t>(LoadLe(in + 4, 2));
  h.type = static_cast<uint16_t>(LoadLe(in + 6, 2));
  h.request_id = static_cast<uint32_t>(LoadLe(in + 8, 4));
  h.payload_len = static_cast<uint32_t>(LoadLe(in + 12, 4));
  if (h.magic != kFrameMagic) {
    return ProtocolError("frame header: bad magic " + Hex32(h.magic) + " (expected " + Hex32(kFrameMagic) +
                         ", bytes \"TCKP\"); the peer does not speak the tierckpt protocol");
  }
  if (h.version != kProtocolVersion) {
    return ProtocolError("frame header: protocol version " + std::to_string(h.version) +
                         " is not supported (this build speaks version " + std::to_string(kProtocolVersion) +
                         "); run the same tierckpt version on the client and the agent");
  }
  if (h.payload_len > kMaxPayload) {
    return ProtocolError("frame header: payload_len " + std::to_string(h.payload_len) + " exceeds the " +
                         std::to_string(kMaxPayload) + "-byte frame limit");
  }
  return h;
}

Status ValidateWriterId(std::string_view id) {
  if (id.size() > kMaxWriterIdLength) {
    return InvalidArgument("writer id is " + std::to_string(id.size()) + " bytes; the limit is " +
                           std::to_string(kMaxWriterIdLength) + " (set a shorter TIERCKPT_WRITER_ID)");
  }
  for (char c : id) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    std::string_view("_.:@/+=-").find(c) != std::string_view::npos;
    if (!ok) {
      return InvalidArgument("writer id holds a character outside [A-Za-z0-9_.:@/+=-] (byte " +
                             std::to_string(static_cast<unsigned char>(c)) +
                             "); set TIERCKPT_WRITER_ID (or ClientOptions::writer_id) to one that does not");
    }
  }
  return Status::Ok();
}

// ---- Response envelope ----

std::string EncodeResponse(const Status& status, std::string_view body) {
  std::string out =
      ResponseHeader{static_cast<uint32_t>(status.code()), status.ok() ? std::string() : status.message()}
          .Encode();
  if (status.ok()) out.append(body.data(), body.size());
  return out;
}

Result<std::string> DecodeResponse(std::string_view payload) {
  std::string_view body;
  TC_ASSIGN_OR_RETURN(ResponseHeader h, DecodeMessagePrefix<ResponseHeader>(payload, &body));
  if (h.code == 0) return std::string(body);
  // An error carries no body: the whole payload is the header.
  TC_RETURN_IF_ERROR(ResponseHeader::Decode(payload).status().WithContext("error response"));
  Code c = CodeFromNumber(h.code);
  if (c == Code::kInternal && h.code != static_cast<uint32_t>(Code::kInternal)) {
    h.message = "agent sent unknown status code " + std::to_string(h.code) + ": " + h.message;
  }
  return Status(c, std::move(h.message));
}

}  // namespace tierckpt::wire
