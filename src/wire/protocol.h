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
// All integers are little-endian. Every message is declared once, below
// (wire/message.h says how): its fields, its name and its request size limit;
// the encoder, the decoder, MsgTypeName, MaxRequestPayload, the golden test
// (protocol_golden_test.cc) and the fuzzers' seeds (tests/fuzz/make_corpus.cc)
// follow from the declarations. Fields: u8/u16/u32/u64 fixed width, bool as u8
// (0|1, anything else is an error), string as u32 length + bytes (length <=
// kMaxPayload), string lists as u32 count + strings. A decoder must consume
// the payload exactly; trailing bytes are a protocol error. A response
// payload starts with u32 status code and a string message; the body follows
// only when the code is 0.
//
// Adding a field: one F(...) line in the message's field list (at the end:
// the layout is a format; bump kProtocolVersion). Adding a request: a field
// list, one TIERCKPT_WIRE_MESSAGE line, one X(...) line in
// TIERCKPT_WIRE_MSG_TYPES, and the agent's handler (docs/protocol.md, "How
// to add a request").
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
#include "wire/message.h"

namespace tierckpt::wire {

inline constexpr uint32_t kFrameMagic = 0x504B4354;
inline constexpr uint16_t kProtocolVersion = 6;
inline constexpr size_t kFrameHeaderSize = 16;
// Large enough for the biggest manifest (kMaxManifestBytes, 64 MiB) in a
// CommitStep or Show response, or a CommitStep request naming ~1M objects.
// The header is checked before anything is allocated.
inline constexpr uint32_t kMaxPayload = 80u << 20;
static_assert(kMaxPayload == kMaxFieldBytes);
inline constexpr uint16_t kResponseBit = 0x8000;
// What a *request* may carry, checked by the agent from the header before it
// reads or allocates anything (MaxRequestPayload). A CommitStep request may
// name every object of a step, which cannot be more than a manifest
// (kMaxManifestBytes, 64 MiB) holds; every other request carries a few names
// (<= 1024 bytes each) and a checksum, far below 64 KiB.
inline constexpr uint32_t kMaxCommitRequestPayload = 64u << 20;
inline constexpr uint32_t kMaxSmallRequestPayload = 64u << 10;

// Writer ids (HelloRequest::writer): at most 128 bytes of [A-Za-z0-9_.:@/+=-].
inline constexpr size_t kMaxWriterIdLength = 128;
Status ValidateWriterId(std::string_view id);

// Name for logs, "unknown" otherwise.
std::string_view MsgTypeName(uint16_t type);
bool IsKnownRequestType(uint16_t type);
// The largest payload a request of this type may carry (the limit column of
// TIERCKPT_WIRE_MSG_TYPES); kMaxSmallRequestPayload for unknown types.
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

// ---- Requests and response bodies, declared once ----
// F(type, member, default, codec); wire/message.h. Decode validates field
// syntax only (lengths, bools); names and steps are validated by the agent
// with common/names.h so errors stay uniform.

// Hello: the first request on a connection. client: e.g. "tierckpt-cli 0.1",
// "python". writer: who writes the steps this connection writes, a job's
// identity, the same on every rank of the job (one writer per step,
// tier/memory_tier.h); "" = anonymous; ValidateWriterId's rule.
#define TIERCKPT_WIRE_HELLO_REQUEST(F)    \
  F(uint32_t, pid, 0, wire::U32())        \
  F(std::string, client, {}, wire::Str()) \
  F(std::string, writer, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(HelloRequest, "Hello", TIERCKPT_WIRE_HELLO_REQUEST);

// root: the tmpfs root of the memory tier; durable: its base URL, "" if none.
#define TIERCKPT_WIRE_HELLO_RESPONSE(F)          \
  F(std::string, node_id, {}, wire::Str())       \
  F(std::string, agent_version, {}, wire::Str()) \
  F(std::string, root, {}, wire::Str())          \
  F(std::string, durable, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(HelloResponse, "HelloResponse", TIERCKPT_WIRE_HELLO_RESPONSE);

// Names a step; used by BeginStep, AbortStep, Show, Restore, Verify, Persist.
#define TIERCKPT_WIRE_STEP_REQUEST(F) \
  F(std::string, ns, {}, wire::Str()) \
  F(uint64_t, step, 0, wire::U64())
TIERCKPT_WIRE_MESSAGE(StepRequest, "Step", TIERCKPT_WIRE_STEP_REQUEST);

// The response carries the object's writable fd (a tmpfs file already sized
// to `size`).
#define TIERCKPT_WIRE_CREATE_OBJECT_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())          \
  F(uint64_t, step, 0, wire::U64())            \
  F(std::string, name, {}, wire::Str())        \
  F(uint64_t, size, 0, wire::U64())
TIERCKPT_WIRE_MESSAGE(CreateObjectRequest, "CreateObject", TIERCKPT_WIRE_CREATE_OBJECT_REQUEST);

// CreateNextObject: the agent creates the first object named
// <prefix><n><suffix> (n in decimal) for n = first, first + 1, ... that is not
// sealed in the step yet (an unsealed one is replaced, as CreateObject does),
// trying at most kMaxNextObjectNames names. The response names the object
// and carries its writable fd.
inline constexpr uint32_t kMaxNextObjectNames = 64;
#define TIERCKPT_WIRE_CREATE_NEXT_OBJECT_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())               \
  F(uint64_t, step, 0, wire::U64())                 \
  F(std::string, prefix, {}, wire::Str())           \
  F(uint64_t, first, 0, wire::U64())                \
  F(std::string, suffix, {}, wire::Str())           \
  F(uint64_t, size, 0, wire::U64())
TIERCKPT_WIRE_MESSAGE(CreateNextObjectRequest, "CreateNextObject", TIERCKPT_WIRE_CREATE_NEXT_OBJECT_REQUEST);

// index: the n taken; name: <prefix><n><suffix>.
#define TIERCKPT_WIRE_CREATE_NEXT_OBJECT_RESPONSE(F) \
  F(uint64_t, index, 0, wire::U64())                 \
  F(std::string, name, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(CreateNextObjectResponse, "CreateNextObjectResponse",
                      TIERCKPT_WIRE_CREATE_NEXT_OBJECT_RESPONSE);

// checksum "" asks the agent to compute it; otherwise the agent verifies it.
#define TIERCKPT_WIRE_SEAL_OBJECT_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())        \
  F(uint64_t, step, 0, wire::U64())          \
  F(std::string, name, {}, wire::Str())      \
  F(uint64_t, size, 0, wire::U64())          \
  F(std::string, checksum, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(SealObjectRequest, "SealObject", TIERCKPT_WIRE_SEAL_OBJECT_REQUEST);

// persist: persist this step to durable. expected_objects: empty = every
// sealed object. members: the nodes the step spans (docs/multinode.md), empty
// or this node alone for a step written on one node; with several, the agent
// commits each other member's part through the peers first and its own last.
#define TIERCKPT_WIRE_COMMIT_STEP_REQUEST(F)                                          \
  F(std::string, ns, {}, wire::Str())                                                 \
  F(uint64_t, step, 0, wire::U64())                                                   \
  F(uint32_t, world_size, 0, wire::U32())                                             \
  F(bool, persist, false, wire::Bool())                                               \
  F(std::vector<std::string>, expected_objects, {}, wire::StrList(kMaxCommitObjects)) \
  F(std::vector<std::string>, members, {}, wire::StrList(kMaxCommitMembers))
inline constexpr uint32_t kMaxCommitObjects = 1'000'000;
inline constexpr uint32_t kMaxCommitMembers = 100'000;
TIERCKPT_WIRE_MESSAGE(CommitStepRequest, "CommitStep", TIERCKPT_WIRE_COMMIT_STEP_REQUEST);

// repair: the copy handed out before failed the client's checksum; the agent
// re-hashes its memory copy, replaces it from the next tier if it is corrupt,
// and hands out the copy it then holds (agent/read_path.h).
#define TIERCKPT_WIRE_OPEN_OBJECT_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())        \
  F(uint64_t, step, 0, wire::U64())          \
  F(std::string, name, {}, wire::Str())      \
  F(bool, repair, false, wire::Bool())
TIERCKPT_WIRE_MESSAGE(OpenObjectRequest, "OpenObject", TIERCKPT_WIRE_OPEN_OBJECT_REQUEST);

// The response carries a read-only fd.
// repaired: what a repair found and did ("" = the copy was not replaced),
// for the client's log: which copy was corrupt and where the step came from.
// verified_age_ms: milliseconds since the agent last found the object's bytes
// at rest matching checksum (its hash after seal, a restore, the scrub, a
// Verify), kNeverVerifiedAgeMs if it never did; a client reading in
// "attested" mode skips its own hash when this is within its limit
// (Client::ReadVerify).
inline constexpr uint64_t kNeverVerifiedAgeMs = UINT64_MAX;
#define TIERCKPT_WIRE_OPEN_OBJECT_RESPONSE(F) \
  F(uint64_t, size, 0, wire::U64())           \
  F(std::string, checksum, {}, wire::Str())   \
  F(std::string, repaired, {}, wire::Str())   \
  F(uint64_t, verified_age_ms, kNeverVerifiedAgeMs, wire::U64())
TIERCKPT_WIRE_MESSAGE(OpenObjectResponse, "OpenObjectResponse", TIERCKPT_WIRE_OPEN_OBJECT_RESPONSE);

// ns "" = all namespaces.
#define TIERCKPT_WIRE_LIST_REQUEST(F) \
  F(std::string, ns, {}, wire::Str()) \
  F(bool, include_durable, true, wire::Bool())
TIERCKPT_WIRE_MESSAGE(ListRequest, "List", TIERCKPT_WIRE_LIST_REQUEST);

// keep_replicas: this node's memory copy only (a reader dropping a corrupt
// copy).
#define TIERCKPT_WIRE_DELETE_STEP_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())        \
  F(uint64_t, step, 0, wire::U64())          \
  F(bool, durable_too, false, wire::Bool())  \
  F(bool, keep_replicas, false, wire::Bool())
TIERCKPT_WIRE_MESSAGE(DeleteStepRequest, "DeleteStep", TIERCKPT_WIRE_DELETE_STEP_REQUEST);

// ns "" = all namespaces; keep_memory 0 = the agent's retention setting;
// keep_durable 0 = leave durable alone.
#define TIERCKPT_WIRE_PRUNE_REQUEST(F)     \
  F(std::string, ns, {}, wire::Str())      \
  F(uint32_t, keep_memory, 0, wire::U32()) \
  F(uint32_t, keep_durable, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(PruneRequest, "Prune", TIERCKPT_WIRE_PRUNE_REQUEST);

// timeout_ms 0 = wait forever.
#define TIERCKPT_WIRE_WAIT_DURABLE_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())         \
  F(uint64_t, step, 0, wire::U64())           \
  F(uint32_t, timeout_ms, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(WaitDurableRequest, "WaitDurable", TIERCKPT_WIRE_WAIT_DURABLE_REQUEST);

// BindDurable: the namespace ns persists to `base` from now on (per-job
// durable bases, agent/durable_bases.h): an absolute path, file:///path,
// s3://bucket/prefix or mem://name; the agent's default base unbinds. The
// response (JsonBody) is {"namespace", "durable"}: the base now used.
#define TIERCKPT_WIRE_BIND_DURABLE_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())         \
  F(std::string, base, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(BindDurableRequest, "BindDurable", TIERCKPT_WIRE_BIND_DURABLE_REQUEST);

// SetPolicy: the save policy of namespace ns from the writers' config
// (decision 118; agent/namespace_policy.h): keep_memory committed steps in
// memory, keep_durable durable steps, and persist every step whose number is
// a multiple of persist_every; 0 = no opinion (the agent's flag). The agent
// combines it with its own flags (the stricter retention, either cadence).
// kFailedPrecondition while a different policy of ns is held by another open
// connection.
#define TIERCKPT_WIRE_SET_POLICY_REQUEST(F)  \
  F(std::string, ns, {}, wire::Str())        \
  F(uint32_t, keep_memory, 0, wire::U32())   \
  F(uint32_t, keep_durable, 0, wire::U32())  \
  F(uint64_t, persist_every, 0, wire::U64())
TIERCKPT_WIRE_MESSAGE(SetPolicyRequest, "SetPolicy", TIERCKPT_WIRE_SET_POLICY_REQUEST);

// Responses whose body is one JSON document (List, Show, Stats, Verify,
// Prune, DeleteStep, CommitStep — the committed manifest). The JSON shapes
// are in docs/protocol.md.
#define TIERCKPT_WIRE_JSON_BODY(F) F(std::string, json, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(JsonBody, "JsonBody", TIERCKPT_WIRE_JSON_BODY);

// Empty (wire/message.h): the Stats and Shutdown requests, and the bodies of
// replies that carry only a status.

// ---- Message types, declared once ----
// X(enum, number, name, request message, response body, request size limit).
// Numbers are part of the protocol: never renumber, only append.
#define TIERCKPT_WIRE_MSG_TYPES(X)                                                                \
  X(kHello, 1, "Hello", HelloRequest, HelloResponse, kMaxSmallRequestPayload)                     \
  X(kBeginStep, 2, "BeginStep", StepRequest, Empty, kMaxSmallRequestPayload)                      \
  X(kCreateObject, 3, "CreateObject", CreateObjectRequest, Empty, kMaxSmallRequestPayload)        \
  X(kSealObject, 4, "SealObject", SealObjectRequest, Empty, kMaxSmallRequestPayload)              \
  X(kCommitStep, 5, "CommitStep", CommitStepRequest, JsonBody, kMaxCommitRequestPayload)          \
  X(kAbortStep, 6, "AbortStep", StepRequest, Empty, kMaxSmallRequestPayload)                      \
  X(kList, 7, "List", ListRequest, JsonBody, kMaxSmallRequestPayload)                             \
  X(kShow, 8, "Show", StepRequest, JsonBody, kMaxSmallRequestPayload)                             \
  X(kOpenObject, 9, "OpenObject", OpenObjectRequest, OpenObjectResponse, kMaxSmallRequestPayload) \
  X(kDeleteStep, 10, "DeleteStep", DeleteStepRequest, JsonBody, kMaxSmallRequestPayload)          \
  X(kPrune, 11, "Prune", PruneRequest, JsonBody, kMaxSmallRequestPayload)                         \
  X(kStats, 12, "Stats", Empty, JsonBody, kMaxSmallRequestPayload)                                \
  X(kWaitDurable, 13, "WaitDurable", WaitDurableRequest, Empty, kMaxSmallRequestPayload)          \
  X(kRestore, 14, "Restore", StepRequest, Empty, kMaxSmallRequestPayload)                         \
  X(kVerify, 15, "Verify", StepRequest, JsonBody, kMaxSmallRequestPayload)                        \
  X(kShutdown, 16, "Shutdown", Empty, Empty, kMaxSmallRequestPayload)                             \
  X(kPersist, 17, "Persist", StepRequest, Empty, kMaxSmallRequestPayload)                         \
  X(kCreateNextObject, 18, "CreateNextObject", CreateNextObjectRequest, CreateNextObjectResponse, \
    kMaxSmallRequestPayload)                                                                      \
  X(kBeginSave, 19, "BeginSave", StepRequest, Empty, kMaxSmallRequestPayload)                     \
  X(kBindDurable, 20, "BindDurable", BindDurableRequest, JsonBody, kMaxSmallRequestPayload)     \
  X(kSetPolicy, 21, "SetPolicy", SetPolicyRequest, Empty, kMaxSmallRequestPayload)     \
  X(kBeginSaveCreateNext, 22, "BeginSaveCreateNext", CreateNextObjectRequest,                   \
    CreateNextObjectResponse, kMaxSmallRequestPayload)

enum class MsgType : uint16_t {
#define TIERCKPT_WIRE_MSG_ENUM(name, number, text, Request, Response, limit) name = number,
  TIERCKPT_WIRE_MSG_TYPES(TIERCKPT_WIRE_MSG_ENUM)
#undef TIERCKPT_WIRE_MSG_ENUM
};

// ---- Response envelope ----
// payload = ResponseHeader + (the body if code == 0). code is the Status code
// (tierckpt/status.h); message is "" when ok, else the error's message cut
// to kMaxResponseMessage bytes.
inline constexpr uint32_t kMaxResponseMessage = 64u << 10;
#define TIERCKPT_WIRE_RESPONSE_HEADER(F) \
  F(uint32_t, code, 0, wire::U32())      \
  F(std::string, message, {}, wire::Str(kMaxFieldBytes, kMaxResponseMessage))
TIERCKPT_WIRE_MESSAGE(ResponseHeader, "Response", TIERCKPT_WIRE_RESPONSE_HEADER);

std::string EncodeResponse(const Status& status, std::string_view body);
// Splits a response payload: returns the body, or the non-ok Status the agent
// sent (code and message as sent).
Result<std::string> DecodeResponse(std::string_view payload);

}  // namespace tierckpt::wire
