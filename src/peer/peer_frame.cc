#include "peer/peer_frame.h"

#include <type_traits>
#include <utility>

#include "common/names.h"
#include "wire/le.h"
#include "wire/protocol.h"

namespace tierckpt::peer {
namespace {

using wire::Hex32;
using wire::LoadLe;
using wire::StoreLe;

Status HeaderError(std::string_view who, std::string_view field, const std::string& detail) {
  return ProtocolError(std::string(who) + ": frame header field " + std::string(field) + ": " + detail);
}

bool IsKnownKind(uint8_t kind) { return FrameKindName(static_cast<FrameKind>(kind)) != "unknown"; }

}  // namespace

std::string_view FrameKindName(FrameKind kind) {
  switch (kind) {
#define TIERCKPT_PEER_KIND_NAME(name, number, text, Payload, limit) \
  case FrameKind::name:                                             \
    return text;
    TIERCKPT_PEER_FRAME_KINDS(TIERCKPT_PEER_KIND_NAME)
#undef TIERCKPT_PEER_KIND_NAME
  }
  return "unknown";
}

uint32_t MaxPayloadFor(FrameKind kind) {
  switch (kind) {
#define TIERCKPT_PEER_KIND_LIMIT(name, number, text, Payload, limit) \
  case FrameKind::name:                                              \
    return limit;
    TIERCKPT_PEER_FRAME_KINDS(TIERCKPT_PEER_KIND_LIMIT)
#undef TIERCKPT_PEER_KIND_LIMIT
  }
  return 0;
}

std::string_view RoleName(Role role) {
  switch (role) {
#define TIERCKPT_PEER_ROLE_NAME(name, number, text) \
  case Role::name:                                  \
    return text;
    TIERCKPT_PEER_ROLES(TIERCKPT_PEER_ROLE_NAME)
#undef TIERCKPT_PEER_ROLE_NAME
  }
  return "unknown";
}

void EncodePeerHeader(const PeerFrameHeader& h, uint8_t out[kPeerFrameHeaderSize]) {
  StoreLe(out, h.magic, 4);
  StoreLe(out + 4, h.version, 2);
  out[6] = static_cast<uint8_t>(h.kind);
  out[7] = h.flags;
  StoreLe(out + 8, h.type, 2);
  StoreLe(out + 10, h.reserved, 2);
  StoreLe(out + 12, h.request_id, 4);
  StoreLe(out + 16, h.payload_len, 4);
}

Result<PeerFrameHeader> DecodePeerHeader(const uint8_t in[kPeerFrameHeaderSize], std::string_view who,
                                         uint16_t expected_version) {
  PeerFrameHeader h;
  h.magic = static_cast<uint32_t>(LoadLe(in, 4));
  h.version = static_cast<uint16_t>(LoadLe(in + 4, 2));
  uint8_t kind = in[6];
  h.flags = in[7];
  h.type = static_cast<uint16_t>(LoadLe(in + 8, 2));
  h.reserved = static_cast<uint16_t>(LoadLe(in + 10, 2));
  h.request_id = static_cast<uint32_t>(LoadLe(in + 12, 4));
  h.payload_len = static_cast<uint32_t>(LoadLe(in + 16, 4));
  if (h.magic != kPeerFrameMagic) {
    return HeaderError(who, "magic",
                       "bad magic " + Hex32(h.magic) + " (expected " + Hex32(kPeerFrameMagic) +
                           ", bytes \"TCPR\"); the peer does not speak the tierckpt peer "
                           "protocol — "
                           "check that the address is a tierckpt agent's peer port");
  }
  if (h.version != expected_version) {
    return HeaderError(who, "version",
                       "version " + std::to_string(h.version) + " where " + std::to_string(expected_version) +
                           " was expected; run the same tierckpt version on every node");
  }
  if (!IsKnownKind(kind)) {
    return HeaderError(who, "kind", "unknown frame kind " + std::to_string(kind));
  }
  h.kind = static_cast<FrameKind>(kind);
  if (h.flags != 0) {
    return HeaderError(who, "flags", "flags " + std::to_string(h.flags) + " set; they must be 0");
  }
  if (h.reserved != 0) {
    return HeaderError(who, "reserved",
                       "reserved bytes hold " + std::to_string(h.reserved) + "; they must be 0");
  }
  if (h.type != 0 && h.kind != FrameKind::kControl && h.kind != FrameKind::kStreamBegin) {
    return HeaderError(who, "type",
                       "type " + std::to_string(h.type) + " on a " + std::string(FrameKindName(h.kind)) +
                           " frame; only Control and StreamBegin frames carry a type");
  }
  if (h.payload_len > MaxPayloadFor(h.kind)) {
    return HeaderError(who, "payload_len",
                       "a " + std::string(FrameKindName(h.kind)) + " frame declares " +
                           std::to_string(h.payload_len) + " payload bytes, above its limit of " +
                           std::to_string(MaxPayloadFor(h.kind)));
  }
  return h;
}

// ---- payloads ----

void Put(wire::Encoder& e, NodeIdStr, const std::string& v) { e.Str(v); }

Status Get(wire::Decoder& d, NodeIdStr, std::string* v, std::string_view field) {
  TC_RETURN_IF_ERROR(d.Str(v, field, kMaxNodeIdLength));
  Status valid = cluster::ValidateNodeId(*v);
  if (!valid.ok()) return ProtocolError("payload field " + d.FieldName(field) + ": " + valid.message());
  return Status::Ok();
}

Status HelloPayload::CheckDecoded() const {
  if (min_version > max_version) {
    return ProtocolError("payload fields Hello.min_version " + std::to_string(min_version) +
                         " > Hello.max_version " + std::to_string(max_version));
  }
  return Status::Ok();
}

void StreamDataPrefix::Encode(uint8_t out[kStreamDataPrefix]) const {
  size_t at = 0;
  ForEachField([&](std::string_view, auto value, const auto& codec) {
    StoreLe(out + at, value, codec.kMinBytes);
    at += codec.kMinBytes;
  });
}

StreamDataPrefix StreamDataPrefix::Decode(const uint8_t in[kStreamDataPrefix]) {
  StreamDataPrefix r;
  size_t at = 0;
  r.ForEachField([&](std::string_view, auto& value, const auto& codec) {
    value = static_cast<std::remove_reference_t<decltype(value)>>(LoadLe(in + at, codec.kMinBytes));
    at += codec.kMinBytes;
  });
  return r;
}

}  // namespace tierckpt::peer
