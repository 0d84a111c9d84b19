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

}  // namespace
}  // namespace tierckpt
