#include "wire/protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tierckpt::wire {
namespace {

// Every strict prefix of a valid encoding must fail with kProtocolError, and
// so must the encoding with a trailing byte.
template <typename T>
void ExpectStrict(const T& value) {
  std::string bytes = value.Encode();
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto r = T::Decode(std::string_view(bytes).substr(0, len));
    ASSERT_FALSE(r.ok()) << "prefix of " << len << " of " << bytes.size() << " bytes decoded";
    EXPECT_EQ(r.status().code(), Code::kProtocolError) << r.status().ToString();
  }
  auto r = T::Decode(bytes + 'x');
  ASSERT_FALSE(r.ok()) << "trailing byte accepted";
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("trailing"), std::string::npos) << r.status().message();
  // And the full encoding decodes and re-encodes to the same bytes.
  auto ok = T::Decode(bytes);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->Encode(), bytes);
}

TEST(ProtocolTest, HeaderRoundTripIsLittleEndian) {
  FrameHeader h;
  h.type = static_cast<uint16_t>(MsgType::kCommitStep) | kResponseBit;
  h.request_id = 0x01020304;
  h.payload_len = 0x00000a0b;
  uint8_t buf[kFrameHeaderSize];
  EncodeHeader(h, buf);
  const uint8_t expected[kFrameHeaderSize] = {'T', 'C', 'K', 'P', 6,    0,    5, 0x80,
                                              4,   3,   2,   1,   0x0b, 0x0a, 0, 0};
  EXPECT_EQ(std::memcmp(buf, expected, kFrameHeaderSize), 0);
  auto d = DecodeHeader(buf);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->magic, kFrameMagic);
  EXPECT_EQ(d->version, kProtocolVersion);
  EXPECT_EQ(d->type, h.type);
  EXPECT_EQ(d->request_id, h.request_id);
  EXPECT_EQ(d->payload_len, h.payload_len);
}

TEST(ProtocolTest, HeaderRejectsBadMagicVersionAndSize) {
  FrameHeader h;
  uint8_t buf[kFrameHeaderSize];

  h.magic = 0x11223344;
  EncodeHeader(h, buf);
  auto r = DecodeHeader(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);

  h = FrameHeader();
  h.version = kProtocolVersion + 1;
  EncodeHeader(h, buf);
  r = DecodeHeader(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("version"), std::string::npos);

  h = FrameHeader();
  h.payload_len = kMaxPayload + 1;
  EncodeHeader(h, buf);
  r = DecodeHeader(buf);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("payload_len"), std::string::npos);

  h.payload_len = kMaxPayload;
  EncodeHeader(h, buf);
  EXPECT_TRUE(DecodeHeader(buf).ok());
}

TEST(ProtocolTest, MsgTypeNames) {
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kHello)), "Hello");
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kPersist)), "Persist");
  EXPECT_EQ(MsgTypeName(0), "unknown");
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kBeginSave)), "BeginSave");
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kBindDurable)), "BindDurable");
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kSetPolicy)), "SetPolicy");
  EXPECT_EQ(MsgTypeName(static_cast<uint16_t>(MsgType::kBeginSaveCreateNext)), "BeginSaveCreateNext");
  EXPECT_EQ(MsgTypeName(23), "unknown");
  for (uint16_t t = 1; t <= 22; ++t) {
    EXPECT_TRUE(IsKnownRequestType(t)) << t;
    EXPECT_NE(MsgTypeName(t), "unknown") << t;
  }
  EXPECT_FALSE(IsKnownRequestType(0));
  EXPECT_FALSE(IsKnownRequestType(23));
  EXPECT_FALSE(IsKnownRequestType(static_cast<uint16_t>(MsgType::kHello) | kResponseBit));
}

TEST(ProtocolTest, EncoderIsLittleEndian) {
  Encoder e;
  e.U16(0x0102);
  e.U32(0x03040506);
  e.U64(0x0708090a0b0c0d0eULL);
  e.Bool(true);
  e.Str("ab");
  const char expected[] = "\x02\x01\x06\x05\x04\x03\x0e\x0d\x0c\x0b\x0a\x09\x08\x07\x01"
                          "\x02\x00\x00\x00"
                          "ab";
  EXPECT_EQ(e.bytes(), std::string(expected, sizeof(expected) - 1));
}

