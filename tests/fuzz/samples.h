// samples.h — one populated instance of any declared message, built from its
// declaration (wire/message.h) alone, and the decoders the peer fuzz target
// runs. make_corpus writes its seeds from these, so a field or a message added
// to a declaration gets a seed without anyone writing one.
//
// A field's sample depends on its codec and its name: integers a fixed
// non-zero value, bools true, enums their highest number, strings a realistic
// value for the names the protocols use ("namespace", "name", "checksum",
// "node_id", "json") or the field's name, fixed-size strings that many bytes.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "peer/peer_frame.h"
#include "peer/peer_messages.h"
#include "wire/message.h"
#include "wire/protocol.h"

namespace tierckpt::fuzz {

inline std::string SampleString(std::string_view field) {
  if (field == "namespace") return "job-1";
  if (field == "name") return "model/__0_0.distcp";
  if (field == "checksum") return "xxh3-64:0123456789abcdef";
  if (field == "node_id" || field == "origin") return "node-a";
  if (field == "json") {
    return "{\"steps\":[{\"namespace\":\"job-1\",\"step\":1200,\"bytes\":10,"
           "\"objects\":1,\"memory\":\"committed\",\"durable\":\"pending\"}]}";
  }
  return std::string(field);
}

inline void SampleValue(wire::U8, std::string_view, uint8_t* v) { *v = 1; }
inline void SampleValue(wire::U16, std::string_view, uint16_t* v) { *v = 1; }
inline void SampleValue(wire::U32, std::string_view, uint32_t* v) { *v = 4; }
inline void SampleValue(wire::U64, std::string_view, uint64_t* v) { *v = 1200; }
inline void SampleValue(wire::Bool, std::string_view, bool* v) { *v = true; }
inline void SampleValue(wire::Str c, std::string_view f, std::string* v) {
  *v = SampleString(f);
  if (v->size() > c.max) v->resize(c.max);
}
inline void SampleValue(wire::FixedStr c, std::string_view, std::string* v) { *v = std::string(c.size, 'x'); }
inline void SampleValue(peer::NodeIdStr, std::string_view, std::string* v) { *v = "node-a"; }
inline void SampleValue(wire::StrList, std::string_view f, std::vector<std::string>* v) {
  *v = {SampleString(f) + "-0", SampleString(f) + "-1"};
}
inline void SampleValue(wire::U64List, std::string_view, std::vector<uint64_t>* v) { *v = {1, 5, 1200}; }
template <typename E>
void SampleValue(wire::EnumU8<E> c, std::string_view, E* v) {
  *v = c.max;
}

template <typename M>
M Sample() {
  M m;
  m.ForEachField(
      [](std::string_view field, auto& value, const auto& codec) { SampleValue(codec, field, &value); });
  return m;
}

// ---- the decoders of fuzz_peer_messages ----
// The first byte of an input, modulo kPeerDecoderCount, picks one: first one
// per PeerMsg (TIERCKPT_PEER_MSGS order), then one per frame kind
// (TIERCKPT_PEER_FRAME_KINDS order). Each checks its properties with abort().

inline void Check(bool condition) {
  if (!condition) std::abort();
}

// Decodes; a payload that decodes re-encodes to itself.
template <typename M>
void RoundTrip(std::string_view payload) {
  Result<M> r = M::Decode(payload);
  if (!r.ok()) return Check(r.status().code() == Code::kProtocolError);
  Check(r->Encode() == payload);
}

template <typename Payload>
void FuzzPeerMsg(peer::PeerMsg type, std::string_view payload) {
  if constexpr (std::is_same_v<Payload, peer::PeerRequest>) {
    Result<peer::PeerRequest> r = peer::DecodePeerRequest(type, payload);
    if (r.ok()) Check(peer::EncodePeerRequest(type, *r) == payload);
  } else if constexpr (std::is_same_v<Payload, peer::PeerErrorPayload>) {
    Check(!peer::DecodePeerError(payload).ok());  // an error reply never decodes to Ok
  } else if constexpr (!std::is_same_v<Payload, peer::RawBytes>) {
    RoundTrip<Payload>(payload);
  }
}

template <typename Payload>
void FuzzFramePayload(std::string_view payload) {
  if constexpr (std::is_same_v<Payload, peer::StreamDataPrefix>) {
    if (payload.size() < peer::kStreamDataPrefix) return;
    const auto* in = reinterpret_cast<const uint8_t*>(payload.data());
    uint8_t again[peer::kStreamDataPrefix];
    peer::StreamDataPrefix::Decode(in).Encode(again);
    Check(std::string_view(reinterpret_cast<const char*>(again), sizeof(again)) ==
          payload.substr(0, peer::kStreamDataPrefix));
  } else if constexpr (!std::is_void_v<Payload>) {
    RoundTrip<Payload>(payload);
  }
}

// The seed make_corpus writes for a decoder: a sample of its payload; none
// for payloads without a declared message.
template <typename Payload>
std::optional<std::string> PeerMsgSeed(peer::PeerMsg type) {
  if constexpr (std::is_same_v<Payload, peer::PeerRequest>) {
    return peer::EncodePeerRequest(type, Sample<peer::PeerRequest>());
  } else if constexpr (std::is_same_v<Payload, peer::RawBytes>) {
    return std::nullopt;
  } else {
    return Sample<Payload>().Encode();
  }
}

template <typename Payload>
std::optional<std::string> FramePayloadSeed() {
  if constexpr (std::is_same_v<Payload, peer::StreamDataPrefix>) {
    uint8_t prefix[peer::kStreamDataPrefix];
    Sample<peer::StreamDataPrefix>().Encode(prefix);
    return std::string(reinterpret_cast<const char*>(prefix), sizeof(prefix));
  } else if constexpr (std::is_void_v<Payload>) {
    return std::nullopt;
  } else {
    return Sample<Payload>().Encode();
  }
}

struct PeerDecoder {
  std::string_view name;  // the seed's file name
  void (*run)(std::string_view payload);
  std::optional<std::string> (*seed)();
};

}  // namespace tierckpt::fuzz

// In the peer namespace, where the tables name their payloads.
namespace tierckpt::peer {

inline constexpr fuzz::PeerDecoder kFuzzDecoders[] = {
#define TIERCKPT_FUZZ_PEER_MSG(name, number, text, Payload, fields)                       \
  {"msg_" text, [](std::string_view p) { fuzz::FuzzPeerMsg<Payload>(PeerMsg::name, p); }, \
   [] { return fuzz::PeerMsgSeed<Payload>(PeerMsg::name); }},
    TIERCKPT_PEER_MSGS(TIERCKPT_FUZZ_PEER_MSG)
#undef TIERCKPT_FUZZ_PEER_MSG
#define TIERCKPT_FUZZ_PEER_KIND(name, number, text, Payload, limit)               \
  {"frame_" text, [](std::string_view p) { fuzz::FuzzFramePayload<Payload>(p); }, \
   [] { return fuzz::FramePayloadSeed<Payload>(); }},
        TIERCKPT_PEER_FRAME_KINDS(TIERCKPT_FUZZ_PEER_KIND)
#undef TIERCKPT_FUZZ_PEER_KIND
};

}  // namespace tierckpt::peer

namespace tierckpt::fuzz {

inline constexpr const PeerDecoder* kPeerDecoders = peer::kFuzzDecoders;
inline constexpr size_t kPeerDecoderCount = sizeof(peer::kFuzzDecoders) / sizeof(peer::kFuzzDecoders[0]);

}  // namespace tierckpt::fuzz
