// --peers dns:NAME:PORT: parsing, discovery through a resolver and a probe,
// and the refresh that finds a replaced node at its new address.
#include "cluster/dns_peers.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "cluster/peer_source.h"

namespace tierckpt::cluster {
namespace {

TEST(DnsPeersParseTest, NameAndPortAreTaken) {
  Result<DnsPeersSpec> s = ParseDnsPeers("dns:TierCkpt-Peers.tierckpt.svc.cluster.local:7100");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->name, "tierckpt-peers.tierckpt.svc.cluster.local");
  EXPECT_EQ(s->port, 7100);
  EXPECT_TRUE(IsDnsPeers("dns:x:1"));
  EXPECT_FALSE(IsDnsPeers("hosts.txt"));
  EXPECT_FALSE(IsDnsPeers("slurm:7100"));
}

TEST(DnsPeersParseTest, BadValuesSayWhatIsWrongAndWhatToWrite) {
  struct Case {
    const char* spec;
    const char* says;
  };
  const Case cases[] = {
      {"dns:peers", "has no port"},
      {"dns::7100", "has no name before the port"},
      {"dns:peers:", "\"\" is not a port (1..65535)"},
      {"dns:peers:0", "\"0\" is not a port"},
      {"dns:peers:65536", "\"65536\" is not a port"},
      {"dns:peers:71x0", "\"71x0\" is not a port"},
      {"dns:peers:-1", "\"-1\" is not a port"},
      {"dns:[::1]:7100", "is an IPv6 address, not a name"},
      {"dns:fd00::1:7100", "is an IPv6 address, not a name"},
      {"dns:10.0.0.1:7100", "is an IP address, not a name"},
      {"dns:bad_name.svc:7100", "the name"},
      {"dns:-lead.svc:7100", "the name"},
  };
  for (const Case& c : cases) {
    Result<DnsPeersSpec> s = ParseDnsPeers(c.spec);
    ASSERT_FALSE(s.ok()) << c.spec;
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << c.spec;
    EXPECT_NE(s.status().message().find(c.says), std::string::npos) << c.spec << ": " << s.status().ToString();
    EXPECT_NE(s.status().message().find("--peers"), std::string::npos) << s.status().ToString();
  }
  Result<DnsPeersSpec> s = ParseDnsPeers("dns:peers:0");
  EXPECT_NE(s.status().message().find("write dns:NAME:PORT"), std::string::npos) << s.status().ToString();
}

TEST(DnsPeersParseTest, LoadPeersRefusesADnsValueItCannotResolveAlone) {
  Result<Membership> m = LoadPeers("dns:peers:7100");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("the agent"), std::string::npos) << m.status().ToString();
  Result<Membership> bad = LoadPeers("dns:peers:0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("is not a port"), std::string::npos) << bad.status().ToString();
}

TEST(SystemResolverTest, LocalhostResolvesToALoopbackAddress) {
  std::unique_ptr<HostResolver> r = NewSystemResolver();
  Result<std::vector<std::string>> hosts = r->Resolve("localhost");
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  bool loopback = false;
  for (const std::string& h : *hosts) loopback |= (h == "127.0.0.1" || h == "::1");
  EXPECT_TRUE(loopback) << ::testing::PrintToString(*hosts);
}

TEST(SystemResolverTest, ANameThatDoesNotExistIsNotFoundNamingIt) {
  std::unique_ptr<HostResolver> r = NewSystemResolver();
  // .invalid never resolves (RFC 2606); a resolver without network answers fast too.
  Result<std::vector<std::string>> hosts = r->Resolve("tierckpt-no-such-peers.invalid");
  ASSERT_FALSE(hosts.ok());
  EXPECT_NE(hosts.status().message().find("tierckpt-no-such-peers.invalid"), std::string::npos)
      << hosts.status().ToString();
}

// Agents at addresses: what a probe of each answers.
struct Agents {
  std::map<std::string, std::string> at;  // address → node id
  int probes = 0;
  ProbeNodeId Probe() {
    return [this](const std::string& address) -> Result<std::string> {
      ++probes;
      auto it = at.find(address);
      if (it == at.end()) return Unavailable("connecting to " + address + ": Connection refused");
      return it->second;
    };
  }
};

DnsDiscoveryOptions Fast(size_t expect, std::function<void(std::chrono::milliseconds)> sleep = nullptr) {
  DnsDiscoveryOptions o;
  o.expect = expect;
  o.wait = std::chrono::milliseconds(2000);
  o.retry = std::chrono::milliseconds(1);
  o.sleep = sleep ? std::move(sleep) : [](std::chrono::milliseconds) {};
  return o;
}

const DnsPeersSpec kSpec{"peers.test", 7100};

TEST(DnsDiscoveryTest, EachAddressIsNamedByTheNodeIdItsAgentAnswers) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.3", "10.0.0.1", "fd00::7"});
  Agents a{{{"10.0.0.1:7100", "node-b"}, {"10.0.0.3:7100", "node-a"}, {"[fd00::7]:7100", "node-c"}}};
  Result<Membership> m = DiscoverDnsPeers(kSpec, "node-a", r, a.Probe(), Fast(3));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ(m->Find("node-a")->address, "10.0.0.3:7100");
  EXPECT_EQ(m->Find("node-b")->address, "10.0.0.1:7100");
  EXPECT_EQ(m->Find("node-c")->address, "[fd00::7]:7100");
}

