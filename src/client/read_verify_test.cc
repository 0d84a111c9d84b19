// read_verify_test.cc — DecideReadCheck: which reads the client hashes.
#include "client/read_verify.h"

#include <gtest/gtest.h>

#include "wire/protocol.h"

namespace tierckpt::client {
namespace {

using std::chrono::milliseconds;

TEST(ReadVerifyTest, AlwaysHashesWhateverTheAgentSays) {
  EXPECT_EQ(DecideReadCheck(ReadVerify::Always(), 0), ReadCheck::kHash);
  EXPECT_EQ(DecideReadCheck(ReadVerify::Always(), wire::kNeverVerifiedAgeMs), ReadCheck::kHash);
  EXPECT_EQ(DecideReadCheck({}, 5), ReadCheck::kHash);  // the default is kAlways
}

TEST(ReadVerifyTest, AttestedSkipsOnlyAFreshVerification) {
  const ReadVerify v = ReadVerify::Attested(milliseconds(900'000));
  EXPECT_EQ(DecideReadCheck(v, 0), ReadCheck::kAttested);
  EXPECT_EQ(DecideReadCheck(v, 900'000), ReadCheck::kAttested);
  EXPECT_EQ(DecideReadCheck(v, 900'001), ReadCheck::kHash);
  EXPECT_EQ(DecideReadCheck(v, wire::kNeverVerifiedAgeMs), ReadCheck::kHash);
  EXPECT_EQ(DecideReadCheck(ReadVerify::Attested(milliseconds(-1)), 0), ReadCheck::kHash);
}

TEST(ReadVerifyTest, NeverHashes) {
  EXPECT_EQ(DecideReadCheck(ReadVerify::Never(), wire::kNeverVerifiedAgeMs), ReadCheck::kUnverified);
}

TEST(ReadVerifyTest, ModeNamesRoundTripAndUnknownNamesAreRefusedNamingTheChoices) {
  for (auto m : {ReadVerify::Mode::kAlways, ReadVerify::Mode::kAttested, ReadVerify::Mode::kNever}) {
    Result<ReadVerify::Mode> parsed = ParseReadVerifyMode(ReadVerifyModeName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  Result<ReadVerify::Mode> bad = ParseReadVerifyMode("sometimes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("attested"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::client
