// peer_messages.h — what node agents say to each other over the peer
// transport (peer/transport.h): the control messages and their payloads,
// declared once. docs/replication.md describes the exchanges; the frames are
// docs/peer-protocol.md's (peer_frame.h).
//
// Every request is one Control frame whose type is a PeerMsg and whose
// request id the reply echoes. A reply is a Control frame (kManifest, kSteps,
// kDone, kError) or, for kGetObject, a stream of type kObject.
//
//   kGetManifest  {origin, ns, step}        → kManifest {json} | kError
//   kListSteps    {origin, ns}              → kSteps {u32 n, u64 × n} | kError
//   kGetObject    {origin, ns, step, name}  → stream kObject (metadata: name) | kError
//   kReplicate    {ns, step}                → kDone | kError
//   kCommitPart   wire::CommitStepRequest   → kManifest {json} | kError
//   kPersistPart  {origin, ns, step}        → kDone | kError
//   kDropReplica  {ns, step}                → kDone {u32 1 = dropped, 0 = held none} | kError
//   kCommitSubtree {fan_out, root, CommitStep request} → kSubtreeCommitted {sums} | kError
//   kCommitRingSubtree {fan_out, root, ring, member runs, CommitStep request without members}
//                                           → kSubtreeCommitted {sums} | kError
//   kFoldParity   {ns, step, k, m, group, index, wait_ms} → kParityFolded {folded, members, sealed} | kError
//   kDropParity   {ns, step}                → kDone {u32 1 = dropped, 0 = held none} | kError
//   kGetParityRecord {ns, step, group, piece = 0} → kParityRecord {record json} | kError
//   kGetParityPiece  {ns, step, group, piece}     → stream kObject (metadata: parity_<piece>) | kError
//
// `origin` is the node whose data is asked for: the serving agent's own node
// id means its own memory tier; another node id means the replicas it holds
// for that node. kReplicate asks the receiver to hold a replica of the
// sender's committed step (the sender is the origin: its authenticated node
// id); kDropReplica asks it to delete its replica of the sender's step (a
// `tierckpt rm` on the origin). kError carries a Status code and message, so
// errors cross the network unchanged.
//
// Steps spanning nodes (docs/multinode.md): kCommitPart asks the receiver to
// commit its own part of a step (the objects its local ranks sealed) with the
// step's members, replicate it as any commit, and answer its part manifest.
// kPersistPart asks the receiver to upload origin's part of a step to the
// durable tier and write origin's part record: from its own memory (origin =
// its node id) or from the replica it holds (a holder taking over for an
// origin that cannot).
//
// kCommitSubtree (decision 102) is how a coordinator commits a step spanning
// nodes today: the members form a tree of the given fan-out rooted at the
// coordinator (replication/commit_tree.h); the receiver asks its own
// children, commits its part, and answers the sums of its subtree (parts,
// objects, bytes, a digest of the names, the depth) once the whole subtree
// committed, or the error naming the member that failed. kCommitPart (one
// member, answered with its manifest) is what coordinators before it send;
// it is still answered.
//
// The erasure-coded tier (issue 23, decisions 126–127): kFoldParity asks
// the receiver, one of the M parity holders of the caller's group under an
// rs:k+m layout, to pull the caller's committed part of (ns, step) (its
// manifest and objects, as kReplicate pulls a replica) and fold it into its
// parity piece as data piece `index` of `group`. The receiver checks every
// field against its own layout (the caller is that group's data member
// `index`, and the receiver holds a parity piece of it). It answers once the
// part is folded and verified, or, with wait_ms > 0, once the group's last
// part is too (sealed, the record written) or wait_ms passed; kParityFolded
// says how many of the group's data members are folded and whether the
// parity is sealed. kDropParity asks the receiver to forget its parity of
// (ns, step), folding or sealed (a delete or retention on the members), of
// the group the caller is a data member of only; a caller that is a data
// member of no group whose parity the receiver holds is refused with
// kPermissionDenied (decision 131).
//
// Declared once: the fields a request may carry are TIERCKPT_PEER_REQUEST
// (one line each, wire/message.h); each message is one line of
// TIERCKPT_PEER_MSGS, which names it, numbers it and says what its payload is
// (for a request: which of those fields it carries, always in declaration
// order). Encoders, decoders, PeerMsgName, the golden test
// (peer_messages_golden_test.cc) and the fuzz seeds follow from them.
//
// Decoders check field syntax and lengths only (kProtocolError); names are
// validated by whoever builds a path. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"
#include "wire/message.h"
#include "wire/protocol.h"

