// protocol.h — the local service protocol between a client and tierckptd.
//
// Transport: a SOCK_STREAM Unix socket. Every message is one frame:
//
//   offset size field
//   0      4    magic        0x504B4354 little-endian (bytes "TCKP")
//   4      2    version      kProtocolVersion
//   6      2    type         MsgType; responses set bit 15 (kResponseBit)
//   8      4    request_id   echoed by the response
//   12     4    payload_len  <= kMaxPayload
//   16     ...  payload
//
// All integers are little-endian. Payload fields are encoded by Encoder:
// u8/u16/u32/u64 fixed width, bool as u8 (0|1, anything else is an error),
// string as u32 length + bytes (length <= kMaxPayload), string lists as u32
// count + strings. A decoder must consume the payload exactly; trailing
// bytes are a protocol error. A response payload starts with u32 status code
// and a string message; the body follows only when the code is 0.
//
// File descriptors travel as SCM_RIGHTS ancillary data on the frame that
// carries them (CreateObject and OpenObject responses): bulk bytes never go
// through the socket. docs/protocol.md is the user-facing copy of this.
//
// Thread safety: the free functions are pure; Encoder/Decoder are
// thread-compatible values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::wire {

inline constexpr uint32_t kFrameMagic = 0x504B4354;
inline constexpr uint16_t kProtocolVersion = 4;
inline constexpr size_t kFrameHeaderSize = 16;
// Large enough for the biggest manifest (kMaxManifestBytes, 64 MiB) in a
// CommitStep or Show response, or a CommitStep request naming ~1M objects.
// The header is checked before anything is allocated.
inline constexpr uint32_t kMaxPayload = 80u << 20;
inline constexpr uint16_t kResponseBit = 0x8000;
// What a *request* may carry, checked by the agent from the header before it
// reads or allocates anything (MaxRequestPayload). A CommitStep request may
// name every object of a step, which cannot be more than a manifest
// (kMaxManifestBytes, 64 MiB) holds; every other request carries a few names
// (<= 1024 bytes each) and a checksum, far below 64 KiB.
inline constexpr uint32_t kMaxCommitRequestPayload = 64u << 20;
inline constexpr uint32_t kMaxSmallRequestPayload = 64u << 10;

enum class MsgType : uint16_t {
  kHello = 1,
  kBeginStep = 2,
  kCreateObject = 3,
  kSealObject = 4,
  kCommitStep = 5,
  kAbortStep = 6,
  kList = 7,
  kShow = 8,
  kOpenObject = 9,
  kDeleteStep = 10,
  kPrune = 11,
  kStats = 12,
  kWaitDurable = 13,
  kRestore = 14,
  kVerify = 15,
  kShutdown = 16,
  kPersist = 17,
  kCreateNextObject = 18,
  kBeginSave = 19,
};
// Writer ids (HelloRequest::writer): at most 128 bytes of [A-Za-z0-9_.:@/+=-].
inline constexpr size_t kMaxWriterIdLength = 128;
Status ValidateWriterId(std::string_view id);

// Name for logs, "unknown" otherwise.
std::string_view MsgTypeName(uint16_t type);
bool IsKnownRequestType(uint16_t type);
// The largest payload a request of this type may carry: kMaxCommitRequestPayload
// for CommitStep, kMaxSmallRequestPayload for every other (and unknown) type.
uint32_t MaxRequestPayload(uint16_t type);

struct FrameHeader {
  uint32_t magic = kFrameMagic;
  uint16_t version = kProtocolVersion;
  uint16_t type = 0;
  uint32_t request_id = 0;
  uint32_t payload_len = 0;
};

void EncodeHeader(const FrameHeader& h, uint8_t out[kFrameHeaderSize]);
// Checks magic, version and payload_len <= kMaxPayload; kProtocolError with a
// message naming the bad field otherwise (the connection must then close).
Result<FrameHeader> DecodeHeader(const uint8_t in[kFrameHeaderSize]);

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
// field when the payload is too short or the value is malformed.
class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  Status U8(uint8_t* v, std::string_view field);
  Status U16(uint16_t* v, std::string_view field);
  Status U32(uint32_t* v, std::string_view field);
  Status U64(uint64_t* v, std::string_view field);
  Status Bool(bool* v, std::string_view field);
  Status Str(std::string* v, std::string_view field);
  // At most max_count entries.
  Status StrList(std::vector<std::string>* v, std::string_view field, uint32_t max_count);
  // kProtocolError if bytes remain.
  Status Finish();

 private:
  Status Need(size_t n, std::string_view field);
  std::string_view in_;
  size_t pos_ = 0;
};

// ---- Requests. Each has Encode() and a static Decode(payload). ----
// Decode validates field syntax only (lengths, bools); names and steps are
// validated by the agent with common/names.h so errors stay uniform.

