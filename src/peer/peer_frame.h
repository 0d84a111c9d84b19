// peer_frame.h — the wire format of the peer protocol between node agents.
//
// docs/peer-protocol.md is the user-facing copy of this. Every message is one
// frame: a fixed 20-byte header, then payload_len bytes of payload.
//
//   offset size field
//   0      4    magic        0x52504354 little-endian (bytes "TCPR")
//   4      2    version      kPeerProtocolVersion (handshake frames: always 1)
//   6      1    kind         FrameKind
//   7      1    flags        0 (reserved; anything else is a protocol error)
//   8      2    type         application message type (Control, StreamBegin);
//                            0 in every other kind
//   10     2    reserved     0
//   12     4    request_id   chosen by the application; echoed by replies
//   16     4    payload_len  <= MaxPayloadFor(kind)
//
// All integers are little-endian. Payloads are messages declared once
// (wire/message.h): each frame kind below is one line of
// TIERCKPT_PEER_FRAME_KINDS (number, name, payload message, size limit) and
// each payload one field list, from which the encoders, decoders, names,
// limits, the golden test (peer_frame_golden_test.cc) and the fuzz seeds
// (tests/fuzz/make_corpus.cc) follow. The header is checked before
// any payload byte is read or allocated, with a per-kind size limit, so an
// oversized or malformed frame costs nothing and is answered with
// kProtocolError naming the peer and the field.
//
// Payloads by kind:
//   kHello       u8 role (1 client, 2 server), u16 min_version,
//                u16 max_version, str node_id, str nonce (exactly 32 bytes)
//   kProof       str mac (32 bytes of HMAC-SHA256; empty = "no secret")
//   kReady       empty: the client accepted the server's proof
//   kReject      u32 status code, str message (<= kMaxRejectMessage bytes)
//   kControl     application bytes (<= kMaxControlPayload)
//   kStreamBegin u64 object_id, u64 size, str metadata (<= kMaxStreamMetadata)
//   kStreamData  u64 object_id, u64 offset, u32 length, then length bytes
//                (payload_len == kStreamDataPrefix + length, length >= 1)
//   kStreamEnd   u64 object_id, u64 size, u64 checksum (XXH3-64, seed 0)
//   kStreamAbort u64 object_id, str reason (<= kMaxRejectMessage bytes)
//
// Thread safety: the functions are pure; the structs are plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/address.h"
#include "tierckpt/status.h"
#include "wire/message.h"

