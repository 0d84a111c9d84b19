#include "wire/protocol.h"

#include <utility>

#include "wire/le.h"

namespace tierckpt::wire {
namespace {

// Longest error message an agent puts in a response; longer ones are cut so
// a response always fits in one frame.
constexpr size_t kMaxResponseMessage = 64u << 10;

// The list of every request type, in one place, for MsgTypeName and
// IsKnownRequestType.
#define TIERCKPT_MSG_TYPES(X) \
  X(kHello, "Hello")          \
  X(kBeginStep, "BeginStep")  \
  X(kCreateObject, "CreateObject") \
  X(kSealObject, "SealObject") \
  X(kCommitStep, "CommitStep") \
  X(kAbortStep, "AbortStep")  \
  X(kList, "List")            \
  X(kShow, "Show")            \
  X(kOpenObject, "OpenObject") \
  X(kDeleteStep, "DeleteStep") \
  X(kPrune, "Prune")          \
  X(kStats, "Stats")          \
  X(kWaitDurable, "WaitDurable") \
  X(kRestore, "Restore")      \
  X(kVerify, "Verify")        \
  X(kShutdown, "Shutdown")    \
  X(kPersist, "Persist")      \
  X(kCreateNextObject, "CreateNextObject") \
  X(kBeginSave, "BeginSave")

void PutLe(std::string* out, uint64_t v, size_t width) {
  uint8_t bytes[8];
  StoreLe(bytes, v, width);
  out->append(reinterpret_cast<const char*>(bytes), width);
}

std::string Field(std::string_view type, std::string_view field) {
  std::string f(type);
  f += '.';
  f += field;
  return f;
}

}  // namespace

std::string_view MsgTypeName(uint16_t type) {
  switch (static_cast<MsgType>(type)) {
#define TIERCKPT_MSG_NAME(name, text) \
  case MsgType::name:                 \
    return text;
    TIERCKPT_MSG_TYPES(TIERCKPT_MSG_NAME)
#undef TIERCKPT_MSG_NAME
  }
  return "unknown";
}

bool IsKnownRequestType(uint16_t type) { return MsgTypeName(type) != "unknown"; }

uint32_t MaxRequestPayload(uint16_t type) {
  return type == static_cast<uint16_t>(MsgType::kCommitStep) ? kMaxCommitRequestPayload : kMaxSmallRequestPayload;
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
    return ProtocolError("frame header: bad magic " + Hex32(h.magic) + " (expected " +
                         Hex32(kFrameMagic) +
                         ", bytes \"TCKP\"); the peer does not speak the tierckpt protocol");
  }
  if (h.version != kProtocolVersion) {
    return ProtocolError("frame header: protocol version " + std::to_string(h.version) +
                         " is not supported (this build speaks version " +
                         std::to_string(kProtocolVersion) +
                         "); run the same tierckpt version on the client and the agent");
  }
  if (h.payload_len > kMaxPayload) {
    return ProtocolError("frame header: payload_len " + std::to_string(h.payload_len) +
                         " exceeds the " + std::to_string(kMaxPayload) + "-byte frame limit");
  }
  return h;
}

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

