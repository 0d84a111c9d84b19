// peer_messages.h — what node agents say to each other over the peer
// transport (peer/transport.h): the control messages and their payloads.
// docs/replication.md describes the exchanges; the frames are
// docs/peer-protocol.md's.
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
//
// `origin` is the node whose data is asked for: the serving agent's own node
// id means its own memory tier; another node id means the replicas it holds
// for that node. kReplicate asks the receiver to hold a replica of the
// sender's committed step (the sender is the origin: its authenticated node
// id); kDropReplica asks it to delete its replica of the sender's step (a
// `tierckpt rm` on the origin). kError carries a Status code and message, so errors cross the network
// unchanged.
//
// Steps spanning nodes (docs/multinode.md): kCommitPart asks the receiver to
// commit its own part of a step (the objects its local ranks sealed) with the
// step's members, replicate it as any commit, and answer its part manifest.
// kPersistPart asks the receiver to upload origin's part of a step to the
// durable tier and write origin's part record: from its own memory (origin =
// its node id) or from the replica it holds (a holder taking over for an
// origin that cannot).
//
// Decoders check field syntax and lengths only (kProtocolError); names are
// validated by whoever builds a path. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tierckpt/status.h"

namespace tierckpt::agent {

enum class PeerMsg : uint16_t {
  kError = 1,
  kGetManifest = 2,
  kManifest = 3,
  kListSteps = 4,
  kSteps = 5,
  kGetObject = 6,
  kObject = 7,
  kReplicate = 8,
  kDone = 9,
  kCommitPart = 10,
  kPersistPart = 11,
  kDropReplica = 12,
};

// "GetManifest", for logs; "unknown" otherwise.
std::string_view PeerMsgName(uint16_t type);

// What a request is about. Unused fields stay empty/0.
struct PeerRequest {
  std::string origin;
  std::string ns;
  uint64_t step = 0;
  std::string name;
};

std::string EncodePeerRequest(PeerMsg type, const PeerRequest& r);
Result<PeerRequest> DecodePeerRequest(PeerMsg type, std::string_view payload);

std::string EncodePeerError(const Status& s);
// The Status the payload carries (never Ok: a code of 0 becomes kProtocolError).
Status DecodePeerError(std::string_view payload);

std::string EncodeSteps(const std::vector<uint64_t>& steps);
Result<std::vector<uint64_t>> DecodeSteps(std::string_view payload);

}  // namespace tierckpt::agent