namespace tierckpt::peer {

inline constexpr uint32_t kPeerFrameMagic = 0x52504354;  // "TCPR"
inline constexpr uint16_t kPeerProtocolVersion = 1;
// The range this build speaks; the handshake picks the highest common one.
inline constexpr uint16_t kMinPeerProtocolVersion = 1;
inline constexpr uint16_t kMaxPeerProtocolVersion = 1;
inline constexpr size_t kPeerFrameHeaderSize = 20;

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kMacSize = 32;
inline constexpr uint32_t kMaxHandshakePayload = 4096;
inline constexpr uint32_t kMaxRejectMessage = 1024;
// Large enough for the biggest manifest (64 MiB) plus its envelope.
inline constexpr uint32_t kMaxControlPayload = 80u << 20;
inline constexpr uint32_t kMaxStreamMetadata = 64u << 10;
// Largest data chunk one StreamData frame may carry.
inline constexpr uint32_t kMaxChunkBytes = 16u << 20;
inline constexpr uint32_t kStreamDataPrefix = 20;  // object_id, offset, length
inline constexpr uint32_t kStreamEndPayload = 24;  // object_id, size, checksum
// Longest node id; node ids are 1..255 bytes of printable ASCII (0x21..0x7e)
// other than '"' and '\\', like the agent's --node-id.
inline constexpr size_t kMaxNodeIdLength = cluster::kMaxNodeIdLength;

// X(kind, number, name, payload message (void: application bytes), payload
// limit). Numbers are part of the protocol: never renumber, only append.
#define TIERCKPT_PEER_FRAME_KINDS(X)                                                                        \
  X(kHello, 1, "Hello", HelloPayload, kMaxHandshakePayload)                                                 \
  X(kProof, 2, "Proof", ProofPayload, kMaxHandshakePayload)                                                 \
  X(kReady, 3, "Ready", wire::Empty, kMaxHandshakePayload)                                                  \
  X(kReject, 4, "Reject", RejectPayload, kMaxHandshakePayload)                                              \
  X(kControl, 5, "Control", void, kMaxControlPayload)                                                       \
  X(kStreamBegin, 6, "StreamBegin", StreamBeginPayload, kMaxStreamMetadata + StreamBeginPayload::kMinBytes) \
  X(kStreamData, 7, "StreamData", StreamDataPrefix, kStreamDataPrefix + kMaxChunkBytes)                     \
  X(kStreamEnd, 8, "StreamEnd", StreamEndPayload, kStreamEndPayload)                                        \
  X(kStreamAbort, 9, "StreamAbort", StreamAbortPayload, kMaxHandshakePayload)

enum class FrameKind : uint8_t {
#define TIERCKPT_PEER_KIND_ENUM(name, number, text, Payload, limit) name = number,
  TIERCKPT_PEER_FRAME_KINDS(TIERCKPT_PEER_KIND_ENUM)
#undef TIERCKPT_PEER_KIND_ENUM
};
// "Hello", "StreamData", ...; "unknown" otherwise.
std::string_view FrameKindName(FrameKind kind);
// The largest payload_len a frame of this kind may declare.
uint32_t MaxPayloadFor(FrameKind kind);

// Which end of a connection a Hello comes from: X(name, number, text).
#define TIERCKPT_PEER_ROLES(X) \
  X(kClient, 1, "client")      \
  X(kServer, 2, "server")
enum class Role : uint8_t {
#define TIERCKPT_PEER_ROLE_ENUM(name, number, text) name = number,
  TIERCKPT_PEER_ROLES(TIERCKPT_PEER_ROLE_ENUM)
#undef TIERCKPT_PEER_ROLE_ENUM
};
std::string_view RoleName(Role role);  // "client" / "server"; "unknown" otherwise

struct PeerFrameHeader {
  uint32_t magic = kPeerFrameMagic;
  uint16_t version = kPeerProtocolVersion;
  FrameKind kind = FrameKind::kControl;
  uint8_t flags = 0;
  uint16_t type = 0;
  uint16_t reserved = 0;
  uint32_t request_id = 0;
  uint32_t payload_len = 0;
};

void EncodePeerHeader(const PeerFrameHeader& h, uint8_t out[kPeerFrameHeaderSize]);
// Checks magic, version (== expected_version), kind, flags, reserved and
// payload_len <= MaxPayloadFor(kind). On failure: kProtocolError
// "<who>: frame header field <field>: ..." where who names the peer, e.g.
// "peer 10.0.0.2:7100 (node n2)".
Result<PeerFrameHeader> DecodePeerHeader(const uint8_t in[kPeerFrameHeaderSize], std::string_view who,
                                         uint16_t expected_version = kPeerProtocolVersion);

// Node ids follow cluster::ValidateNodeId (src/cluster/address.h):
// [A-Za-z0-9_.-]{1,128}, the rule placements and hostfiles use.

// ---- payloads, declared once; Decode fails with kProtocolError naming the
// field ---- F(type, member, default, codec); wire/message.h.

// A node id: a string of at most kMaxNodeIdLength bytes that
// cluster::ValidateNodeId accepts.
struct NodeIdStr {
  static constexpr size_t kMinBytes = 4;
};
void Put(wire::Encoder& e, NodeIdStr, const std::string& v);
Status Get(wire::Decoder& d, NodeIdStr, std::string* v, std::string_view field);

// role: who speaks; min_version..max_version: the versions it speaks
// (min <= max, checked); nonce: kNonceSize random bytes.
#define TIERCKPT_PEER_HELLO_PAYLOAD(F)                                           \
  F(Role, role, Role::kClient, wire::EnumU8<Role>(Role::kClient, Role::kServer)) \
  F(uint16_t, min_version, kMinPeerProtocolVersion, wire::U16())                 \
  F(uint16_t, max_version, kMaxPeerProtocolVersion, wire::U16())                 \
  F(std::string, node_id, {}, NodeIdStr())                                       \
  F(std::string, nonce, {}, wire::FixedStr(kNonceSize))
TIERCKPT_WIRE_MESSAGE(HelloPayload, "Hello", TIERCKPT_PEER_HELLO_PAYLOAD, Status CheckDecoded() const;);

// mac: kMacSize bytes of HMAC-SHA256, or empty: the peer has no secret.
#define TIERCKPT_PEER_PROOF_PAYLOAD(F) F(std::string, mac, {}, wire::FixedStr(kMacSize, /*allow_empty=*/true))
TIERCKPT_WIRE_MESSAGE(ProofPayload, "Proof", TIERCKPT_PEER_PROOF_PAYLOAD);

// Reject and StreamAbort both carry a Status; messages are cut to
// kMaxRejectMessage bytes by Encode, and longer ones are refused by Decode.
#define TIERCKPT_PEER_REJECT_PAYLOAD(F) \
  F(uint32_t, code, 0, wire::U32())     \
  F(std::string, message, {}, wire::Str(kMaxRejectMessage, /*cut=*/kMaxRejectMessage))
TIERCKPT_WIRE_MESSAGE(RejectPayload, "Reject", TIERCKPT_PEER_REJECT_PAYLOAD);

#define TIERCKPT_PEER_STREAM_BEGIN_PAYLOAD(F) \
  F(uint64_t, object_id, 0, wire::U64())      \
  F(uint64_t, size, 0, wire::U64())           \
  F(std::string, metadata, {}, wire::Str(kMaxStreamMetadata))
TIERCKPT_WIRE_MESSAGE(StreamBeginPayload, "StreamBegin", TIERCKPT_PEER_STREAM_BEGIN_PAYLOAD);

// Only the fixed prefix; the data follows it in the same frame, so it is
// encoded into a fixed buffer rather than a string.
#define TIERCKPT_PEER_STREAM_DATA_PREFIX(F) \
  F(uint64_t, object_id, 0, wire::U64())    \
  F(uint64_t, offset, 0, wire::U64())       \
  F(uint32_t, length, 0, wire::U32())
struct StreamDataPrefix {
  TIERCKPT_WIRE_FIELDS(StreamDataPrefix, "StreamData", TIERCKPT_PEER_STREAM_DATA_PREFIX)
  void Encode(uint8_t out[kStreamDataPrefix]) const;
  static StreamDataPrefix Decode(const uint8_t in[kStreamDataPrefix]);
};
static_assert(StreamDataPrefix::kMinBytes == kStreamDataPrefix);

#define TIERCKPT_PEER_STREAM_END_PAYLOAD(F) \
  F(uint64_t, object_id, 0, wire::U64())    \
  F(uint64_t, size, 0, wire::U64())         \
  F(uint64_t, checksum, 0, wire::U64())
TIERCKPT_WIRE_MESSAGE(StreamEndPayload, "StreamEnd", TIERCKPT_PEER_STREAM_END_PAYLOAD);
static_assert(StreamEndPayload::kMinBytes == kStreamEndPayload);

#define TIERCKPT_PEER_STREAM_ABORT_PAYLOAD(F) \
  F(uint64_t, object_id, 0, wire::U64())      \
  F(std::string, reason, {}, wire::Str(kMaxRejectMessage, /*cut=*/kMaxRejectMessage))
TIERCKPT_WIRE_MESSAGE(StreamAbortPayload, "StreamAbort", TIERCKPT_PEER_STREAM_ABORT_PAYLOAD);

}  // namespace tierckpt::peer
