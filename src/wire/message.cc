// message.cc — the Encoder, the Decoder and the codecs of message.h.
#include "wire/message.h"

#include <utility>

#include "wire/le.h"

namespace tierckpt::wire {
namespace {

void PutLe(std::string* out, uint64_t v, size_t width) {
  uint8_t bytes[8];
  StoreLe(bytes, v, width);
  out->append(reinterpret_cast<const char*>(bytes), width);
}

}  // namespace

// ---- Encoder ----

void Encoder::U8(uint8_t v) { PutLe(&out_, v, 1); }
void Encoder::U16(uint16_t v) { PutLe(&out_, v, 2); }
void Encoder::U32(uint32_t v) { PutLe(&out_, v, 4); }
void Encoder::U64(uint64_t v) { PutLe(&out_, v, 8); }

void Encoder::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_.append(s.data(), s.size());
}

void Encoder::StrList(const std::vector<std::string>& v) {
  U32(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) Str(s);
}

// ---- Decoder ----

std::string Decoder::FieldName(std::string_view field) const {
  std::string f(label_);
  if (!f.empty()) f += '.';
  f += field;
  return f;
}

Status Decoder::Need(size_t n, std::string_view field) {
  size_t remaining = in_.size() - pos_;
  if (n > remaining) {
    return ProtocolError("payload field " + FieldName(field) + " needs " + std::to_string(n) +
                         " bytes at offset " + std::to_string(pos_) + " but only " +
                         std::to_string(remaining) + " remain (truncated or malformed message)");
  }
  return Status::Ok();
}

Status Decoder::U8(uint8_t* v, std::string_view field) {
  TC_RETURN_IF_ERROR(Need(1, field));
  *v = static_cast<uint8_t>(in_[pos_]);
  pos_ += 1;
  return Status::Ok();
}

Status Decoder::U16(uint16_t* v, std::string_view field) {
  TC_RETURN_IF_ERROR(Need(2, field));
  *v = static_cast<uint16_t>(LoadLe(reinterpret_cast<const uint8_t*>(in_.data() + pos_), 2));
  pos_ += 2;
  return Status::Ok();
}

Status Decoder::U32(uint32_t* v, std::string_view field) {
  TC_RETURN_IF_ERROR(Need(4, field));
  *v = static_cast<uint32_t>(LoadLe(reinterpret_cast<const uint8_t*>(in_.data() + pos_), 4));
  pos_ += 4;
  return Status::Ok();
}

Status Decoder::U64(uint64_t* v, std::string_view field) {
  TC_RETURN_IF_ERROR(Need(8, field));
  *v = LoadLe(reinterpret_cast<const uint8_t*>(in_.data() + pos_), 8);
  pos_ += 8;
  return Status::Ok();
}

Status Decoder::Bool(bool* v, std::string_view field) {
  uint8_t b = 0;
  TC_RETURN_IF_ERROR(U8(&b, field));
  if (b > 1) {
    return ProtocolError("payload field " + FieldName(field) + " is a bool but holds " + std::to_string(b) +
                         " (only 0 and 1 are allowed)");
  }
  *v = b == 1;
  return Status::Ok();
}

Status Decoder::Str(std::string* v, std::string_view field, uint32_t max) {
  uint32_t len = 0;
  TC_RETURN_IF_ERROR(U32(&len, field));
  if (len > max) {
    return ProtocolError("payload field " + FieldName(field) + " claims " + std::to_string(len) +
                         " bytes, above the " + std::to_string(max) + "-byte limit");
  }
  TC_RETURN_IF_ERROR(Need(len, field));
  v->assign(in_.data() + pos_, len);
  pos_ += len;
  return Status::Ok();
}

Status Decoder::StrList(std::vector<std::string>* v, std::string_view field, uint32_t max_count) {
  uint32_t count = 0;
  TC_RETURN_IF_ERROR(U32(&count, field));
  if (count > max_count) {
    return ProtocolError("payload field " + FieldName(field) + " has " + std::to_string(count) +
                         " entries, above the limit of " + std::to_string(max_count));
  }
  // Every entry takes at least its 4-byte length, so a count the remaining
  // bytes cannot hold is rejected before anything is allocated.
  TC_RETURN_IF_ERROR(Need(static_cast<size_t>(count) * 4, field));
  v->clear();
  v->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string s;
    TC_RETURN_IF_ERROR(Str(&s, std::string(field) + "." + std::to_string(i)));
    v->push_back(std::move(s));
  }
  return Status::Ok();
}

Status Decoder::U64List(std::vector<uint64_t>* v, std::string_view field, uint32_t max_count) {
  uint32_t count = 0;
  TC_RETURN_IF_ERROR(U32(&count, field));
  if (count > max_count) {
    return ProtocolError("payload field " + FieldName(field) + " has " + std::to_string(count) +
                         " entries, above the limit of " + std::to_string(max_count));
  }
  TC_RETURN_IF_ERROR(Need(static_cast<size_t>(count) * 8, field));
  v->assign(count, 0);
  for (uint64_t& x : *v) TC_RETURN_IF_ERROR(U64(&x, field));
  return Status::Ok();
}

Status Decoder::Finish() {
  if (pos_ != in_.size()) {
    return ProtocolError("payload has " + std::to_string(in_.size() - pos_) +
                         " unexpected trailing bytes after " + std::to_string(pos_) +
                         " decoded bytes (client and agent disagree on the message layout)");
  }
  return Status::Ok();
}

// ---- codecs ----

void Put(Encoder& e, U64List, const std::vector<uint64_t>& v) {
  e.U32(static_cast<uint32_t>(v.size()));
  for (uint64_t x : v) e.U64(x);
}

Status Get(Decoder& d, FixedStr c, std::string* v, std::string_view f) {
  TC_RETURN_IF_ERROR(d.Str(v, f, c.size));
  if (v->size() != c.size && !(c.empty_ok && v->empty())) {
    return ProtocolError("payload field " + d.FieldName(f) + " has " + std::to_string(v->size()) +
                         " bytes; it must have " + std::to_string(c.size) + (c.empty_ok ? " (or 0)" : ""));
  }
  return Status::Ok();
}

Status EnumOutOfRange(const Decoder& d, std::string_view field, unsigned value, unsigned min, unsigned max) {
  return ProtocolError("payload field " + d.FieldName(field) + " holds " + std::to_string(value) +
                       " (allowed " + std::to_string(min) + ".." + std::to_string(max) + ")");
}

}  // namespace tierckpt::wire
