// message.h — messages declared once: the payload encoding shared by the
// local protocol (wire/protocol.h) and the peer protocol (peer/peer_frame.h,
// peer/peer_messages.h).
//
// A message is a list of fields, each declared on one line of an X-macro:
//
//   #define TIERCKPT_WIRE_OPEN_OBJECT_REQUEST(F)  (each line but the last ends in a backslash)
//     F(std::string, ns, {}, wire::Str())
//     F(uint64_t, step, 0, wire::U64())
//     F(std::string, name, {}, wire::Str())
//   TIERCKPT_WIRE_MESSAGE(OpenObjectRequest, "OpenObject", TIERCKPT_WIRE_OPEN_OBJECT_REQUEST);
//
// F(type, member, default, codec) declares the member `type member = default;`
// and how it travels. The message gets, from that list alone: its members in
// declaration order (it stays an aggregate: `OpenObjectRequest{ns, 7, "a"}`),
// Encode(), Decode(payload), ForEachField (which make_corpus and the tests use
// to build samples) and kMinBytes (the bytes of its fixed-width fields plus
// 4 per string/list length, from which frame limits are derived).
//
// Encoding, by codec: U8/U16/U32/U64 fixed width little-endian; Bool a u8 0|1
// (anything else is an error); Str a u32 length + bytes; StrList a u32 count +
// strings; U64List a u32 count + u64s. Decode consumes the payload exactly
// (trailing bytes are an error) and fails with kProtocolError naming the field
// as "<Label>.<member>" (the member `ns` is called "namespace": a C++
// keyword). Bounds (Str max, StrList max_count...) are checked from the
// length prefix, before anything is allocated.
//
// An extra member of a message (a check across fields) goes in the macro's
// trailing arguments; `Status CheckDecoded() const`, if declared, runs after
// the fields decoded.
//
// Thread safety: Encoder/Decoder are thread-compatible values; the codecs are
// constexpr values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::wire {

// The largest string a field may claim (kMaxPayload of the local protocol).
inline constexpr uint32_t kMaxFieldBytes = 80u << 20;

class Encoder {
 public:
  void U8(uint8_t v);
  void U16(uint16_t v);
  void U32(uint32_t v);
  void U64(uint64_t v);
  void Bool(bool v) { U8(v ? 1 : 0); }
  void Str(std::string_view s);
  void StrList(const std::vector<std::string>& v);
  const std::string& bytes() const { return out_; }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields in order; each getter fails with kProtocolError naming the
// field when the payload is too short or the value is malformed. With a
// message label, fields are named "<label>.<field>" in errors.
class Decoder {
 public:
  explicit Decoder(std::string_view in, std::string_view label = {}) : in_(in), label_(label) {}
  Status U8(uint8_t* v, std::string_view field);
  Status U16(uint16_t* v, std::string_view field);
  Status U32(uint32_t* v, std::string_view field);
  Status U64(uint64_t* v, std::string_view field);
  Status Bool(bool* v, std::string_view field);
  // At most max bytes (checked from the length prefix).
  Status Str(std::string* v, std::string_view field, uint32_t max = kMaxFieldBytes);
  // At most max_count entries.
  Status StrList(std::vector<std::string>* v, std::string_view field, uint32_t max_count);
  Status U64List(std::vector<uint64_t>* v, std::string_view field, uint32_t max_count);
  // kProtocolError if bytes remain.
  Status Finish();
  // The bytes decoded so far.
  size_t consumed() const { return pos_; }

  // "<label>.<field>", or field without a label: for errors of checks made
  // outside the decoder.
  std::string FieldName(std::string_view field) const;

