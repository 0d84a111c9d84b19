#include "tierckpt/manifest.h"

#include <gtest/gtest.h>

#include "common/checksum.h"

namespace tierckpt {
namespace {

Manifest Sample() {
  Manifest m;
  m.ns = "job1";
  m.step = 42;
  m.world_size = 2;
  m.created_unix_ms = 1700000000000;
  m.node = "node-a";
  m.objects.push_back({".metadata", 10, ComputeChecksum("0123456789", 10).ToString(), "node-a"});
  m.objects.push_back({"__0_0.distcp", 3, ComputeChecksum("abc", 3).ToString(), "node-a"});
  return m;
}

TEST(ManifestTest, RoundTrip) {
  Manifest m = Sample();
  auto parsed = Manifest::Parse(m.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->ToJson(), m.ToJson());
  EXPECT_EQ(parsed->TotalBytes(), 13u);
  ASSERT_NE(parsed->Find("__0_0.distcp"), nullptr);
  EXPECT_EQ(parsed->Find("missing"), nullptr);
}

TEST(ManifestTest, RejectsDamage) {
  std::string good = Sample().ToJson();
  auto expect_bad = [](std::string text, const char* why) {
    auto r = Manifest::Parse(text, "/x/_tierckpt_manifest.json");
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_EQ(r.status().code(), Code::kCorruption) << why;
    EXPECT_NE(r.status().message().find("/x/_tierckpt_manifest.json"), std::string::npos);
  };
  expect_bad(good.substr(0, good.size() / 2), "truncated");
  expect_bad("[]", "not an object");
  expect_bad("", "empty");
  std::string v2 = good;
  v2.replace(v2.find("\"version\": 1"), 12, "\"version\": 2");
  expect_bad(v2, "newer version");
  std::string hostile = good;
  hostile.replace(hostile.find("__0_0.distcp"), 12, "../../etc/pw");
  expect_bad(hostile, "path escape");
  std::string neg = good;
  neg.replace(neg.find("\"size\": 3"), 9, "\"size\": -3");
  expect_bad(neg, "negative size");
  std::string total = good;
  total.replace(total.find("\"total_bytes\": 13"), 17, "\"total_bytes\": 14");
  expect_bad(total, "total mismatch");
}

TEST(ManifestTest, RejectsDuplicatesAndUnsorted) {
  Manifest m = Sample();
  m.objects.push_back(m.objects[0]);
  EXPECT_FALSE(m.Validate().ok());
  m = Sample();
  std::swap(m.objects[0], m.objects[1]);
  EXPECT_FALSE(m.Validate().ok());
}

}  // namespace
}  // namespace tierckpt