namespace tierckpt::peer {

// What a request is about: every field any request carries. Unused fields
// stay empty/0. F(type, member, default, codec).
#define TIERCKPT_PEER_REQUEST(F)          \
  F(std::string, origin, {}, wire::Str()) \
  F(std::string, ns, {}, wire::Str())     \
  F(uint64_t, step, 0, wire::U64())       \
  F(std::string, name, {}, wire::Str())
struct PeerRequest {
  TIERCKPT_WIRE_FIELDS(PeerRequest, "PeerRequest", TIERCKPT_PEER_REQUEST)
};

// One bit per field of PeerRequest, in declaration order.
enum class PeerField : uint8_t {
#define TIERCKPT_PEER_FIELD_ENUM(type, member, init, codec) member,
  TIERCKPT_PEER_REQUEST(TIERCKPT_PEER_FIELD_ENUM)
#undef TIERCKPT_PEER_FIELD_ENUM
};
// The set of fields a request carries.
template <typename... Fields>
constexpr uint32_t Carries(Fields... fields) {
  return ((1u << static_cast<unsigned>(fields)) | ... | 0u);
}

// kError's payload: a Status (code never 0), its message cut to 4096 bytes.
inline constexpr uint32_t kMaxPeerErrorMessage = 4096;
#define TIERCKPT_PEER_ERROR_PAYLOAD(F) \
  F(uint32_t, code, 0, wire::U32())    \
  F(std::string, message, {}, wire::Str(wire::kMaxFieldBytes, /*cut=*/kMaxPeerErrorMessage))
TIERCKPT_WIRE_MESSAGE(PeerErrorPayload, "Error", TIERCKPT_PEER_ERROR_PAYLOAD);

// kSteps' payload: the committed steps of a namespace.
inline constexpr uint32_t kMaxSteps = 1u << 20;
#define TIERCKPT_PEER_STEPS_PAYLOAD(F) F(std::vector<uint64_t>, steps, {}, wire::U64List(kMaxSteps))
TIERCKPT_WIRE_MESSAGE(StepsPayload, "Steps", TIERCKPT_PEER_STEPS_PAYLOAD);

// kDone's payload answering kDropReplica: whether the receiver held the
// replica it dropped (1) or held none (0). kDone answers the other requests
// with no payload, so its Payload column stays RawBytes.
#define TIERCKPT_PEER_DROP_REPLICA_ANSWER(F) F(uint32_t, held, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(DropReplicaAnswer, "DropReplica answer", TIERCKPT_PEER_DROP_REPLICA_ANSWER);

// kCommitSubtree's payload: the commit tree (fan-out, root) and the local
// protocol's CommitStep request (encoded) that every member commits.
#define TIERCKPT_PEER_COMMIT_SUBTREE_REQUEST(F) \
  F(uint32_t, fan_out, 0, wire::U32())          \
  F(std::string, root, {}, wire::Str())         \
  F(std::string, commit, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(CommitSubtreeRequest, "CommitSubtree", TIERCKPT_PEER_COMMIT_SUBTREE_REQUEST);

// kCommitRingSubtree's payload: the commit tree (fan-out, root), the ring
// the positions refer to (its size and digest, replication/member_runs.h),
// the members as [start, count] pairs of ring positions, and the local
// protocol's CommitStep request (encoded) with an empty member list.
#define TIERCKPT_PEER_COMMIT_RING_SUBTREE_REQUEST(F)                            \
  F(uint32_t, fan_out, 0, wire::U32())                                          \
  F(std::string, root, {}, wire::Str())                                         \
  F(uint32_t, ring_size, 0, wire::U32())                                        \
  F(uint64_t, ring_digest, 0, wire::U64())                                      \
  F(std::vector<uint64_t>, member_runs, {}, wire::U64List(2 * wire::kMaxCommitMembers)) \
  F(std::string, commit, {}, wire::Str())
TIERCKPT_WIRE_MESSAGE(CommitRingSubtreeRequest, "CommitRingSubtree",
                      TIERCKPT_PEER_COMMIT_RING_SUBTREE_REQUEST);

// kSubtreeCommitted's payload: what the answering node's subtree committed,
// added up (the same size whatever the subtree's size): parts, objects,
// bytes, names (the sum of the XXH3-64 of every object name, mod 2^64), the
// largest world size, whether any part awaits its hashes, and the hops from
// the answering node to its deepest member.
#define TIERCKPT_PEER_SUBTREE_COMMITTED(F)        \
  F(uint32_t, parts, 0, wire::U32())              \
  F(uint64_t, objects, 0, wire::U64())            \
  F(uint64_t, bytes, 0, wire::U64())              \
  F(uint64_t, names, 0, wire::U64())              \
  F(uint32_t, world_size, 0, wire::U32())         \
  F(bool, checksums_pending, false, wire::Bool()) \
  F(uint32_t, depth, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(SubtreeCommitted, "SubtreeCommitted", TIERCKPT_PEER_SUBTREE_COMMITTED);

// kFoldParity's payload. wait_ms is at most kMaxParityWaitMs.
inline constexpr uint32_t kMaxParityWaitMs = 600000;
#define TIERCKPT_PEER_FOLD_PARITY_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())        \
  F(uint64_t, step, 0, wire::U64())          \
  F(uint32_t, k, 0, wire::U32())             \
  F(uint32_t, m, 0, wire::U32())             \
  F(uint32_t, group, 0, wire::U32())         \
  F(uint32_t, index, 0, wire::U32())         \
  F(uint32_t, wait_ms, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(FoldParityRequest, "FoldParity", TIERCKPT_PEER_FOLD_PARITY_REQUEST);

// kParityFolded's payload: the group's data members folded so far (this
// caller's included), of how many, and whether the parity is sealed (every
// member folded and verified, the record written).
#define TIERCKPT_PEER_PARITY_FOLDED(F) \
  F(uint32_t, folded, 0, wire::U32())  \
  F(uint32_t, members, 0, wire::U32()) \
  F(bool, sealed, false, wire::Bool())
TIERCKPT_WIRE_MESSAGE(ParityFolded, "ParityFolded", TIERCKPT_PEER_PARITY_FOLDED);

// kGetParityRecord's and kGetParityPiece's payload: the group of (ns, step)
// and, for a piece, its parity index in [0, m) (0 in a record request).
#define TIERCKPT_PEER_GET_PARITY_REQUEST(F) \
  F(std::string, ns, {}, wire::Str())       \
  F(uint64_t, step, 0, wire::U64())         \
  F(uint32_t, group, 0, wire::U32())        \
  F(uint32_t, piece, 0, wire::U32())
TIERCKPT_WIRE_MESSAGE(GetParityRequest, "GetParity", TIERCKPT_PEER_GET_PARITY_REQUEST);

// What a payload without a declared message holds (the Payload column).
struct RawBytes {};  // kManifest's manifest JSON, kDone's answer, kObject's stream, kParityRecord's JSON

// X(enum, number, name, payload message, fields): a request's payload is
// PeerRequest and `fields` says which of its fields it carries; any other
// message has fields 0. Numbers are part of the protocol: never renumber.
#define TIERCKPT_PEER_MSGS(X)                                                                                \
  X(kError, 1, "Error", PeerErrorPayload, 0)                                                                 \
  X(kGetManifest, 2, "GetManifest", PeerRequest, Carries(PeerField::origin, PeerField::ns, PeerField::step)) \
  X(kManifest, 3, "Manifest", RawBytes, 0)                                                                   \
  X(kListSteps, 4, "ListSteps", PeerRequest, Carries(PeerField::origin, PeerField::ns))                      \
  X(kSteps, 5, "Steps", StepsPayload, 0)                                                                     \
  X(kGetObject, 6, "GetObject", PeerRequest,                                                                 \
    Carries(PeerField::origin, PeerField::ns, PeerField::step, PeerField::name))                             \
  X(kObject, 7, "Object", RawBytes, 0)                                                                       \
  X(kReplicate, 8, "Replicate", PeerRequest, Carries(PeerField::ns, PeerField::step))                        \
  X(kDone, 9, "Done", RawBytes, 0)                                                                           \
  X(kCommitPart, 10, "CommitPart", wire::CommitStepRequest, 0)                                               \
  X(kPersistPart, 11, "PersistPart", PeerRequest,                                                            \
    Carries(PeerField::origin, PeerField::ns, PeerField::step))                                              \
  X(kDropReplica, 12, "DropReplica", PeerRequest, Carries(PeerField::ns, PeerField::step))                   \
  X(kCommitSubtree, 13, "CommitSubtree", CommitSubtreeRequest, 0)                                            \
  X(kSubtreeCommitted, 14, "SubtreeCommitted", SubtreeCommitted, 0)                                          \
  X(kCommitRingSubtree, 15, "CommitRingSubtree", CommitRingSubtreeRequest, 0)                                \
  X(kFoldParity, 16, "FoldParity", FoldParityRequest, 0)                                                     \
  X(kParityFolded, 17, "ParityFolded", ParityFolded, 0)                                                      \
  X(kDropParity, 18, "DropParity", PeerRequest, Carries(PeerField::ns, PeerField::step))                     \
  X(kGetParityRecord, 19, "GetParityRecord", GetParityRequest, 0)                                            \
  X(kGetParityPiece, 20, "GetParityPiece", GetParityRequest, 0)                                              \
  X(kParityRecord, 21, "ParityRecord", RawBytes, 0)

enum class PeerMsg : uint16_t {
#define TIERCKPT_PEER_MSG_ENUM(name, number, text, Payload, fields) name = number,
  TIERCKPT_PEER_MSGS(TIERCKPT_PEER_MSG_ENUM)
#undef TIERCKPT_PEER_MSG_ENUM
};

// "GetManifest", for logs; "unknown" otherwise.
std::string_view PeerMsgName(uint16_t type);
// The fields of PeerRequest a message of this type carries (Carries(...));
// 0 for a type that is not a PeerRequest.
uint32_t PeerRequestFields(PeerMsg type);

// Encodes the fields `type` carries, in declaration order.
std::string EncodePeerRequest(PeerMsg type, const PeerRequest& r);
Result<PeerRequest> DecodePeerRequest(PeerMsg type, std::string_view payload);

std::string EncodePeerError(const Status& s);
// The Status the payload carries (never Ok: a code of 0 becomes kProtocolError).
Status DecodePeerError(std::string_view payload);

std::string EncodeSteps(const std::vector<uint64_t>& steps);
Result<std::vector<uint64_t>> DecodeSteps(std::string_view payload);

}  // namespace tierckpt::peer
