#include "cluster/hostfile.h"

#include <gtest/gtest.h>

#include "os/files.h"
#include "testing/temp_dir.h"

namespace tierckpt::cluster {
namespace {

std::string ErrorOf(const Result<Membership>& r) { return r.ok() ? "(ok)" : r.status().message(); }

TEST(HostfileTest, ParsesMembersCommentsAndBlankLines) {
  const char* text =
      "# cluster of three\n"
      "\n"
      "n2 10.0.0.2:7000 domain=rack2   # trailing comment\r\n"
      "\tn1  Host1:7000\tdomain=rack1 ranks=0-3,8\n"
      "   \n"
      "n3 [fd00::3]:7000 ranks=4,5 domain=rack2";  // no final newline
  Result<Membership> m = ParseHostfile(text, "hosts.txt");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(m->members()[0], (Member{"n1", "host1:7000", "rack1", {0, 1, 2, 3, 8}}));
  EXPECT_EQ(m->members()[1], (Member{"n2", "10.0.0.2:7000", "rack2", {}}));
  EXPECT_EQ(m->members()[2], (Member{"n3", "[fd00::3]:7000", "rack2", {4, 5}}));
  EXPECT_TRUE(m->has_domains());
  EXPECT_EQ(m->FindByRank(8)->node_id, "n1");
}

TEST(HostfileTest, MembersWithoutDomainsOrRanks) {
  Result<Membership> m = ParseHostfile("a localhost:7001\nb localhost:7002\n", "t");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Describe(), "a, b");
  EXPECT_FALSE(m->has_domains());
  EXPECT_TRUE(m->members()[0].ranks.empty());
}

TEST(HostfileTest, EveryErrorNamesFileLineAndFix) {
  struct Case {
    const char* text;
    const char* expected;
  };
  const Case cases[] = {
      {"", "hostfile h.txt lists no members; write one line per agent"},
      {"# only comments\n\n", "hostfile h.txt lists no members"},
      {"\n\nn1\n", "hostfile h.txt line 3: has a node id but no address; write node_id host:port"},
      {"n/1 h:1\n", "hostfile h.txt line 1: node id \"n/1\" contains a character outside"},
      {"n1 h:1\nn2 h2\n", "hostfile h.txt line 2: address \"h2\" has no :port"},
      {"n1 h:1 rack1\n",
       "line 1: unknown field \"rack1\"; after the address only domain=<name> and ranks=<list>"},
      {"n1 h:1 zone=a\n", "line 1: unknown field \"zone=a\""},
      {"n1 h:1 domain=a domain=b\n", "line 1: gives domain= twice; keep one"},
      {"n1 h:1 domain=\n", "line 1: domain= has no value"},
      {"n1 h:1 domain=r/1\n", "line 1: failure domain \"r/1\" contains a character outside"},
      {"n1 h:1 ranks=1-x\n", "line 1: ranks entry \"1-x\" is not a rank or a range"},
      {"n1 h:1 ranks=1,,2\n", "line 1: ranks entry \"\" is not a rank or a range"},
      {"n1 h:1 ranks=5-2\n", "line 1: ranks range \"5-2\" runs backwards"},
      {"n1 h:1 ranks=01\n", "line 1: ranks entry \"01\""},
      {"n1 h:1 ranks=0-4294967295\n", "line 1: lists more than 1048576 ranks in the file"},
      {"n1 h:1 ranks=1-3,2\n", "line 1: rank 2 is already listed earlier on this line"},
      {"n1 h:1 ranks=0-3\n#\nn2 h2:1 ranks=3\n", "line 3: rank 3 is already listed on line 1"},
      {"n1 h:1\nn1 h2:1\n", "line 2: node id \"n1\" is already used on line 1"},
      {"n1 h:1\n\nn2 H:1\n", "line 3: address h:1 is already used on line 1"},
      {"n1 h:1 domain=r1\nn2 h2:1\n",
       "line 2: has no domain= but line 1 has one; give every line a domain= or none"},
      {"n1 h:1\nn2 h2:1 domain=r1\n", "line 2: has a domain= but line 1 has none"},
  };
  for (const Case& c : cases) {
    Result<Membership> r = ParseHostfile(c.text, "h.txt");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << c.text;
    EXPECT_NE(ErrorOf(r).find(c.expected), std::string::npos) << c.text << "\n  got: " << ErrorOf(r);
  }
}

TEST(HostfileTest, ReadsAFileAndNamesItsPath) {
  testing_util::TempDir dir;
  std::string path = dir.Sub("hosts");
  ASSERT_TRUE(WriteFileAtomic(path, "a h1:1\nb h2:1 bogus\n", false).ok());
  Result<Membership> r = ReadHostfile(path);
  EXPECT_NE(ErrorOf(r).find("hostfile " + path + " line 2: unknown field \"bogus\""), std::string::npos)
      << ErrorOf(r);
  ASSERT_TRUE(WriteFileAtomic(path, "a h1:1\nb h2:1\n", false).ok());
  r = ReadHostfile(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 2u);
  r = ReadHostfile(dir.Sub("missing"));
  EXPECT_EQ(r.status().code(), Code::kNotFound) << r.status().ToString();
  EXPECT_NE(ErrorOf(r).find("reading hostfile " + dir.Sub("missing")), std::string::npos) << ErrorOf(r);
}

}  // namespace
}  // namespace tierckpt::cluster
