// fuzz_peer_messages — the decoders of the peer protocol: what agents say to
// each other (peer/peer_messages.h: requests of every type, error replies,
// step lists, CommitPart) and the payload of every frame kind
// (peer/peer_frame.h). The first byte picks the decoder from
// fuzz::kPeerDecoders (samples.h, generated from the declarations), the rest
// is the payload. A payload that decodes must re-encode to itself, an error
// reply never decodes to Ok, and nothing crashes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "samples.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  tierckpt::fuzz::kPeerDecoders[data[0] % tierckpt::fuzz::kPeerDecoderCount].run(payload);
  return 0;
}
