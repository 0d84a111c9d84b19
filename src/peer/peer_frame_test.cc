#include "peer/peer_frame.h"

#include <gtest/gtest.h>

#include <string>

#include "peer/peer_test_util.h"

namespace tierckpt::peer {
namespace {

using testing_util::MessageHas;

TEST(PeerFrameTest, HeaderRoundTripsAndSpellsTCPR) {
  PeerFrameHeader h;
  h.kind = FrameKind::kStreamBegin;
  h.type = 0x1234;
  h.request_id = 0xdeadbeef;
  h.payload_len = 77;
  uint8_t buf[kPeerFrameHeaderSize];
  EncodePeerHeader(h, buf);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(buf), 4), "TCPR");
  auto d = DecodePeerHeader(buf, "peer test");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->kind, FrameKind::kStreamBegin);
  EXPECT_EQ(d->type, 0x1234);
  EXPECT_EQ(d->request_id, 0xdeadbeefu);
  EXPECT_EQ(d->payload_len, 77u);
}

TEST(PeerFrameTest, EveryBadHeaderFieldIsAProtocolErrorNamingPeerAndField) {
  struct Case {
    size_t offset;
    uint8_t value;
    std::string field;
  } cases[] = {{0, 'X', "field magic"}, {4, 9, "field version"}, {6, 0, "field kind"},
               {6, 10, "field kind"},   {7, 1, "field flags"},   {10, 1, "field reserved"}};
  for (const Case& c : cases) {
    PeerFrameHeader h;
    uint8_t buf[kPeerFrameHeaderSize];
    EncodePeerHeader(h, buf);
    buf[c.offset] = c.value;
    auto d = DecodePeerHeader(buf, "peer 10.0.0.2:7100 (node n2)");
    ASSERT_FALSE(d.ok()) << c.field;
    EXPECT_EQ(d.status().code(), Code::kProtocolError);
    EXPECT_TRUE(MessageHas(d.status(), c.field)) << d.status().message();
    EXPECT_TRUE(MessageHas(d.status(), "10.0.0.2:7100 (node n2)")) << d.status().message();
  }
  PeerFrameHeader typed;
  typed.kind = FrameKind::kStreamData;
  typed.type = 3;
  uint8_t buf[kPeerFrameHeaderSize];
  EncodePeerHeader(typed, buf);
  EXPECT_TRUE(MessageHas(DecodePeerHeader(buf, "p").status(), "field type"));
}

TEST(PeerFrameTest, RolesAreNamedFromTheirDeclaration) {
  EXPECT_EQ(RoleName(Role::kClient), "client");
  EXPECT_EQ(RoleName(Role::kServer), "server");
  EXPECT_EQ(RoleName(static_cast<Role>(9)), "unknown");
}

TEST(PeerFrameTest, PayloadLimitsArePerKind) {
  struct Case {
    FrameKind kind;
    uint32_t max;
  } cases[] = {{FrameKind::kHello, kMaxHandshakePayload},
               {FrameKind::kControl, kMaxControlPayload},
               {FrameKind::kStreamData, kStreamDataPrefix + kMaxChunkBytes},
               {FrameKind::kStreamEnd, kStreamEndPayload}};
  for (const Case& c : cases) {
    PeerFrameHeader h;
    h.kind = c.kind;
    h.payload_len = c.max;
    uint8_t buf[kPeerFrameHeaderSize];
    EncodePeerHeader(h, buf);
    EXPECT_TRUE(DecodePeerHeader(buf, "p").ok()) << FrameKindName(c.kind);
    h.payload_len = c.max + 1;
    EncodePeerHeader(h, buf);
    auto d = DecodePeerHeader(buf, "p");
    EXPECT_EQ(d.status().code(), Code::kProtocolError);
    EXPECT_TRUE(MessageHas(d.status(), "field payload_len")) << d.status().message();
  }
}

TEST(PeerFrameTest, HelloRejectsNodeIdsOutsideTheClusterRule) {
  for (std::string bad :
       {std::string("a b"), std::string("host:1"), std::string(kMaxNodeIdLength + 1, 'n')}) {
    HelloPayload hello{Role::kServer, 1, 3, bad, std::string(kNonceSize, 'n')};
    auto h = HelloPayload::Decode(hello.Encode());
    ASSERT_FALSE(h.ok()) << bad;
    EXPECT_EQ(h.status().code(), Code::kProtocolError) << bad;
    EXPECT_NE(h.status().message().find("Hello.node_id"), std::string::npos) << h.status().ToString();
  }
}