TEST(ProtocolTest, HelloRoundTrip) {
  HelloRequest req{1234, "tierckpt-cli 0.1", "torchelastic:run-7:0"};
  auto r = HelloRequest::Decode(req.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pid, 1234u);
  EXPECT_EQ(r->client, "tierckpt-cli 0.1");
  EXPECT_EQ(r->writer, "torchelastic:run-7:0");
  ExpectStrict(req);
}

TEST(ProtocolTest, WriterIds) {
  EXPECT_TRUE(ValidateWriterId("").ok());
  EXPECT_TRUE(ValidateWriterId("slurm:4242:0").ok());
  EXPECT_TRUE(ValidateWriterId("job:10.0.0.1:29500/a+b=c@d_e-f.g").ok());
  EXPECT_TRUE(ValidateWriterId(std::string(kMaxWriterIdLength, 'w')).ok());
  EXPECT_EQ(ValidateWriterId(std::string(kMaxWriterIdLength + 1, 'w')).code(), Code::kInvalidArgument);
  for (const char* bad : {"*", "a b", "a\nb", "caf\xc3\xa9"}) {
    EXPECT_EQ(ValidateWriterId(bad).code(), Code::kInvalidArgument) << bad;
  }

  HelloResponse resp{"node-a", "0.1.0", "/dev/shm/tierckpt", "file:///mnt/ckpt"};
  auto r2 = HelloResponse::Decode(resp.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->node_id, "node-a");
  EXPECT_EQ(r2->agent_version, "0.1.0");
  EXPECT_EQ(r2->root, "/dev/shm/tierckpt");
  EXPECT_EQ(r2->durable, "file:///mnt/ckpt");
  ExpectStrict(resp);
}

