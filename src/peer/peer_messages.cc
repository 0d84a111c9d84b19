// peer_messages.cc — see peer_messages.h.
#include "peer/peer_messages.h"

#include <utility>

namespace tierckpt::peer {

std::string_view PeerMsgName(uint16_t type) {
  switch (static_cast<PeerMsg>(type)) {
#define TIERCKPT_PEER_MSG_NAME(name, number, text, Payload, fields) \
  case PeerMsg::name:                                               \
    return text;
    TIERCKPT_PEER_MSGS(TIERCKPT_PEER_MSG_NAME)
#undef TIERCKPT_PEER_MSG_NAME
  }
  return "unknown";
}

uint32_t PeerRequestFields(PeerMsg type) {
  switch (type) {
#define TIERCKPT_PEER_MSG_FIELDS(name, number, text, Payload, fields) \
  case PeerMsg::name:                                                 \
    return fields;
    TIERCKPT_PEER_MSGS(TIERCKPT_PEER_MSG_FIELDS)
#undef TIERCKPT_PEER_MSG_FIELDS
  }
  return 0;
}

std::string EncodePeerRequest(PeerMsg type, const PeerRequest& r) {
  const uint32_t carried = PeerRequestFields(type);
  wire::Encoder e;
  unsigned bit = 0;
  r.ForEachField([&](std::string_view, const auto& value, const auto& codec) {
    if ((carried & (1u << bit++)) != 0) Put(e, codec, value);
  });
  return e.Take();
}

Result<PeerRequest> DecodePeerRequest(PeerMsg type, std::string_view payload) {
  const uint32_t carried = PeerRequestFields(type);
  wire::Decoder d(payload, PeerMsgName(static_cast<uint16_t>(type)));
  PeerRequest r;
  Status st;
  unsigned bit = 0;
  r.ForEachField([&](std::string_view field, auto& value, const auto& codec) {
    if (st.ok() && (carried & (1u << bit)) != 0) st = Get(d, codec, &value, field);
    ++bit;
  });
  TC_RETURN_IF_ERROR(st);
  TC_RETURN_IF_ERROR(d.Finish());
  return r;
}

std::string EncodePeerError(const Status& s) {
  return PeerErrorPayload{static_cast<uint32_t>(s.code()), s.message()}.Encode();
}

Status DecodePeerError(std::string_view payload) {
  Result<PeerErrorPayload> e = PeerErrorPayload::Decode(payload);
  if (!e.ok()) return e.status();
  if (e->code == 0) return ProtocolError("a peer sent an error with code 0 (" + e->message + ")");
  return Status(CodeFromNumber(e->code), std::move(e->message));
}

std::string EncodeSteps(const std::vector<uint64_t>& steps) { return StepsPayload{steps}.Encode(); }

Result<std::vector<uint64_t>> DecodeSteps(std::string_view payload) {
  TC_ASSIGN_OR_RETURN(StepsPayload s, StepsPayload::Decode(payload));
  return std::move(s.steps);
}

}  // namespace tierckpt::peer
