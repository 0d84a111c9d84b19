// peer_frame_golden_test.cc — pins the bytes of the peer protocol's frames
// (version 1): the header and one populated instance of every frame payload,
// against hex captured from the hand-written encoders before the payloads
// were declared once. A change to a declaration that moves a byte fails here:
// it needs a new kPeerProtocolVersion, docs/peer-protocol.md and the corpora.
#include <gtest/gtest.h>

#include <string>

#include "peer/peer_frame.h"
#include "testing/golden.h"

namespace tierckpt::peer {
namespace {

using ::tierckpt::testing_util::ExpectGolden;
using ::tierckpt::testing_util::Hex;

std::string Repeat(std::string_view hex_byte, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += hex_byte;
  return out;
}

TEST(PeerWireFormatGoldenTest, EveryFramePayloadEncodesToTheVersion1Bytes) {
  ExpectGolden(HelloPayload{Role::kServer, 1, 1, "node-a", std::string(32, 'n')},
               "0201000100060000006e6f64652d6120000000" + Repeat("6e", 32));
  ExpectGolden(ProofPayload{std::string(32, 'm')}, "20000000" + Repeat("6d", 32));
  ExpectGolden(RejectPayload{8, "denied"}, "080000000600000064656e696564");
  ExpectGolden(StreamBeginPayload{7, 100, "dir/obj"},
               "07000000000000006400000000000000070000006469722f6f626a");
  ExpectGolden(StreamEndPayload{7, 100, 0x0123456789abcdefull},
               "07000000000000006400000000000000efcdab8967452301");
  ExpectGolden(StreamAbortPayload{7, "disk full"}, "0700000000000000090000006469736b2066756c6c");

  uint8_t prefix[kStreamDataPrefix];
  StreamDataPrefix{7, 64, 36}.Encode(prefix);
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<const char*>(prefix), sizeof(prefix))),
            "0700000000000000400000000000000024000000");
  StreamDataPrefix back = StreamDataPrefix::Decode(prefix);
  EXPECT_EQ(back.object_id, 7u);
  EXPECT_EQ(back.offset, 64u);
  EXPECT_EQ(back.length, 36u);
}

TEST(PeerWireFormatGoldenTest, RejectAndAbortMessagesAreCutTo1024BytesOnEncode) {
  const std::string reject = RejectPayload{1, std::string(1100, 'r')}.Encode();
  EXPECT_EQ(Hex(reject.substr(0, 12)), "010000000004000072727272");
  EXPECT_EQ(reject.size(), 1032u);
  EXPECT_EQ((StreamAbortPayload{1, std::string(1100, 'r')}.Encode().size()), 1036u);
}

TEST(PeerWireFormatGoldenTest, HeaderKindNamesAndLimitsAreThoseOfVersion1) {
  PeerFrameHeader h;
  h.kind = FrameKind::kControl;
  h.type = 10;
  h.request_id = 9;
  h.payload_len = 3;
  uint8_t header[kPeerFrameHeaderSize];
  EncodePeerHeader(h, header);
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<const char*>(header), sizeof(header))),
            "54435052010005000a0000000900000003000000");
  struct Kind {
    const char* name;
    uint32_t max_payload;
  } kinds[] = {{"unknown", 0},    {"Hello", 4096},       {"Proof", 4096},        {"Ready", 4096},
               {"Reject", 4096},  {"Control", 83886080}, {"StreamBegin", 65556}, {"StreamData", 16777236},
               {"StreamEnd", 24}, {"StreamAbort", 4096}, {"unknown", 0}};
  for (uint8_t k = 0; k <= 10; ++k) {
    EXPECT_EQ(FrameKindName(static_cast<FrameKind>(k)), kinds[k].name) << int{k};
    EXPECT_EQ(MaxPayloadFor(static_cast<FrameKind>(k)), kinds[k].max_payload) << int{k};
  }
}

}  // namespace
}  // namespace tierckpt::peer