TEST(ProtocolTest, StepRoundTrip) {
  StepRequest req{"job1", 9'999'999'999ULL};
  auto r = StepRequest::Decode(req.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns, "job1");
  EXPECT_EQ(r->step, 9'999'999'999ULL);
  ExpectStrict(req);
}

TEST(ProtocolTest, CreateAndSealObjectRoundTrip) {
  CreateObjectRequest c{"job1", 7, "model/__0_0.distcp", 1ULL << 40};
  auto r = CreateObjectRequest::Decode(c.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns, "job1");
  EXPECT_EQ(r->step, 7u);
  EXPECT_EQ(r->name, "model/__0_0.distcp");
  EXPECT_EQ(r->size, 1ULL << 40);
  ExpectStrict(c);

  SealObjectRequest s{"job1", 7, "a", 3, "xxh3-64:0123456789abcdef"};
  auto r2 = SealObjectRequest::Decode(s.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->ns, "job1");
  EXPECT_EQ(r2->step, 7u);
  EXPECT_EQ(r2->name, "a");
  EXPECT_EQ(r2->size, 3u);
  EXPECT_EQ(r2->checksum, "xxh3-64:0123456789abcdef");
  ExpectStrict(s);
  ExpectStrict(SealObjectRequest{"job1", 7, "a", 3, ""});
}

TEST(ProtocolTest, CreateNextObjectRoundTrip) {
  CreateNextObjectRequest c{"job1", 7, "__3_", 5, ".distcp", 1ULL << 40};
  auto r = CreateNextObjectRequest::Decode(c.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns, "job1");
  EXPECT_EQ(r->step, 7u);
  EXPECT_EQ(r->prefix, "__3_");
  EXPECT_EQ(r->first, 5u);
  EXPECT_EQ(r->suffix, ".distcp");
  EXPECT_EQ(r->size, 1ULL << 40);
  ExpectStrict(c);

  CreateNextObjectResponse resp{9, "__3_9.distcp"};
  auto r2 = CreateNextObjectResponse::Decode(resp.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->index, 9u);
  EXPECT_EQ(r2->name, "__3_9.distcp");
  ExpectStrict(resp);
}

TEST(ProtocolTest, CommitStepRoundTrip) {
  CommitStepRequest c{"job1", 12, 8, true, {"a", "b/c", std::string(300, 'x')}};
  auto r = CommitStepRequest::Decode(c.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns, "job1");
  EXPECT_EQ(r->step, 12u);
  EXPECT_EQ(r->world_size, 8u);
  EXPECT_TRUE(r->persist);
  EXPECT_EQ(r->expected_objects, c.expected_objects);
  EXPECT_TRUE(r->members.empty());
  ExpectStrict(c);
  CommitStepRequest spans{"job1", 12, 8, false, {}, {"n1", "n2"}};
  auto r3 = CommitStepRequest::Decode(spans.Encode());
  ASSERT_TRUE(r3.ok()) << r3.status().ToString();
  EXPECT_EQ(r3->members, spans.members);
  ExpectStrict(spans);
  CommitStepRequest empty{"job1", 0, 0, false, {}};
  auto r2 = CommitStepRequest::Decode(empty.Encode());
  ASSERT_TRUE(r2.ok());
  EXPECT_FALSE(r2->persist);
  EXPECT_TRUE(r2->expected_objects.empty());
  ExpectStrict(empty);
}

TEST(ProtocolTest, CommitStepRejectsHugeCountBeforeAllocating) {
  Encoder e;
  e.Str("job1");
  e.U64(1);
  e.U32(1);
  e.Bool(false);
  e.U32(999'999);  // within max_count but the payload holds no entries
  auto r = CommitStepRequest::Decode(e.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);

  Encoder e2;
  e2.Str("job1");
  e2.U64(1);
  e2.U32(1);
  e2.Bool(false);
  e2.U32(1'000'001);  // above max_count
  r = CommitStepRequest::Decode(e2.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("limit"), std::string::npos) << r.status().message();
}

TEST(ProtocolTest, OpenObjectRoundTrip) {
  OpenObjectRequest o{"job1", 3, ".metadata"};
  auto r = OpenObjectRequest::Decode(o.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ns, "job1");
  EXPECT_EQ(r->step, 3u);
  EXPECT_EQ(r->name, ".metadata");
  EXPECT_FALSE(r->repair);
  ExpectStrict(o);
  OpenObjectRequest repair{"job1", 3, ".metadata", true};
  r = OpenObjectRequest::Decode(repair.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->repair);
  ExpectStrict(repair);

  OpenObjectResponse resp{4096, "xxh3-64:00000000000000ff"};
  auto r2 = OpenObjectResponse::Decode(resp.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->size, 4096u);
  EXPECT_EQ(r2->checksum, "xxh3-64:00000000000000ff");
  EXPECT_EQ(r2->repaired, "");
  ExpectStrict(resp);
  OpenObjectResponse replaced{4096, "xxh3-64:00000000000000ff", "the memory copy was corrupt; read from n3"};
  r2 = OpenObjectResponse::Decode(replaced.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->repaired, replaced.repaired);
  ExpectStrict(replaced);
  EXPECT_EQ(resp.verified_age_ms, kNeverVerifiedAgeMs);  // the default: never verified
  OpenObjectResponse attested{4096, "xxh3-64:00000000000000ff", "", 1500};
  r2 = OpenObjectResponse::Decode(attested.Encode());
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->verified_age_ms, 1500u);
  ExpectStrict(attested);
}

TEST(ProtocolTest, ListDeletePruneWaitRoundTrip) {
  ListRequest l{"", false};
  auto rl = ListRequest::Decode(l.Encode());
  ASSERT_TRUE(rl.ok()) << rl.status().ToString();
  EXPECT_EQ(rl->ns, "");
  EXPECT_FALSE(rl->include_durable);
  ExpectStrict(l);
  ExpectStrict(ListRequest{"job1", true});

  DeleteStepRequest d{"job1", 5, true, true};
  auto rd = DeleteStepRequest::Decode(d.Encode());
  ASSERT_TRUE(rd.ok()) << rd.status().ToString();
  EXPECT_EQ(rd->ns, "job1");
  EXPECT_EQ(rd->step, 5u);
  EXPECT_TRUE(rd->durable_too);
  EXPECT_TRUE(rd->keep_replicas);
  ExpectStrict(d);

  PruneRequest p{"job1", 2, 10};
  auto rp = PruneRequest::Decode(p.Encode());
  ASSERT_TRUE(rp.ok()) << rp.status().ToString();
  EXPECT_EQ(rp->ns, "job1");
  EXPECT_EQ(rp->keep_memory, 2u);
  EXPECT_EQ(rp->keep_durable, 10u);
  ExpectStrict(p);

  WaitDurableRequest w{"job1", 6, 30000};
  auto rw = WaitDurableRequest::Decode(w.Encode());
  ASSERT_TRUE(rw.ok()) << rw.status().ToString();
  EXPECT_EQ(rw->ns, "job1");
  EXPECT_EQ(rw->step, 6u);
  EXPECT_EQ(rw->timeout_ms, 30000u);
  ExpectStrict(w);
}

TEST(ProtocolTest, JsonBodyRoundTrip) {
  JsonBody j{"{\"steps\":[]}"};
  auto r = JsonBody::Decode(j.Encode());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->json, "{\"steps\":[]}");
  ExpectStrict(j);
}

TEST(ProtocolTest, BoolOtherThanZeroOrOneIsRejected) {
  std::string bytes = ListRequest{"job1", true}.Encode();
  bytes.back() = 2;
  auto r = ListRequest::Decode(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  EXPECT_NE(r.status().message().find("List.include_durable"), std::string::npos);

  bytes = DeleteStepRequest{"job1", 1, false}.Encode();
  bytes.back() = static_cast<char>(0xff);
  EXPECT_FALSE(DeleteStepRequest::Decode(bytes).ok());
}

TEST(ProtocolTest, StringLengthAboveLimitIsRejected) {
  Encoder e;
  e.U32(kMaxPayload + 1);
  Decoder d(e.bytes());
  std::string s;
  Status st = d.Str(&s, "x");
  EXPECT_EQ(st.code(), Code::kProtocolError);
  EXPECT_NE(st.message().find("limit"), std::string::npos) << st.message();

  Encoder e2;
  e2.U32(0xffffffffu);
  Decoder d2(e2.bytes());
  EXPECT_EQ(d2.Str(&s, "x").code(), Code::kProtocolError);
}

TEST(ProtocolTest, DecoderNamesTheField) {
  Decoder d("");
  uint64_t v = 0;
  Status st = d.U64(&v, "Thing.size");
  EXPECT_EQ(st.code(), Code::kProtocolError);
  EXPECT_NE(st.message().find("Thing.size"), std::string::npos) << st.message();
  EXPECT_TRUE(Decoder("").Finish().ok());
}

TEST(ProtocolTest, ResponseOkCarriesBody) {
  std::string body = HelloResponse{"n", "v", "r", ""}.Encode();
  auto r = DecodeResponse(EncodeResponse(Status::Ok(), body));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, body);
  auto empty = DecodeResponse(EncodeResponse(Status::Ok(), ""));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, "");
}