 private:
  Status Need(size_t n, std::string_view field);
  std::string_view in_;
  std::string_view label_;
  size_t pos_ = 0;
};

// ---- codecs: how one field travels ----

struct U8 {
  static constexpr size_t kMinBytes = 1;
};
struct U16 {
  static constexpr size_t kMinBytes = 2;
};
struct U32 {
  static constexpr size_t kMinBytes = 4;
};
struct U64 {
  static constexpr size_t kMinBytes = 8;
};
struct Bool {
  static constexpr size_t kMinBytes = 1;
};
// A string of at most `max` bytes. With `cut` > 0, Encode sends at most the
// first `cut` bytes (messages that must fit a frame).
struct Str {
  static constexpr size_t kMinBytes = 4;
  constexpr Str() = default;
  constexpr explicit Str(uint32_t max_bytes, uint32_t cut_bytes = 0) : max(max_bytes), cut(cut_bytes) {}
  uint32_t max = kMaxFieldBytes;
  uint32_t cut = 0;
};
// Exactly `size` bytes, or none when `empty_ok`.
struct FixedStr {
  static constexpr size_t kMinBytes = 4;
  constexpr explicit FixedStr(uint32_t bytes, bool allow_empty = false)
      : size(bytes), empty_ok(allow_empty) {}
  uint32_t size;
  bool empty_ok;
};
struct StrList {
  static constexpr size_t kMinBytes = 4;
  constexpr explicit StrList(uint32_t max) : max_count(max) {}
  uint32_t max_count;
};
struct U64List {
  static constexpr size_t kMinBytes = 4;
  constexpr explicit U64List(uint32_t max) : max_count(max) {}
  uint32_t max_count;
};
// An enum sent as a u8 whose numbers are min..max.
template <typename E>
struct EnumU8 {
  static constexpr size_t kMinBytes = 1;
  constexpr EnumU8(E lo, E hi) : min(lo), max(hi) {}
  E min;
  E max;
};

inline void Put(Encoder& e, U8, uint8_t v) { e.U8(v); }
inline void Put(Encoder& e, U16, uint16_t v) { e.U16(v); }
inline void Put(Encoder& e, U32, uint32_t v) { e.U32(v); }
inline void Put(Encoder& e, U64, uint64_t v) { e.U64(v); }
inline void Put(Encoder& e, Bool, bool v) { e.Bool(v); }
inline void Put(Encoder& e, Str c, const std::string& v) {
  e.Str(c.cut > 0 ? std::string_view(v).substr(0, c.cut) : std::string_view(v));
}
inline void Put(Encoder& e, FixedStr, const std::string& v) { e.Str(v); }
inline void Put(Encoder& e, StrList, const std::vector<std::string>& v) { e.StrList(v); }
void Put(Encoder& e, U64List, const std::vector<uint64_t>& v);
template <typename E>
void Put(Encoder& e, EnumU8<E>, E v) {
  e.U8(static_cast<uint8_t>(v));
}

inline Status Get(Decoder& d, U8, uint8_t* v, std::string_view f) { return d.U8(v, f); }
inline Status Get(Decoder& d, U16, uint16_t* v, std::string_view f) { return d.U16(v, f); }
inline Status Get(Decoder& d, U32, uint32_t* v, std::string_view f) { return d.U32(v, f); }
inline Status Get(Decoder& d, U64, uint64_t* v, std::string_view f) { return d.U64(v, f); }
inline Status Get(Decoder& d, Bool, bool* v, std::string_view f) { return d.Bool(v, f); }
inline Status Get(Decoder& d, Str c, std::string* v, std::string_view f) { return d.Str(v, f, c.max); }
Status Get(Decoder& d, FixedStr c, std::string* v, std::string_view f);
inline Status Get(Decoder& d, StrList c, std::vector<std::string>* v, std::string_view f) {
  return d.StrList(v, f, c.max_count);
}
inline Status Get(Decoder& d, U64List c, std::vector<uint64_t>* v, std::string_view f) {
  return d.U64List(v, f, c.max_count);
}
// kProtocolError "<field> holds N (allowed min..max)" outside the range.
Status EnumOutOfRange(const Decoder& d, std::string_view field, unsigned value, unsigned min, unsigned max);
template <typename E>
Status Get(Decoder& d, EnumU8<E> c, E* v, std::string_view f) {
  uint8_t raw = 0;
  TC_RETURN_IF_ERROR(d.U8(&raw, f));
  if (raw < static_cast<uint8_t>(c.min) || raw > static_cast<uint8_t>(c.max)) {
    return EnumOutOfRange(d, f, raw, static_cast<unsigned>(c.min), static_cast<unsigned>(c.max));
  }
  *v = static_cast<E>(raw);
  return Status::Ok();
}

// The member `ns` travels (and is named in errors) as "namespace".
constexpr std::string_view WireFieldName(std::string_view member) {
  return member == "ns" ? std::string_view("namespace") : member;
}

// Encode and Decode of any declared message M.
template <typename M>
std::string EncodeMessage(const M& m) {
  Encoder e;
  m.ForEachField([&](std::string_view, const auto& value, const auto& codec) { Put(e, codec, value); });
  return e.Take();
}

template <typename M>
Result<M> DecodeMessage(std::string_view payload) {
  Decoder d(payload, M::kLabel);
  M m;
  Status st;
  m.ForEachField([&](std::string_view name, auto& value, const auto& codec) {
    if (st.ok()) st = Get(d, codec, &value, name);
  });
  TC_RETURN_IF_ERROR(st);
  if constexpr (requires { m.CheckDecoded(); }) TC_RETURN_IF_ERROR(m.CheckDecoded());
  TC_RETURN_IF_ERROR(d.Finish());
  return m;
}

// A declared message M at the start of `payload`, followed by bytes of the
// caller's (the local response envelope: a header, then the body). On
// success *rest is what follows M. Errors as DecodeMessage, but trailing
// bytes are not one.
template <typename M>
Result<M> DecodeMessagePrefix(std::string_view payload, std::string_view* rest) {
  Decoder d(payload, M::kLabel);
  M m;
  Status st;
  m.ForEachField([&](std::string_view name, auto& value, const auto& codec) {
    if (st.ok()) st = Get(d, codec, &value, name);
  });
  TC_RETURN_IF_ERROR(st);
  if constexpr (requires { m.CheckDecoded(); }) TC_RETURN_IF_ERROR(m.CheckDecoded());
  *rest = payload.substr(d.consumed());
  return m;
}

}  // namespace tierckpt::wire

