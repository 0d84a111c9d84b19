#include "client/responses.h"

#include <gtest/gtest.h>

#include "wire/protocol.h"

namespace tierckpt::client {
namespace {

TEST(JsonFromBodyTest, UnwrapsAJsonBody) {
  wire::JsonBody b;
  b.json = R"({"a":1})";
  auto j = JsonFromBody(b.Encode(), "Stats");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(*j, R"({"a":1})");
}

TEST(JsonFromBodyTest, TruncatedBodyIsAProtocolError) {
  auto j = JsonFromBody(std::string("\x10\x00\x00\x00{}", 6), "Stats");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), Code::kProtocolError);
  EXPECT_NE(j.status().message().find("Stats"), std::string::npos);
}

TEST(ParseStepListTest, ParsesAndSorts) {
  auto listing = ParseStepList(R"({"steps":[
    {"namespace":"b","step":1,"bytes":10,"objects":2,"memory":"committed","durable":null,"parity":"redundant"},
    {"namespace":"a","step":7,"bytes":0,"objects":0,"durable":"failed","durable_error":"slow"},
    {"namespace":"a","step":3,"bytes":5,"objects":1,"memory":"writing","durable":""}],
    "durable_error":"s3://b/p: connection refused"})");
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  EXPECT_EQ(listing->durable_error, "s3://b/p: connection refused");
  const std::vector<StepSummary>* steps = &listing->steps;
  ASSERT_EQ(steps->size(), 3u);
  EXPECT_EQ((*steps)[0].ns, "a");
  EXPECT_EQ((*steps)[0].step, 3u);
  EXPECT_EQ((*steps)[0].memory, "writing");
  EXPECT_EQ((*steps)[1].step, 7u);
  EXPECT_EQ((*steps)[1].memory, "");
  EXPECT_EQ((*steps)[1].durable, "failed");
  EXPECT_EQ((*steps)[1].durable_error, "slow");
  EXPECT_EQ((*steps)[0].durable_error, "");
  EXPECT_EQ((*steps)[2].ns, "b");
  EXPECT_EQ((*steps)[2].bytes, 10u);
  EXPECT_EQ((*steps)[2].objects, 2u);
  EXPECT_EQ((*steps)[2].durable, "");
  EXPECT_EQ((*steps)[2].parity, "redundant");  // decision 166; absent elsewhere
  EXPECT_EQ((*steps)[0].parity, "");
  // No top-level error: the durable tier answered.
  auto plain = ParseStepList(R"({"steps":[]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->durable_error, "");
}

TEST(ParseStepListTest, RejectsWrongTypes) {
  for (const char* bad : {"[]", "not json", R"({"steps":{}})", R"({"steps":[1]})",
                          R"({"steps":[{"namespace":"a","step":-1,"bytes":0,"objects":0}]})",
                          R"({"steps":[{"namespace":"a","step":1,"bytes":"0","objects":0}]})",
                          R"({"steps":[{"namespace":"a","step":1,"bytes":0,"objects":0,"memory":3}]})",
                          R"({"steps":[{"step":1,"bytes":0,"objects":0}]})",
                          R"({"steps":[],"durable_error":5})",
                          R"({"steps":[{"namespace":"a","step":1,"bytes":0,"objects":0,"parity":true}]})"}) {
    auto r = ParseStepList(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kProtocolError) << bad;
  }
}

Manifest SampleManifest() {
  Manifest m;
  m.ns = "job";
  m.step = 42;
  m.world_size = 2;
  m.created_unix_ms = 1700000000000;
  m.node = "node-a";
  m.objects.push_back({"a.bin", 3, "xxh3-64:0123456789abcdef", "node-a"});
  return m;
}

TEST(ParseShowBodyTest, ReturnsTheManifest) {
  std::string body = R"({"manifest":)" + SampleManifest().ToJson() +
                     R"(,"memory":"committed","durable":"pending","durable_error":""})";
  auto m = ParseShowBody(body, "job", 42);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->ns, "job");
  EXPECT_EQ(m->step, 42u);
  ASSERT_EQ(m->objects.size(), 1u);
  EXPECT_EQ(m->objects[0].checksum, "xxh3-64:0123456789abcdef");
}

TEST(ParseShowBodyTest, RejectsAMissingOrForeignManifest) {
  auto none = ParseShowBody(R"({"memory":"committed"})", "job", 42);
  EXPECT_EQ(none.status().code(), Code::kProtocolError);
  auto other = ParseShowBody(R"({"manifest":)" + SampleManifest().ToJson() + "}", "job", 43);
  EXPECT_EQ(other.status().code(), Code::kProtocolError);
  EXPECT_NE(other.status().message().find("job/42"), std::string::npos);
  auto broken = ParseShowBody(R"({"manifest":{"format":"tierckpt.manifest"}})", "job", 42);
  EXPECT_FALSE(broken.ok());
}

TEST(NewestCommittedStepTest, ConsidersEitherTier) {
  std::vector<StepSummary> steps = {
      {"job", 5, 0, 0, "committed", ""},
      {"job", 9, 0, 0, "", "committed"},
      {"job", 12, 0, 0, "writing", "pending"},
      {"other", 99, 0, 0, "committed", "committed"},
  };
  auto n = NewestCommittedStep(steps, "job");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 9u);
  auto none = NewestCommittedStep(steps, "missing");
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_EQ(none.status().message(), "no committed step of namespace missing in any tier");
}

}  // namespace
}  // namespace tierckpt::client