TEST(DnsDiscoveryTest, ItWaitsForTheExpectedCountAsAgentsComeUp) {
  StaticResolver r;
  Agents a;
  int round = 0;
  // Round 0: the name does not exist yet; 1: only this agent; 2: a second
  // address that refuses; 3: it answers, and a third appears.
  auto sleep = [&](std::chrono::milliseconds) {
    ++round;
    if (round == 1) {
      r.Set("peers.test", {"10.0.0.1"});
      a.at["10.0.0.1:7100"] = "n1";
    }
    if (round == 2) r.Set("peers.test", {"10.0.0.1", "10.0.0.2"});
    if (round == 3) {
      a.at["10.0.0.2:7100"] = "n2";
      a.at["10.0.0.3:7100"] = "n3";
      r.Set("peers.test", {"10.0.0.1", "10.0.0.2", "10.0.0.3"});
    }
  };
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), Fast(3, sleep));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Describe(), "n1, n2, n3");
  EXPECT_EQ(round, 3);
  EXPECT_EQ(a.probes, 4);  // 10.0.0.1 once, 10.0.0.2 twice (refused, then n2), 10.0.0.3 once
}

TEST(DnsDiscoveryTest, WithoutACountEveryAddressOfOneRoundMustAnswer) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.2"});
  Agents a{{{"10.0.0.1:7100", "n1"}}};
  int round = 0;
  auto sleep = [&](std::chrono::milliseconds) {
    if (++round == 2) a.at["10.0.0.2:7100"] = "n2";
  };
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), Fast(0, sleep));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size(), 2u);
  EXPECT_EQ(round, 2);
}

TEST(DnsDiscoveryTest, ANameThatNeverResolvesTimesOutNamingItTheErrorAndWhatToCheck) {
  StaticResolver r;
  Agents a;
  DnsDiscoveryOptions o = Fast(2);
  o.wait = std::chrono::milliseconds(20);
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kNotFound);
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("--peers dns:peers.test:7100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("resolving peers.test: Name or service not known"), std::string::npos) << msg;
  EXPECT_NE(msg.find("headless Service peers.test exists"), std::string::npos) << msg;
  EXPECT_GE(r.calls(), 2);
}

TEST(DnsDiscoveryTest, TooFewAgentsTimeOutNamingWhoAnsweredAndWhoDidNot) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.2"});
  Agents a{{{"10.0.0.1:7100", "n1"}}};
  DnsDiscoveryOptions o = Fast(3);
  o.wait = std::chrono::milliseconds(20);
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kTimeout);
  const std::string& msg = m.status().message();
  EXPECT_NE(msg.find("agents known are n1 at 10.0.0.1:7100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("waiting for 3 (--peers-count)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("10.0.0.2:7100 does not answer: connecting to 10.0.0.2:7100: Connection refused"),
            std::string::npos)
      << msg;
}

TEST(DnsDiscoveryTest, ThisAgentMustBeAmongTheAnswers) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.2"});
  Agents a{{{"10.0.0.1:7100", "n1"}, {"10.0.0.2:7100", "n2"}}};
  DnsDiscoveryOptions o = Fast(2);
  o.wait = std::chrono::milliseconds(20);
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n9", r, a.Probe(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("this agent (n9) is not among them"), std::string::npos)
      << m.status().ToString();
}

TEST(DnsDiscoveryTest, TwoAgentsWithOneNodeIdAreRefusedAtOnce) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.2"});
  Agents a{{{"10.0.0.1:7100", "n1"}, {"10.0.0.2:7100", "n1"}}};
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), Fast(2));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kInvalidArgument);
  EXPECT_NE(m.status().message().find("10.0.0.1:7100 and 10.0.0.2:7100 both have node id n1"), std::string::npos)
      << m.status().ToString();
}

TEST(DnsDiscoveryTest, MoreAgentsThanTheCountAreRefused) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.2", "10.0.0.3"});
  Agents a{{{"10.0.0.1:7100", "n1"}, {"10.0.0.2:7100", "n2"}, {"10.0.0.3:7100", "n3"}}};
  Result<Membership> m = DiscoverDnsPeers(kSpec, "n1", r, a.Probe(), Fast(2));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("3 agents answer"), std::string::npos) << m.status().ToString();
  EXPECT_NE(m.status().message().find("--peers-count is 2"), std::string::npos) << m.status().ToString();
}

TEST(DnsRefreshTest, AReplacedNodeIsFoundAtItsNewAddressByItsNodeId) {
  StaticResolver r;
  // n2 was at 10.0.0.2; its replacement, a machine with another address, keeps the node id.
  r.Set("peers.test", {"10.0.0.1", "10.0.0.9"});
  Agents a{{{"10.0.0.1:7100", "n1"}, {"10.0.0.9:7100", "n2"}}};
  const std::map<std::string, std::string> current{{"n1", "10.0.0.1:7100"}, {"n2", "10.0.0.2:7100"}};
  std::map<std::string, std::string> strangers;
  Result<std::map<std::string, std::string>> moved = RefreshDnsAddresses(kSpec, r, a.Probe(), current, &strangers);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (std::map<std::string, std::string>{{"n2", "10.0.0.9:7100"}}));
  EXPECT_TRUE(strangers.empty());
  EXPECT_EQ(a.probes, 1);  // known addresses are not asked again
}

TEST(DnsRefreshTest, AnAgentOutsideTheRingIsReportedNotAdded) {
  StaticResolver r;
  r.Set("peers.test", {"10.0.0.1", "10.0.0.5"});
  Agents a{{{"10.0.0.1:7100", "n1"}, {"10.0.0.5:7100", "n5"}}};
  const std::map<std::string, std::string> current{{"n1", "10.0.0.1:7100"}};
  std::map<std::string, std::string> strangers;
  Result<std::map<std::string, std::string>> moved = RefreshDnsAddresses(kSpec, r, a.Probe(), current, &strangers);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_TRUE(moved->empty());
  EXPECT_EQ(strangers, (std::map<std::string, std::string>{{"n5", "10.0.0.5:7100"}}));
}

}  // namespace
}  // namespace tierckpt::cluster