// ---- the declaration macros ----

#define TIERCKPT_WIRE_MEMBER(type, member, init, codec) type member = init;
#define TIERCKPT_WIRE_VISIT(type, member, init, codec) \
  visit(::tierckpt::wire::WireFieldName(#member), member, codec);
#define TIERCKPT_WIRE_MIN_BYTES(type, member, init, codec) +decltype(codec)::kMinBytes

// The members, ForEachField and kMinBytes of a message; for messages with an
// encoding of their own (peer::StreamDataPrefix).
#define TIERCKPT_WIRE_FIELDS(Name, label, FIELDS)                        \
  FIELDS(TIERCKPT_WIRE_MEMBER)                                           \
  static constexpr std::string_view kLabel = label;                      \
  static constexpr size_t kMinBytes = 0 FIELDS(TIERCKPT_WIRE_MIN_BYTES); \
  template <typename V>                                                  \
  void ForEachField([[maybe_unused]] V&& visit) {                        \
    FIELDS(TIERCKPT_WIRE_VISIT)                                          \
  }                                                                      \
  template <typename V>                                                  \
  void ForEachField([[maybe_unused]] V&& visit) const {                  \
    FIELDS(TIERCKPT_WIRE_VISIT)                                          \
  }

// Declares struct Name: its fields (FIELDS), Encode() and Decode(payload).
// `label` names the message in errors; trailing arguments are extra members.
#define TIERCKPT_WIRE_MESSAGE(Name, label, FIELDS, ...)                           \
  struct Name {                                                                   \
    TIERCKPT_WIRE_FIELDS(Name, label, FIELDS)                                     \
    std::string Encode() const { return ::tierckpt::wire::EncodeMessage(*this); } \
    static ::tierckpt::Result<Name> Decode(std::string_view p) {                  \
      return ::tierckpt::wire::DecodeMessage<Name>(p);                            \
    }                                                                             \
    __VA_ARGS__                                                                   \
  }

// A message without fields: its payload must be empty.
#define TIERCKPT_WIRE_NO_FIELDS(F)

namespace tierckpt::wire {

// No payload (the local Stats and Shutdown requests, the bodies of replies
// that carry only a status, the peer Ready frame): Decode accepts only the
// empty payload.
TIERCKPT_WIRE_MESSAGE(Empty, "Empty", TIERCKPT_WIRE_NO_FIELDS);

}  // namespace tierckpt::wire
