// peer_messages_golden_test.cc — pins the bytes of the agents' control
// messages (peer_messages.h): a request of every type, an error and a step
// list, against hex captured from the hand-written encoders of
// src/agent/peer_messages.cc before the messages were declared once (the
// capture was made at the commit that added peer_frame_golden_test.cc). A
// change to a declaration that moves a byte fails here.
#include <gtest/gtest.h>

#include <string>

#include "peer/peer_messages.h"
#include "testing/golden.h"

namespace tierckpt::peer {
namespace {

using ::tierckpt::testing_util::Hex;

TEST(PeerMessagesWireFormatGoldenTest, EveryRequestEncodesToTheVersion1Bytes) {
  const PeerRequest r{"n1", "job", 42, "dir/obj"};
  struct Case {
    PeerMsg type;
    const char* hex;
  } cases[] = {
      {PeerMsg::kGetManifest, "020000006e31030000006a6f622a00000000000000"},
      {PeerMsg::kListSteps, "020000006e31030000006a6f62"},
      {PeerMsg::kGetObject, "020000006e31030000006a6f622a00000000000000070000006469722f6f626a"},
      {PeerMsg::kReplicate, "030000006a6f622a00000000000000"},
      {PeerMsg::kPersistPart, "020000006e31030000006a6f622a00000000000000"},
      {PeerMsg::kDropReplica, "030000006a6f622a00000000000000"},
      {PeerMsg::kDropParity, "030000006a6f622a00000000000000"},
  };
  for (const Case& c : cases) {
    const std::string bytes = EncodePeerRequest(c.type, r);
    EXPECT_EQ(Hex(bytes), c.hex) << PeerMsgName(static_cast<uint16_t>(c.type));
    Result<PeerRequest> back = DecodePeerRequest(c.type, bytes);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(EncodePeerRequest(c.type, *back), bytes);
  }
}

TEST(PeerMessagesWireFormatGoldenTest, ErrorsAndStepListsEncodeToTheVersion1Bytes) {
  EXPECT_EQ(Hex(EncodePeerError(NotFound("gone"))), "0200000004000000676f6e65");
  EXPECT_EQ(EncodePeerError(NotFound(std::string(5000, 'e'))).size(), 4104u);  // cut to 4096
  EXPECT_EQ(Hex(EncodeSteps({1, 5, 9})), "03000000010000000000000005000000000000000900000000000000");
}

// The bytes the hand-written encoder of the DropReplica answer sent
// (wire::Encoder::U32 in peer_service.cc) before it was declared once.
TEST(PeerMessagesWireFormatGoldenTest, TheDropReplicaAnswerEncodesToTheVersion1Bytes) {
  EXPECT_EQ(Hex(DropReplicaAnswer{1}.Encode()), "01000000");
  EXPECT_EQ(Hex(DropReplicaAnswer{0}.Encode()), "00000000");
  Result<DropReplicaAnswer> back = DropReplicaAnswer::Decode(std::string("\x01\x00\x00\x00", 4));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->held, 1u);
  EXPECT_FALSE(DropReplicaAnswer::Decode(std::string("\x01\x00\x00", 3)).ok());
  EXPECT_FALSE(DropReplicaAnswer::Decode(std::string("\x01\x00\x00\x00\x00", 5)).ok());
}

TEST(PeerMessagesWireFormatGoldenTest, TypeNumbersAndNamesAreThoseOfVersion1) {
  const char* const names[] = {"unknown",        "Error",         "GetManifest",      "Manifest",
                               "ListSteps",      "Steps",         "GetObject",        "Object",
                               "Replicate",      "Done",          "CommitPart",       "PersistPart",
                               "DropReplica",    "CommitSubtree", "SubtreeCommitted", "CommitRingSubtree",
                               "FoldParity",     "ParityFolded",  "DropParity",       "GetParityRecord",
                               "GetParityPiece", "ParityRecord",  "unknown"};
  for (uint16_t t = 0; t <= 22; ++t) EXPECT_EQ(PeerMsgName(t), names[t]) << t;
}

// The commit tree's request and answer (decision 102), as first sent.
TEST(PeerMessagesWireFormatGoldenTest, TheCommitTreeMessagesEncodeToTheirFirstBytes) {
  EXPECT_EQ(Hex(CommitSubtreeRequest{16, "n1", "xy"}.Encode()), "10000000020000006e31020000007879");
  const SubtreeCommitted sum{2, 3, 4, 5, 6, true, 1};
  EXPECT_EQ(Hex(sum.Encode()),
            "02000000030000000000000004000000000000000500000000000000060000000101000000");
  Result<SubtreeCommitted> back = SubtreeCommitted::Decode(sum.Encode());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Encode(), sum.Encode());
  EXPECT_FALSE(SubtreeCommitted::Decode(sum.Encode() + "x").ok());
}

