// Slurm host lists, expanded as `scontrol show hostnames` expands them.
#include "cluster/hostlist.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tierckpt::cluster {
namespace {

using Names = std::vector<std::string>;

Names Expand(std::string_view list) {
  Result<Names> r = ExpandHostlist(list);
  EXPECT_TRUE(r.ok()) << list << ": " << r.status().ToString();
  return r.ok() ? *r : Names{};
}

TEST(HostlistTest, ExpandsRangesListsAndPlainNamesInTheOrderWritten) {
  EXPECT_EQ(Expand("gpu7"), (Names{"gpu7"}));
  EXPECT_EQ(Expand("node[1-3]"), (Names{"node1", "node2", "node3"}));
  EXPECT_EQ(Expand("node[001-003,007],login"), (Names{"node001", "node002", "node003", "node007", "login"}));
  EXPECT_EQ(Expand("a[3,1]"), (Names{"a3", "a1"}));
  EXPECT_EQ(Expand("x[1-2]-ib"), (Names{"x1-ib", "x2-ib"}));
  EXPECT_EQ(Expand("10.0.0.[1-2]"), (Names{"10.0.0.1", "10.0.0.2"}));
}

TEST(HostlistTest, ARangeKeepsTheWidthOfItsLowBound) {
  EXPECT_EQ(Expand("n[08-11]"), (Names{"n08", "n09", "n10", "n11"}));
  EXPECT_EQ(Expand("n[8-10]"), (Names{"n8", "n9", "n10"}));
  EXPECT_EQ(Expand("n[098-100]"), (Names{"n098", "n099", "n100"}));
}

TEST(HostlistTest, SeveralBracketsExpandToTheirProductLeftToRight) {
  EXPECT_EQ(Expand("r[1-2]n[1-2]"), (Names{"r1n1", "r1n2", "r2n1", "r2n2"}));
  EXPECT_EQ(Expand("r[1-2]n[1-2],spare"), (Names{"r1n1", "r1n2", "r2n1", "r2n2", "spare"}));
}

TEST(HostlistTest, MalformedListsAreRefusedSayingWhatIsWrong) {
  struct Case {
    std::string list, says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "is empty"},
           {"a,,b", "an item is empty"},
           {"a,", "an item is empty"},
           {"n[1-3", "not closed"},
           {"n1-3]", "has no '['"},
           {"n[[1]]", "nested"},
           {"n[3-1]", "runs backwards"},
           {"n[a-b]", "not a number"},
           {"n[]", "not a number"},
           {"n[1-]", "not a number"},
           {"n[1234567890]", "at most 9 digits"},
           {"n[1-2],n1", "names host \"n1\" twice"},
           {"n[0-99999]", "more than 65536 hosts"},
           {"a[0-999]b[0-999]", "more than 65536 hosts"},
       }) {
    Result<Names> r = ExpandHostlist(c.list);
    ASSERT_FALSE(r.ok()) << c.list;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.list;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << c.list << ": " << r.status().ToString();
    EXPECT_NE(r.status().message().find("node[001-004,007]"), std::string::npos) << "says how to write it";
  }
}

}  // namespace
}  // namespace tierckpt::cluster