TEST(ProtocolTest, ResponseErrorCarriesCodeAndMessage) {
  auto r = DecodeResponse(EncodeResponse(NotFound("step 7 of job1 is not in memory"), "ignored"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(), "step 7 of job1 is not in memory");
}

TEST(ProtocolTest, ResponseUnknownCodeBecomesInternal) {
  Encoder e;
  e.U32(9999);
  e.Str("from the future");
  auto r = DecodeResponse(e.bytes());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
  EXPECT_NE(r.status().message().find("from the future"), std::string::npos);
  EXPECT_NE(r.status().message().find("9999"), std::string::npos);
}

TEST(ProtocolTest, ResponseTruncatedOrTrailingIsProtocolError) {
  std::string bytes = EncodeResponse(Aborted("step aborted"), "");
  for (size_t len = 0; len < bytes.size(); ++len) {
    auto r = DecodeResponse(std::string_view(bytes).substr(0, len));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), Code::kProtocolError) << len;
  }
  auto r = DecodeResponse(bytes + "junk");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kProtocolError);
  // With code 0, everything after the message is the body.
  Encoder e;
  e.U32(0);
  e.Str("note");
  auto ok = DecodeResponse(e.bytes() + "body");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, "body");
}

TEST(ProtocolTest, ResponseCutsHugeMessages) {
  std::string huge(kMaxPayload, 'm');
  std::string bytes = EncodeResponse(Internal(huge), "");
  EXPECT_LT(bytes.size(), kMaxPayload);
  auto r = DecodeResponse(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace tierckpt::wire