Status Decoder::Need(size_t n, std::string_view field) {
  size_t remaining = in_.size() - pos_;
  if (n > remaining) {
    return ProtocolError("payload field " + std::string(field) + " needs " + std::to_string(n) +
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
    return ProtocolError("payload field " + std::string(field) + " is a bool but holds " +
                         std::to_string(b) + " (only 0 and 1 are allowed)");
  }
  *v = b == 1;
  return Status::Ok();
}

Status Decoder::Str(std::string* v, std::string_view field) {
  uint32_t len = 0;
  TC_RETURN_IF_ERROR(U32(&len, field));
  if (len > kMaxPayload) {
    return ProtocolError("payload field " + std::string(field) + " claims " + std::to_string(len) +
                         " bytes, above the " + std::to_string(kMaxPayload) + "-byte limit");
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
    return ProtocolError("payload field " + std::string(field) + " has " + std::to_string(count) +
                         " entries, above the limit of " + std::to_string(max_count));
  }
  // Every entry takes at least its 4-byte length, so a count the remaining
  // bytes cannot hold is rejected before anything is allocated.
  TC_RETURN_IF_ERROR(Need(static_cast<size_t>(count) * 4, field));
  v->clear();
  v->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    std::string s;
    TC_RETURN_IF_ERROR(Str(&s, Field(field, std::to_string(i))));
    v->push_back(std::move(s));
  }
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

// ---- Requests and response bodies ----

std::string HelloRequest::Encode() const {
  Encoder e;
  e.U32(pid);
  e.Str(client);
  e.Str(writer);
  return e.Take();
}

Result<HelloRequest> HelloRequest::Decode(std::string_view p) {
  Decoder d(p);
  HelloRequest r;
  TC_RETURN_IF_ERROR(d.U32(&r.pid, "Hello.pid"));
  TC_RETURN_IF_ERROR(d.Str(&r.client, "Hello.client"));
  TC_RETURN_IF_ERROR(d.Str(&r.writer, "Hello.writer"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
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

std::string HelloResponse::Encode() const {
  Encoder e;
  e.Str(node_id);
  e.Str(agent_version);
  e.Str(root);
  e.Str(durable);
  return e.Take();
}

Result<HelloResponse> HelloResponse::Decode(std::string_view p) {
  Decoder d(p);
  HelloResponse r;
  TC_RETURN_IF_ERROR(d.Str(&r.node_id, "HelloResponse.node_id"));
  TC_RETURN_IF_ERROR(d.Str(&r.agent_version, "HelloResponse.agent_version"));
  TC_RETURN_IF_ERROR(d.Str(&r.root, "HelloResponse.root"));
  TC_RETURN_IF_ERROR(d.Str(&r.durable, "HelloResponse.durable"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string StepRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  return e.Take();
}

Result<StepRequest> StepRequest::Decode(std::string_view p) {
  Decoder d(p);
  StepRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "Step.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "Step.step"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string CreateObjectRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.Str(name);
  e.U64(size);
  return e.Take();
}

Result<CreateObjectRequest> CreateObjectRequest::Decode(std::string_view p) {
  Decoder d(p);
  CreateObjectRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "CreateObject.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "CreateObject.step"));
  TC_RETURN_IF_ERROR(d.Str(&r.name, "CreateObject.name"));
  TC_RETURN_IF_ERROR(d.U64(&r.size, "CreateObject.size"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string CreateNextObjectRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.Str(prefix);
  e.U64(first);
  e.Str(suffix);
  e.U64(size);
  return e.Take();
}

Result<CreateNextObjectRequest> CreateNextObjectRequest::Decode(std::string_view p) {
  Decoder d(p);
  CreateNextObjectRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "CreateNextObject.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "CreateNextObject.step"));
  TC_RETURN_IF_ERROR(d.Str(&r.prefix, "CreateNextObject.prefix"));
  TC_RETURN_IF_ERROR(d.U64(&r.first, "CreateNextObject.first"));
  TC_RETURN_IF_ERROR(d.Str(&r.suffix, "CreateNextObject.suffix"));
  TC_RETURN_IF_ERROR(d.U64(&r.size, "CreateNextObject.size"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string CreateNextObjectResponse::Encode() const {
  Encoder e;
  e.U64(index);
  e.Str(name);
  return e.Take();
}

Result<CreateNextObjectResponse> CreateNextObjectResponse::Decode(std::string_view p) {
  Decoder d(p);
  CreateNextObjectResponse r;
  TC_RETURN_IF_ERROR(d.U64(&r.index, "CreateNextObjectResponse.index"));
  TC_RETURN_IF_ERROR(d.Str(&r.name, "CreateNextObjectResponse.name"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string SealObjectRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.Str(name);
  e.U64(size);
  e.Str(checksum);
  return e.Take();
}

Result<SealObjectRequest> SealObjectRequest::Decode(std::string_view p) {
  Decoder d(p);
  SealObjectRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "SealObject.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "SealObject.step"));
  TC_RETURN_IF_ERROR(d.Str(&r.name, "SealObject.name"));
  TC_RETURN_IF_ERROR(d.U64(&r.size, "SealObject.size"));
  TC_RETURN_IF_ERROR(d.Str(&r.checksum, "SealObject.checksum"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string CommitStepRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.U32(world_size);
  e.Bool(persist);
  e.StrList(expected_objects);
  e.StrList(members);
  return e.Take();
}

Result<CommitStepRequest> CommitStepRequest::Decode(std::string_view p) {
  constexpr uint32_t kMaxExpectedObjects = 1'000'000;
  Decoder d(p);
  CommitStepRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "CommitStep.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "CommitStep.step"));
  TC_RETURN_IF_ERROR(d.U32(&r.world_size, "CommitStep.world_size"));
  TC_RETURN_IF_ERROR(d.Bool(&r.persist, "CommitStep.persist"));
  TC_RETURN_IF_ERROR(
      d.StrList(&r.expected_objects, "CommitStep.expected_objects", kMaxExpectedObjects));
  constexpr uint32_t kMaxMembers = 100'000;
  TC_RETURN_IF_ERROR(d.StrList(&r.members, "CommitStep.members", kMaxMembers));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string OpenObjectRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.Str(name);
  return e.Take();
}

Result<OpenObjectRequest> OpenObjectRequest::Decode(std::string_view p) {
  Decoder d(p);
  OpenObjectRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "OpenObject.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "OpenObject.step"));
  TC_RETURN_IF_ERROR(d.Str(&r.name, "OpenObject.name"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string OpenObjectResponse::Encode() const {
  Encoder e;
  e.U64(size);
  e.Str(checksum);
  return e.Take();
}

Result<OpenObjectResponse> OpenObjectResponse::Decode(std::string_view p) {
  Decoder d(p);
  OpenObjectResponse r;
  TC_RETURN_IF_ERROR(d.U64(&r.size, "OpenObjectResponse.size"));
  TC_RETURN_IF_ERROR(d.Str(&r.checksum, "OpenObjectResponse.checksum"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string ListRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.Bool(include_durable);
  return e.Take();
}

Result<ListRequest> ListRequest::Decode(std::string_view p) {
  Decoder d(p);
  ListRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "List.namespace"));
  TC_RETURN_IF_ERROR(d.Bool(&r.include_durable, "List.include_durable"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string DeleteStepRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.Bool(durable_too);
  e.Bool(keep_replicas);
  return e.Take();
}

Result<DeleteStepRequest> DeleteStepRequest::Decode(std::string_view p) {
  Decoder d(p);
  DeleteStepRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "DeleteStep.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "DeleteStep.step"));
  TC_RETURN_IF_ERROR(d.Bool(&r.durable_too, "DeleteStep.durable_too"));
  TC_RETURN_IF_ERROR(d.Bool(&r.keep_replicas, "DeleteStep.keep_replicas"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string PruneRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U32(keep_memory);
  e.U32(keep_durable);
  return e.Take();
}

Result<PruneRequest> PruneRequest::Decode(std::string_view p) {
  Decoder d(p);
  PruneRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "Prune.namespace"));
  TC_RETURN_IF_ERROR(d.U32(&r.keep_memory, "Prune.keep_memory"));
  TC_RETURN_IF_ERROR(d.U32(&r.keep_durable, "Prune.keep_durable"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string WaitDurableRequest::Encode() const {
  Encoder e;
  e.Str(ns);
  e.U64(step);
  e.U32(timeout_ms);
  return e.Take();
}

Result<WaitDurableRequest> WaitDurableRequest::Decode(std::string_view p) {
  Decoder d(p);
  WaitDurableRequest r;
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "WaitDurable.namespace"));
  TC_RETURN_IF_ERROR(d.U64(&r.step, "WaitDurable.step"));
  TC_RETURN_IF_ERROR(d.U32(&r.timeout_ms, "WaitDurable.timeout_ms"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string JsonBody::Encode() const {
  Encoder e;
  e.Str(json);
  return e.Take();
}

Result<JsonBody> JsonBody::Decode(std::string_view p) {
  Decoder d(p);
  JsonBody r;
  TC_RETURN_IF_ERROR(d.Str(&r.json, "JsonBody.json"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

// ---- Response envelope ----

std::string EncodeResponse(const Status& status, std::string_view body) {
  Encoder e;
  e.U32(static_cast<uint32_t>(status.code()));
  if (status.ok()) {
    e.Str("");
    std::string out = e.Take();
    out.append(body.data(), body.size());
    return out;
  }
  std::string_view message = status.message();
  if (message.size() > kMaxResponseMessage) message = message.substr(0, kMaxResponseMessage);
  e.Str(message);
  return e.Take();
}

Result<std::string> DecodeResponse(std::string_view payload) {
  Decoder d(payload);
  uint32_t code = 0;
  std::string message;
  TC_RETURN_IF_ERROR(d.U32(&code, "Response.code"));
  TC_RETURN_IF_ERROR(d.Str(&message, "Response.message"));
  size_t header_bytes = 4 + 4 + message.size();
  if (code == 0) return std::string(payload.substr(header_bytes));
  TC_RETURN_IF_ERROR(d.Finish().WithContext("error response"));
  Code c = CodeFromNumber(code);
  if (c == Code::kInternal && code != static_cast<uint32_t>(Code::kInternal)) {
    message = "agent sent unknown status code " + std::to_string(code) + ": " + message;
  }
  return Status(c, std::move(message));
}

}  // namespace tierckpt::wire
