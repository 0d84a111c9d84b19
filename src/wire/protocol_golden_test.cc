// protocol_golden_test.cc — pins the bytes of the local protocol (version 6).
//
// One populated instance of every message, encoded, against hex captured from
// the hand-written encoders before the messages were declared once
// (wire/messages.h). A change to a declaration that moves a byte fails here:
// the wire format is a format (docs/protocol.md), so such a change needs a new
// kProtocolVersion, the docs and the corpora updated, and new constants here.
#include <gtest/gtest.h>

#include <string>

#include "testing/golden.h"
#include "wire/protocol.h"

namespace tierckpt::wire {
namespace {

using ::tierckpt::testing_util::ExpectGolden;
using ::tierckpt::testing_util::Hex;

TEST(LocalWireFormatGoldenTest, EveryRequestEncodesToTheVersion6Bytes) {
  ExpectGolden(HelloRequest{4242, "tierckpt-cli 0.1", "job:run-7"},
               "921000001000000074696572636b70742d636c6920302e31090000006a6f623a72756e2d37");
  ExpectGolden(StepRequest{"job-1", 1200}, "050000006a6f622d31b004000000000000");
  ExpectGolden(CreateObjectRequest{"job-1", 1200, "m/__0_0.distcp", 1u << 20},
               "050000006a6f622d31b0040000000000000e0000006d2f5f5f305f302e6469737463700000100000000000");
  ExpectGolden(SealObjectRequest{"job-1", 1201, "obj", 4096, "xxh3-64:0123456789abcdef"},
               "050000006a6f622d31b104000000000000030000006f626a00100000000000001800000078786833"
               "2d36343a30313233343536373839616263646566");
  ExpectGolden(CommitStepRequest{"job-1", 1202, 4, true, {".metadata", "obj"}, {"node-a", "node-b"}},
               "050000006a6f622d31b204000000000000040000000102000000090000002e6d6574616461746103"
               "0000006f626a02000000060000006e6f64652d61060000006e6f64652d62");
  ExpectGolden(OpenObjectRequest{"job-1", 1203, ".metadata"},
               "050000006a6f622d31b304000000000000090000002e6d6574616461746100");
  ExpectGolden(OpenObjectRequest{"job-1", 1203, ".metadata", true},
               "050000006a6f622d31b304000000000000090000002e6d6574616461746101");
  ExpectGolden(ListRequest{"job-1", false}, "050000006a6f622d3100");
  ExpectGolden(DeleteStepRequest{"job-1", 1100, true, false}, "050000006a6f622d314c040000000000000100");
  ExpectGolden(PruneRequest{"job-1", 2, 5}, "050000006a6f622d310200000005000000");
  ExpectGolden(WaitDurableRequest{"job-1", 1204, 60000}, "050000006a6f622d31b40400000000000060ea0000");
  ExpectGolden(CreateNextObjectRequest{"job-1", 1200, "__0_", 3, ".distcp", 1u << 20},
               "050000006a6f622d31b004000000000000040000005f5f305f0300000000000000070000002e6469"
               "737463700000100000000000");
  ExpectGolden(BindDurableRequest{"job-1", "s3://b/p"}, "050000006a6f622d310800000073333a2f2f622f70");
  ExpectGolden(SetPolicyRequest{"job-1", 2, 3, 5}, "050000006a6f622d3102000000030000000500000000000000");
}

TEST(LocalWireFormatGoldenTest, EveryResponseBodyAndTheEnvelopeEncodeToTheVersion6Bytes) {
  ExpectGolden(HelloResponse{"node-a", "0.1.0", "/dev/shm/tc", "file:///d"},
               "060000006e6f64652d6105000000302e312e300b0000002f6465762f73686d2f74630900000066696c"
               "653a2f2f2f64");
  ExpectGolden(OpenObjectResponse{10, "xxh3-64:00000000000000ff"},
               "0a0000000000000018000000787868332d36343a3030303030303030303030303030666600000000"
               "ffffffffffffffff");
  ExpectGolden(OpenObjectResponse{10, "xxh3-64:00000000000000ff", "n2"},
               "0a0000000000000018000000787868332d36343a30303030303030303030303030306666020000006e32"
               "ffffffffffffffff");
  // Version 6: verified_age_ms (1234 ms).
  ExpectGolden(OpenObjectResponse{10, "xxh3-64:00000000000000ff", "", 1234},
               "0a0000000000000018000000787868332d36343a3030303030303030303030303030666600000000"
               "d204000000000000");
  ExpectGolden(CreateNextObjectResponse{4, "__0_4.distcp"},
               "04000000000000000c0000005f5f305f342e646973746370");
  ExpectGolden(JsonBody{"{\"a\":1}"}, "070000007b2261223a317d");
  EXPECT_EQ(Hex(EncodeResponse(Status::Ok(), "body")), "0000000000000000626f6479");
  EXPECT_EQ(Hex(EncodeResponse(NotFound("gone"), "ignored")), "0200000004000000676f6e65");
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kOpenObject) | kResponseBit;
  h.request_id = 7;
  h.payload_len = 300;
  uint8_t header[kFrameHeaderSize];
  EncodeHeader(h, header);
  EXPECT_EQ(Hex(std::string_view(reinterpret_cast<const char*>(header), kFrameHeaderSize)),
            "54434b5006000980070000002c010000");
}

TEST(LocalWireFormatGoldenTest, TypeNumbersNamesAndRequestLimitsAreThoseOfVersion6) {
  const char* const names[] = {"unknown",     "Hello",       "BeginStep",        "CreateObject",
                               "SealObject",  "CommitStep",  "AbortStep",        "List",
                               "Show",        "OpenObject",  "DeleteStep",       "Prune",
                               "Stats",       "WaitDurable", "Restore",          "Verify",
                               "Shutdown",    "Persist",     "CreateNextObject", "BeginSave",
                               "BindDurable", "SetPolicy",   "BeginSaveCreateNext", "unknown"};
  for (uint16_t t = 0; t <= 23; ++t) {
    EXPECT_EQ(MsgTypeName(t), names[t]) << t;
    EXPECT_EQ(IsKnownRequestType(t), t >= 1 && t <= 22) << t;
    EXPECT_EQ(MaxRequestPayload(t), t == 5 ? 64u << 20 : 64u << 10) << t;
  }
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kPersist), 17);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kBeginSave), 19);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kBindDurable), 20);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kSetPolicy), 21);
  EXPECT_EQ(static_cast<uint16_t>(MsgType::kBeginSaveCreateNext), 22);
  EXPECT_EQ(MaxRequestPayload(0xffff), 64u << 10);
}

}  // namespace
}  // namespace tierckpt::wire
