// peer_messages.cc — see peer_messages.h.
#include "agent/peer_messages.h"

#include "wire/protocol.h"

namespace tierckpt::agent {
namespace {

constexpr uint32_t kMaxSteps = 1u << 20;

bool HasName(PeerMsg type) { return type == PeerMsg::kGetObject; }
bool HasStep(PeerMsg type) { return type != PeerMsg::kListSteps; }
bool HasOrigin(PeerMsg type) { return type != PeerMsg::kReplicate && type != PeerMsg::kDropReplica; }

}  // namespace

std::string_view PeerMsgName(uint16_t type) {
  switch (static_cast<PeerMsg>(type)) {
    case PeerMsg::kError: return "Error";
    case PeerMsg::kGetManifest: return "GetManifest";
    case PeerMsg::kManifest: return "Manifest";
    case PeerMsg::kListSteps: return "ListSteps";
    case PeerMsg::kSteps: return "Steps";
    case PeerMsg::kGetObject: return "GetObject";
    case PeerMsg::kObject: return "Object";
    case PeerMsg::kReplicate: return "Replicate";
    case PeerMsg::kDone: return "Done";
    case PeerMsg::kCommitPart: return "CommitPart";
    case PeerMsg::kPersistPart: return "PersistPart";
    case PeerMsg::kDropReplica: return "DropReplica";
  }
  return "unknown";
}

std::string EncodePeerRequest(PeerMsg type, const PeerRequest& r) {
  wire::Encoder e;
  if (HasOrigin(type)) e.Str(r.origin);
  e.Str(r.ns);
  if (HasStep(type)) e.U64(r.step);
  if (HasName(type)) e.Str(r.name);
  return e.Take();
}

Result<PeerRequest> DecodePeerRequest(PeerMsg type, std::string_view payload) {
  PeerRequest r;
  wire::Decoder d(payload);
  if (HasOrigin(type)) TC_RETURN_IF_ERROR(d.Str(&r.origin, "origin"));
  TC_RETURN_IF_ERROR(d.Str(&r.ns, "namespace"));
  if (HasStep(type)) TC_RETURN_IF_ERROR(d.U64(&r.step, "step"));
  if (HasName(type)) TC_RETURN_IF_ERROR(d.Str(&r.name, "object name"));
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string EncodePeerError(const Status& s) {
  wire::Encoder e;
  e.U32(static_cast<uint32_t>(s.code()));
  e.Str(s.message().substr(0, 4096));
  return e.Take();
}

Status DecodePeerError(std::string_view payload) {
  wire::Decoder d(payload);
  uint32_t code = 0;
  std::string message;
  TC_RETURN_IF_ERROR(d.U32(&code, "error code"));
  TC_RETURN_IF_ERROR(d.Str(&message, "error message"));
  TC_RETURN_IF_ERROR(d.Finish());
  if (code == 0) return ProtocolError("a peer sent an error with code 0 (" + message + ")");
  return Status(CodeFromNumber(code), std::move(message));
}

std::string EncodeSteps(const std::vector<uint64_t>& steps) {
  wire::Encoder e;
  e.U32(static_cast<uint32_t>(steps.size()));
  for (uint64_t s : steps) e.U64(s);
  return e.Take();
}

Result<std::vector<uint64_t>> DecodeSteps(std::string_view payload) {
  wire::Decoder d(payload);
  uint32_t n = 0;
  TC_RETURN_IF_ERROR(d.U32(&n, "step count"));
  if (n > kMaxSteps) return ProtocolError("a peer listed " + std::to_string(n) + " steps, above the limit");
  std::vector<uint64_t> steps(n);
  for (uint64_t& s : steps) TC_RETURN_IF_ERROR(d.U64(&s, "step"));
  TC_RETURN_IF_ERROR(d.Finish());
  return steps;
}

}  // namespace tierckpt::agent
