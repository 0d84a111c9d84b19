#include "tierckpt/status.h"

#include <gtest/gtest.h>

namespace tierckpt {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgument("odd value " + std::to_string(v));
  return v / 2;
}

Status Chain(int v, int* out) {
  TC_ASSIGN_OR_RETURN(int h, Half(v));
  TC_ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, OkAndErrorToString) {
  EXPECT_EQ(Status::Ok().ToString(), "ok");
  Status s = NotFound("step 3 of job1");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: step 3 of job1");
}

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  Status s = IoError("disk full").WithContext("persist job1/5");
  EXPECT_EQ(s.code(), Code::kIoError);
  EXPECT_EQ(s.message(), "persist job1/5: disk full");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, MacrosPropagate) {
  int out = 0;
  EXPECT_TRUE(Chain(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Chain(6, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd value 3");
}

TEST(StatusTest, CodesRoundTripThroughNumbers) {
  for (uint32_t n = 0; n <= 14; ++n) {
    EXPECT_EQ(static_cast<uint32_t>(CodeFromNumber(n)), n);
  }
  EXPECT_EQ(CodeFromNumber(999), Code::kInternal);
}

TEST(StatusTest, ResultFromOkStatusBecomesInternal) {
  Result<int> r(Status::Ok());
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace tierckpt