// The commit request with the members as ring runs (decision 108), as first sent.
TEST(PeerMessagesWireFormatGoldenTest, TheRingSubtreeRequestEncodesToItsFirstBytes) {
  const CommitRingSubtreeRequest r{16, "n1", 5, 0x0102030405060708ull, {0, 5}, "xy"};
  EXPECT_EQ(Hex(r.Encode()),
            "10000000"                                  // fan_out
            "020000006e31"                              // root
            "05000000"                                  // ring_size
            "0807060504030201"                          // ring_digest
            "0200000000000000000000000500000000000000"  // member_runs: [0, 5]
            "020000007879");                            // commit
  Result<CommitRingSubtreeRequest> back = CommitRingSubtreeRequest::Decode(r.Encode());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Encode(), r.Encode());
  EXPECT_FALSE(CommitRingSubtreeRequest::Decode(r.Encode() + "x").ok());
}

// The erasure-coded tier's fold request and answer (decision 126), as first sent.
TEST(PeerMessagesWireFormatGoldenTest, TheParityMessagesEncodeToTheirFirstBytes) {
  const FoldParityRequest r{"job", 42, 4, 2, 1, 3, 5000};
  EXPECT_EQ(Hex(r.Encode()),
            "030000006a6f62"    // ns
            "2a00000000000000"  // step
            "04000000"          // k
            "02000000"          // m
            "01000000"          // group
            "03000000"          // index
            "88130000");        // wait_ms
  Result<FoldParityRequest> back = FoldParityRequest::Decode(r.Encode());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Encode(), r.Encode());
  EXPECT_FALSE(FoldParityRequest::Decode(r.Encode() + "x").ok());
  EXPECT_FALSE(FoldParityRequest::Decode(r.Encode().substr(0, 10)).ok());

  const ParityFolded a{3, 4, true};
  EXPECT_EQ(Hex(a.Encode()), "030000000400000001");
  Result<ParityFolded> answer = ParityFolded::Decode(a.Encode());
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_TRUE(answer->sealed);
  EXPECT_FALSE(ParityFolded::Decode("\x03\x00\x00\x00\x04\x00\x00\x00\x02").ok());  // a bool of 2
  EXPECT_FALSE(ParityFolded::Decode(a.Encode() + "x").ok());
}

// The fetch of a parity record or piece (decision 138), as first sent.
TEST(PeerMessagesWireFormatGoldenTest, TheParityFetchRequestEncodesToItsFirstBytes) {
  const GetParityRequest r{"job", 42, 1, 2};
  EXPECT_EQ(Hex(r.Encode()),
            "030000006a6f62"    // ns
            "2a00000000000000"  // step
            "01000000"          // group
            "02000000");        // piece
  Result<GetParityRequest> back = GetParityRequest::Decode(r.Encode());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Encode(), r.Encode());
  // A truncated, overlong or absurd frame is a protocol error, never a crash.
  for (const std::string& bad :
       {r.Encode() + "x", r.Encode().substr(0, 10), std::string("\xff\xff\xff\xff", 4)}) {
    Result<GetParityRequest> d = GetParityRequest::Decode(bad);
    ASSERT_FALSE(d.ok()) << Hex(bad);
    EXPECT_EQ(d.status().code(), Code::kProtocolError) << d.status().ToString();
  }
}

}  // namespace
}  // namespace tierckpt::peer
