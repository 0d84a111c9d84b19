#include "cluster/address.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tierckpt::cluster {
namespace {

TEST(AddressTest, NodeIdRules) {
  EXPECT_TRUE(ValidateNodeId("node-07").ok());
  EXPECT_TRUE(ValidateNodeId("a_b.c-D9").ok());
  EXPECT_TRUE(ValidateNodeId(std::string(128, 'n')).ok());
  const std::vector<std::string> bad_ids = {
      "", ".", "..", "a b", "a/b", "a:b", "n\xc3\xa9", std::string(129, 'n'), std::string("a\0b", 3)};
  for (const std::string& bad : bad_ids) {
    Status s = ValidateNodeId(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("node id"), std::string::npos) << s.message();
  }
  EXPECT_TRUE(ValidateFailureDomain("rack1").ok());
  Status s = ValidateFailureDomain("rack 1");
  EXPECT_NE(s.message().find("failure domain \"rack 1\""), std::string::npos) << s.message();
}

TEST(AddressTest, ParsesEveryHostKind) {
  Result<PeerAddress> v4 = ParseAddress("10.0.0.7:7000");
  ASSERT_TRUE(v4.ok()) << v4.status().ToString();
  EXPECT_EQ(v4->kind, HostKind::kIpv4);
  EXPECT_EQ(v4->host, "10.0.0.7");
  EXPECT_EQ(v4->port, 7000);
  EXPECT_EQ(v4->ToString(), "10.0.0.7:7000");

  Result<PeerAddress> v6 = ParseAddress("[FD00:0:0::7]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->kind, HostKind::kIpv6);
  EXPECT_EQ(v6->host, "fd00::7");
  EXPECT_EQ(v6->port, 65535);
  EXPECT_EQ(v6->ToString(), "[fd00::7]:65535");

  Result<PeerAddress> name = ParseAddress("Node7.Example-1.org:1");
  ASSERT_TRUE(name.ok()) << name.status().ToString();
  EXPECT_EQ(name->kind, HostKind::kHostName);
  EXPECT_EQ(name->ToString(), "node7.example-1.org:1");

  EXPECT_TRUE(ParseAddress("localhost:7000").ok());
  EXPECT_TRUE(ParseAddress("0.0.0.0:1").ok());
  EXPECT_TRUE(ParseAddress("[::1]:80").ok());
  EXPECT_TRUE(ParseAddress(std::string(63, 'a') + ".b:80").ok());
}

TEST(AddressTest, TwoSpellingsOfOneEndpointCompareEqual) {
  EXPECT_EQ(*ParseAddress("[0:0::1]:80"), *ParseAddress("[::1]:80"));
  EXPECT_EQ(*ParseAddress("HOST:80"), *ParseAddress("host:80"));
}

TEST(AddressTest, RejectsBadAddressesWithTheReason) {
  struct Case {
    const char* text;
    const char* reason;
  };
  const Case cases[] = {
      {"", "is empty"},
      {"host", "no :port"},
      {":80", "no host"},
      {"host:", "port \"\""},
      {"host:0", "not a number 1..65535"},
      {"host:65536", "not a number 1..65535"},
      {"host:080", "leading zeros"},
      {"host:8a", "not a number"},
      {"::1:80", "without brackets"},
      {"[::1]80", "no :port after"},
      {"[::1:80", "without a closing"},
      {"[fe80::1%eth0]:80", "zone id"},
      {"[1.2.3.4]:80", "not an IPv6 address"},
      {"[]:80", "not an IPv6 address"},
      {"1.2.3.256:80", "neither a host name nor an IPv4"},
      {"01.2.3.4:80", "no leading zeros"},
      {"1.2.3:80", "neither a host name nor an IPv4"},
      {"123:80", "neither a host name nor an IPv4"},
      {"host.:80", "trailing dot"},
      {".host:80", "empty label"},
      {"a..b:80", "empty label"},
      {"-a.b:80", "starting or ending with '-'"},
      {"a_b:80", "outside [A-Za-z0-9-]"},
      {"a b:80", "outside [A-Za-z0-9-]"},
  };
  for (const Case& c : cases) {
    Result<PeerAddress> r = ParseAddress(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.reason), std::string::npos)
        << c.text << ": " << r.status().message();
    EXPECT_NE(r.status().message().find("write host:port"), std::string::npos) << r.status().message();
  }
  EXPECT_FALSE(ParseAddress(std::string(64, 'a') + ".b:80").ok());
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  EXPECT_FALSE(ParseAddress(long_name + "d:80").ok());
}

}  // namespace
}  // namespace tierckpt::cluster
