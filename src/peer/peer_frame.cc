#include "peer/peer_frame.h"

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

bool IsKnownKind(uint8_t kind) {
  return kind >= static_cast<uint8_t>(FrameKind::kHello) &&
         kind <= static_cast<uint8_t>(FrameKind::kStreamAbort);
}

std::string CutMessage(std::string_view m) { return std::string(m.substr(0, kMaxRejectMessage)); }

// Reads a string field and checks its length against a bound.
Status BoundedStr(wire::Decoder& d, std::string* v, std::string_view field, size_t max) {
  TC_RETURN_IF_ERROR(d.Str(v, field));
  if (v->size() > max) {
    return ProtocolError("payload field " + std::string(field) + " has " + std::to_string(v->size()) +
                         " bytes; the limit is " + std::to_string(max));
  }
  return Status::Ok();
}

}  // namespace

std::string_view FrameKindName(FrameKind kind) {
  switch (kind) {
    case FrameKind::kHello:
      return "Hello";
    case FrameKind::kProof:
      return "Proof";
    case FrameKind::kReady:
      return "Ready";
    case FrameKind::kReject:
      return "Reject";
    case FrameKind::kControl:
      return "Control";
    case FrameKind::kStreamBegin:
      return "StreamBegin";
    case FrameKind::kStreamData:
      return "StreamData";
    case FrameKind::kStreamEnd:
      return "StreamEnd";
    case FrameKind::kStreamAbort:
      return "StreamAbort";
  }
  return "unknown";
}

uint32_t MaxPayloadFor(FrameKind kind) {
  switch (kind) {
    case FrameKind::kHello:
    case FrameKind::kProof:
    case FrameKind::kReady:
    case FrameKind::kReject:
    case FrameKind::kStreamAbort:
      return kMaxHandshakePayload;
    case FrameKind::kControl:
      return kMaxControlPayload;
    case FrameKind::kStreamBegin:
      return kMaxStreamMetadata + 20;
    case FrameKind::kStreamData:
      return kStreamDataPrefix + kMaxChunkBytes;
    case FrameKind::kStreamEnd:
      return kStreamEndPayload;
  }
  return 0;
}

std::string_view RoleName(Role role) { return role == Role::kClient ? "client" : "server"; }

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
                           ", bytes \"TCPR\"); the peer does not speak the tierckpt peer protocol — "
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

std::string HelloPayload::Encode() const {
  wire::Encoder e;
  e.U8(static_cast<uint8_t>(role));
  e.U16(min_version);
  e.U16(max_version);
  e.Str(node_id);
  e.Str(nonce);
  return e.Take();
}

Result<HelloPayload> HelloPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  HelloPayload h;
  uint8_t role = 0;
  TC_RETURN_IF_ERROR(d.U8(&role, "Hello.role"));
  if (role != static_cast<uint8_t>(Role::kClient) && role != static_cast<uint8_t>(Role::kServer)) {
    return ProtocolError("payload field Hello.role holds " + std::to_string(role) + " (1 client, 2 server)");
  }
  h.role = static_cast<Role>(role);
  TC_RETURN_IF_ERROR(d.U16(&h.min_version, "Hello.min_version"));
  TC_RETURN_IF_ERROR(d.U16(&h.max_version, "Hello.max_version"));
  if (h.min_version > h.max_version) {
    return ProtocolError("payload fields Hello.min_version " + std::to_string(h.min_version) +
                         " > Hello.max_version " + std::to_string(h.max_version));
  }
  TC_RETURN_IF_ERROR(BoundedStr(d, &h.node_id, "Hello.node_id", kMaxNodeIdLength));
  Status valid = cluster::ValidateNodeId(h.node_id);
  if (!valid.ok()) return ProtocolError("payload field Hello.node_id: " + valid.message());
  TC_RETURN_IF_ERROR(BoundedStr(d, &h.nonce, "Hello.nonce", kNonceSize));
  if (h.nonce.size() != kNonceSize) {
    return ProtocolError("payload field Hello.nonce has " + std::to_string(h.nonce.size()) +
                         " bytes; it must have " + std::to_string(kNonceSize));
  }
  TC_RETURN_IF_ERROR(d.Finish());
  return h;
}

std::string ProofPayload::Encode() const {
  wire::Encoder e;
  e.Str(mac);
  return e.Take();
}

Result<ProofPayload> ProofPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  ProofPayload r;
  TC_RETURN_IF_ERROR(BoundedStr(d, &r.mac, "Proof.mac", kMacSize));
  if (!r.mac.empty() && r.mac.size() != kMacSize) {
    return ProtocolError("payload field Proof.mac has " + std::to_string(r.mac.size()) +
                         " bytes; it must have " + std::to_string(kMacSize) + " (or 0: no secret)");
  }
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string RejectPayload::Encode() const {
  wire::Encoder e;
  e.U32(code);
  e.Str(CutMessage(message));
  return e.Take();
}

Result<RejectPayload> RejectPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  RejectPayload r;
  TC_RETURN_IF_ERROR(d.U32(&r.code, "Reject.code"));
  TC_RETURN_IF_ERROR(BoundedStr(d, &r.message, "Reject.message", kMaxRejectMessage));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string StreamBeginPayload::Encode() const {
  wire::Encoder e;
  e.U64(object_id);
  e.U64(size);
  e.Str(metadata);
  return e.Take();
}

Result<StreamBeginPayload> StreamBeginPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  StreamBeginPayload r;
  TC_RETURN_IF_ERROR(d.U64(&r.object_id, "StreamBegin.object_id"));
  TC_RETURN_IF_ERROR(d.U64(&r.size, "StreamBegin.size"));
  TC_RETURN_IF_ERROR(BoundedStr(d, &r.metadata, "StreamBegin.metadata", kMaxStreamMetadata));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

void StreamDataPrefix::Encode(uint8_t out[kStreamDataPrefix]) const {
  StoreLe(out, object_id, 8);
  StoreLe(out + 8, offset, 8);
  StoreLe(out + 16, length, 4);
}

StreamDataPrefix StreamDataPrefix::Decode(const uint8_t in[kStreamDataPrefix]) {
  StreamDataPrefix r;
  r.object_id = LoadLe(in, 8);
  r.offset = LoadLe(in + 8, 8);
  r.length = static_cast<uint32_t>(LoadLe(in + 16, 4));
  return r;
}

std::string StreamEndPayload::Encode() const {
  wire::Encoder e;
  e.U64(object_id);
  e.U64(size);
  e.U64(checksum);
  return e.Take();
}

Result<StreamEndPayload> StreamEndPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  StreamEndPayload r;
  TC_RETURN_IF_ERROR(d.U64(&r.object_id, "StreamEnd.object_id"));
  TC_RETURN_IF_ERROR(d.U64(&r.size, "StreamEnd.size"));
  TC_RETURN_IF_ERROR(d.U64(&r.checksum, "StreamEnd.checksum"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string StreamAbortPayload::Encode() const {
  wire::Encoder e;
  e.U64(object_id);
  e.Str(CutMessage(reason));
  return e.Take();
}

Result<StreamAbortPayload> StreamAbortPayload::Decode(std::string_view p) {
  wire::Decoder d(p);
  StreamAbortPayload r;
  TC_RETURN_IF_ERROR(d.U64(&r.object_id, "StreamAbort.object_id"));
  TC_RETURN_IF_ERROR(BoundedStr(d, &r.reason, "StreamAbort.reason", kMaxRejectMessage));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

}  // namespace tierckpt::peer
