// fuzz_peer_messages — the decoders of what agents say to each other
// (src/agent/peer_messages.h): requests of every type, error replies and step
// lists. The first byte picks the decoder, the rest is the payload. A payload
// that decodes must re-encode to itself (requests, steps) and never crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/peer_messages.h"

using tierckpt::agent::PeerMsg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  static constexpr PeerMsg kRequests[] = {PeerMsg::kGetManifest, PeerMsg::kListSteps, PeerMsg::kGetObject,
                                          PeerMsg::kReplicate, PeerMsg::kPersistPart,
                                          PeerMsg::kDropReplica};
  switch (data[0] % 8) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5: {
      const PeerMsg type = kRequests[data[0] % 8];
      auto r = tierckpt::agent::DecodePeerRequest(type, payload);
      if (r.ok() && tierckpt::agent::EncodePeerRequest(type, *r) != payload) std::abort();
      break;
    }
    case 6: {
      tierckpt::Status s = tierckpt::agent::DecodePeerError(payload);
      if (s.ok()) std::abort();  // an error reply never decodes to Ok
      break;
    }
    default: {
      auto steps = tierckpt::agent::DecodeSteps(payload);
      if (steps.ok() && tierckpt::agent::EncodeSteps(*steps) != payload) std::abort();
      break;
    }
  }
  return 0;
}
