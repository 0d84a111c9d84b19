#include "common/names.h"

#include <gtest/gtest.h>

namespace tierckpt {
namespace {

TEST(NamesTest, NamespaceRules) {
  EXPECT_TRUE(ValidateNamespace("job-1_a.b").ok());
  EXPECT_TRUE(ValidateNamespace(std::string(128, 'a')).ok());
  EXPECT_FALSE(ValidateNamespace(std::string(129, 'a')).ok());
  EXPECT_FALSE(ValidateNamespace("").ok());
  EXPECT_FALSE(ValidateNamespace("..").ok());
  EXPECT_FALSE(ValidateNamespace(".").ok());
  EXPECT_FALSE(ValidateNamespace("a/b").ok());
  EXPECT_FALSE(ValidateNamespace(std::string("a\0b", 3)).ok());
  EXPECT_FALSE(ValidateNamespace("job 1").ok());
}

TEST(NamesTest, ObjectNameRules) {
  EXPECT_TRUE(ValidateObjectName("__0_0.distcp").ok());
  EXPECT_TRUE(ValidateObjectName(".metadata").ok());
  EXPECT_TRUE(ValidateObjectName("sub/dir/file.bin").ok());
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/", "a/./b", "x y", "a\\b"}) {
    Status s = ValidateObjectName(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ValidateObjectName(std::string("a\0b", 3)).ok());
  EXPECT_FALSE(ValidateObjectName(std::string(1025, 'a')).ok());
  EXPECT_FALSE(ValidateObjectName(std::string(256, 'a')).ok());
  // Issue 16 item 6: a 255-byte part was accepted but no tier could write it.
  EXPECT_TRUE(ValidateObjectName(std::string(200, 'a')).ok());
  EXPECT_FALSE(ValidateObjectName(std::string(201, 'a')).ok());
  std::string longest = std::string(200, 'a') + "/" + std::string(200, 'b') + "/" + std::string(200, 'c') + "/" +
                        std::string(165, 'd');
  ASSERT_EQ(longest.size(), 768u);
  EXPECT_TRUE(ValidateObjectName(longest).ok());
  EXPECT_FALSE(ValidateObjectName(longest + "d").ok());
  EXPECT_FALSE(ValidateObjectName("_tierckpt_manifest.json").ok());
  EXPECT_TRUE(ValidateObjectName("_tierckpt_manifest.json", /*allow_reserved=*/true).ok());
}

TEST(NamesTest, PartRecordNames) {
  EXPECT_EQ(PartRecordName("n1"), "_tierckpt_part.n1.json");
  std::string node;
  EXPECT_TRUE(ParsePartRecordName("_tierckpt_part.n1.json", &node));
  EXPECT_EQ(node, "n1");
  EXPECT_TRUE(ParsePartRecordName(PartRecordName("rack-2.node_7"), &node));
  EXPECT_EQ(node, "rack-2.node_7");
  EXPECT_FALSE(ParsePartRecordName("_tierckpt_part..json"));
  EXPECT_FALSE(ParsePartRecordName("_tierckpt_part.a/b.json"));
  EXPECT_FALSE(ParsePartRecordName("_tierckpt_part.n1.txt"));
  EXPECT_FALSE(ParsePartRecordName("_tierckpt_manifest.json"));
  EXPECT_FALSE(ParsePartRecordName("x_tierckpt_part.n1.json"));
  // Part records are the one reserved name an object name never is.
  EXPECT_FALSE(ValidateObjectName(PartRecordName("n1")).ok());
}

TEST(NamesTest, MessagesQuoteHostileInput) {
  Status s = ValidateObjectName(std::string("bad\x01name", 8));
  EXPECT_NE(s.message().find("\\x01"), std::string::npos) << s.message();
}

TEST(NamesTest, StepDirNamesSortNumerically) {
  EXPECT_EQ(StepDirName(123), "step_0000000123");
  EXPECT_LT(StepDirName(9), StepDirName(10));
  uint64_t step = 0;
  EXPECT_TRUE(ParseStepDirName("step_0000000123", &step));
  EXPECT_EQ(step, 123u);
  EXPECT_FALSE(ParseStepDirName("step_123", &step));
  EXPECT_FALSE(ParseStepDirName("step_00000001x3", &step));
  EXPECT_TRUE(ValidateStep(kMaxStep).ok());
  EXPECT_FALSE(ValidateStep(kMaxStep + 1).ok());
}

// Issue 16 item 5: `tierckpt rm j 0100` deleted step 64 (CLI11 read octal).
TEST(NamesTest, StepsTypedWithLeadingZerosOrHexAreDecimalOrRefused) {
  EXPECT_EQ(*ParseStep("010"), 10u);
  EXPECT_EQ(*ParseStep("0100"), 100u);
  EXPECT_EQ(*ParseStep("0000000100"), 100u);
  EXPECT_EQ(*ParseStep("0"), 0u);
  EXPECT_EQ(*ParseStep("9999999999"), kMaxStep);
  for (const char* bad : {"0x10", "0X10", "0b1", "0o7", "-1", "+1", "1e3", " 7", "7 ", "", "1.0", "10000000000",
                          "18446744073709551616", "99999999999999999999999999"}) {
    Result<uint64_t> r = ParseStep(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("0 to 9999999999"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
}

}  // namespace
}  // namespace tierckpt