struct HelloRequest {
  uint32_t pid = 0;
  std::string client;  // e.g. "tierckpt-cli 0.1", "python"
  // Who writes the steps this connection writes: a job's identity, the same
  // on every rank of the job (one writer per step, agent/memory_tier.h);
  // "" = anonymous. ValidateWriterId's rule.
  std::string writer;
  std::string Encode() const;
  static Result<HelloRequest> Decode(std::string_view p);
};
struct HelloResponse {
  std::string node_id;
  std::string agent_version;
  std::string root;  // tmpfs root of the memory tier
  std::string durable;  // durable base URL, "" if none
  std::string Encode() const;
  static Result<HelloResponse> Decode(std::string_view p);
};

// Names a step; used by BeginStep, AbortStep, Show, Restore, Verify, Persist.
struct StepRequest {
  std::string ns;
  uint64_t step = 0;
  std::string Encode() const;
  static Result<StepRequest> Decode(std::string_view p);
};

// Response carries the object's writable fd (a tmpfs file already sized to
// `size`).
struct CreateObjectRequest {
  std::string ns;
  uint64_t step = 0;
  std::string name;
  uint64_t size = 0;
  std::string Encode() const;
  static Result<CreateObjectRequest> Decode(std::string_view p);
};

// CreateNextObject: the agent creates the first object named
// <prefix><n><suffix> (n in decimal) for n = first, first + 1, ... that is not
// sealed in the step yet (an unsealed one is replaced, as CreateObject does),
// trying at most kMaxNextObjectNames names. The response names the object
// (CreateNextObjectResponse) and carries its writable fd.
inline constexpr uint32_t kMaxNextObjectNames = 64;
struct CreateNextObjectRequest {
  std::string ns;
  uint64_t step = 0;
  std::string prefix;
  uint64_t first = 0;
  std::string suffix;
  uint64_t size = 0;
  std::string Encode() const;
  static Result<CreateNextObjectRequest> Decode(std::string_view p);
};
struct CreateNextObjectResponse {
  uint64_t index = 0;  // the n taken
  std::string name;    // <prefix><n><suffix>
  std::string Encode() const;
  static Result<CreateNextObjectResponse> Decode(std::string_view p);
};

// checksum "" asks the agent to compute it; otherwise the agent verifies it.
struct SealObjectRequest {
  std::string ns;
  uint64_t step = 0;
  std::string name;
  uint64_t size = 0;
  std::string checksum;
  std::string Encode() const;
  static Result<SealObjectRequest> Decode(std::string_view p);
};

struct CommitStepRequest {
  std::string ns;
  uint64_t step = 0;
  uint32_t world_size = 0;
  bool persist = false;                       // persist this step to durable
  std::vector<std::string> expected_objects;  // empty: every sealed object
  // The nodes the step spans (docs/multinode.md): empty or this node alone
  // for a step written on one node. With several, the agent commits each
  // other member's part through the peers first and its own last.
  std::vector<std::string> members;
  std::string Encode() const;
  static Result<CommitStepRequest> Decode(std::string_view p);
};

struct OpenObjectRequest {
  std::string ns;
  uint64_t step = 0;
  std::string name;
  std::string Encode() const;
  static Result<OpenObjectRequest> Decode(std::string_view p);
};
// The response carries a read-only fd.
struct OpenObjectResponse {
  uint64_t size = 0;
  std::string checksum;
  std::string Encode() const;
  static Result<OpenObjectResponse> Decode(std::string_view p);
};

struct ListRequest {
  std::string ns;  // "" = all namespaces
  bool include_durable = true;
  std::string Encode() const;
  static Result<ListRequest> Decode(std::string_view p);
};

struct DeleteStepRequest {
  std::string ns;
  uint64_t step = 0;
  bool durable_too = false;
  bool keep_replicas = false;  // true: this node's memory copy only (a reader dropping a corrupt copy)
  std::string Encode() const;
  static Result<DeleteStepRequest> Decode(std::string_view p);
};

struct PruneRequest {
  std::string ns;           // "" = all namespaces
  uint32_t keep_memory = 0;  // 0 = the agent's retention setting
  uint32_t keep_durable = 0;  // 0 = leave durable alone
  std::string Encode() const;
  static Result<PruneRequest> Decode(std::string_view p);
};

struct WaitDurableRequest {
  std::string ns;
  uint64_t step = 0;
  uint32_t timeout_ms = 0;  // 0 = wait forever
  std::string Encode() const;
  static Result<WaitDurableRequest> Decode(std::string_view p);
};

// Responses whose body is one JSON document (List, Show, Stats, Verify,
// Prune, CommitStep — the committed manifest). The JSON shapes are in
// docs/protocol.md.
struct JsonBody {
  std::string json;
  std::string Encode() const;
  static Result<JsonBody> Decode(std::string_view p);
};

// ---- Response envelope ----
// payload = u32 code + string message + (body if code == 0).
std::string EncodeResponse(const Status& status, std::string_view body);
// Splits a response payload: returns the body, or the non-ok Status the agent
// sent (code and message as sent).
Result<std::string> DecodeResponse(std::string_view payload);

}  // namespace tierckpt::wire