TEST(PeerFrameTest, PayloadsRoundTrip) {
  HelloPayload hello{Role::kServer, 1, 3, "node-x", std::string(kNonceSize, 'n')};
  auto h = HelloPayload::Decode(hello.Encode());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->role, Role::kServer);
  EXPECT_EQ(h->max_version, 3);
  EXPECT_EQ(h->node_id, "node-x");

  auto proof = ProofPayload::Decode(ProofPayload{std::string(kMacSize, 'm')}.Encode());
  ASSERT_TRUE(proof.ok());
  EXPECT_EQ(proof->mac.size(), kMacSize);
  EXPECT_TRUE(ProofPayload::Decode(ProofPayload{""}.Encode()).ok());  // no secret: decodes, refused later

  RejectPayload reject{10, std::string(5000, 'r')};
  auto r = RejectPayload::Decode(reject.Encode());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->message.size(), kMaxRejectMessage);  // cut by Encode

  auto begin = StreamBeginPayload::Decode(StreamBeginPayload{5, 1u << 30, "meta"}.Encode());
  ASSERT_TRUE(begin.ok());
  EXPECT_EQ(begin->size, 1u << 30);

  uint8_t raw[kStreamDataPrefix];
  StreamDataPrefix{9, 1ull << 40, 4096}.Encode(raw);
  StreamDataPrefix data = StreamDataPrefix::Decode(raw);
  EXPECT_EQ(data.object_id, 9u);
  EXPECT_EQ(data.offset, 1ull << 40);
  EXPECT_EQ(data.length, 4096u);

  std::string end_bytes = StreamEndPayload{9, 100, 0xabcdef}.Encode();
  EXPECT_EQ(end_bytes.size(), kStreamEndPayload);
  auto end = StreamEndPayload::Decode(end_bytes);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->checksum, 0xabcdefu);

  auto abort = StreamAbortPayload::Decode(StreamAbortPayload{9, "why"}.Encode());
  ASSERT_TRUE(abort.ok());
  EXPECT_EQ(abort->reason, "why");
}

TEST(PeerFrameTest, MalformedPayloadsNameTheField) {
  HelloPayload hello{Role::kClient, 1, 1, "node-x", std::string(kNonceSize, 'n')};
  std::string bytes = hello.Encode();
  EXPECT_TRUE(MessageHas(HelloPayload::Decode(bytes.substr(0, 2)).status(), "Hello.min_version"));
  EXPECT_TRUE(MessageHas(HelloPayload::Decode(bytes + "x").status(), "trailing"));
  std::string bad_role = bytes;
  bad_role[0] = 7;
  EXPECT_TRUE(MessageHas(HelloPayload::Decode(bad_role).status(), "Hello.role"));
  HelloPayload short_nonce = hello;
  short_nonce.nonce = "abc";
  EXPECT_TRUE(MessageHas(HelloPayload::Decode(short_nonce.Encode()).status(), "Hello.nonce"));
  HelloPayload bad_node = hello;
  bad_node.node_id = "has space";
  EXPECT_TRUE(MessageHas(HelloPayload::Decode(bad_node.Encode()).status(), "Hello.node_id"));
  HelloPayload inverted = hello;
  inverted.min_version = 3;
  inverted.max_version = 2;
  EXPECT_EQ(HelloPayload::Decode(inverted.Encode()).status().code(), Code::kProtocolError);
  EXPECT_TRUE(MessageHas(ProofPayload::Decode(ProofPayload{"short"}.Encode()).status(), "Proof.mac"));
  EXPECT_TRUE(MessageHas(StreamEndPayload::Decode("1234").status(), "StreamEnd.object_id"));
  StreamBeginPayload big_meta{1, 1, std::string(kMaxStreamMetadata + 1, 'm')};
  EXPECT_TRUE(MessageHas(StreamBeginPayload::Decode(big_meta.Encode()).status(), "StreamBegin.metadata"));
}

}  // namespace
}  // namespace tierckpt::peer
