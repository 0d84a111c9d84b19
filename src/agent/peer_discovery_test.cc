// --peers dns: in the agent: a ring member found at a new address is moved
// there (a replaced node), the ring does not change, strangers stay out.
#include "agent/peer_discovery.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace tierckpt::agent {
namespace {

cluster::Membership Ring() {
  auto m = cluster::Membership::Create({{"n1", "10.0.0.1:7100", "", {}}, {"n2", "10.0.0.2:7100", "", {}}});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

std::unique_ptr<Replicator> MakeReplicator() {
  // The refresher touches only the replicator's addresses; no connection is made.
  auto r = Replicator::Create(nullptr, Ring(), cluster::PlacementPolicy{2, 1}, "n1", peer::Millis(1000));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return std::move(r).value();
}

TEST(ReplicatorMoveNodeTest, AMovedMemberIsDialledAtItsNewAddressAndTheRingStays) {
  std::unique_ptr<Replicator> r = MakeReplicator();
  ASSERT_TRUE(r->MoveNode("n2", "10.0.0.9:7100").ok());
  EXPECT_EQ(r->AddressOf("n2"), "10.0.0.9:7100");
  EXPECT_EQ(r->AddressOf("n1"), "10.0.0.1:7100");
  EXPECT_EQ(r->holders(), std::vector<std::string>{"n2"});
  EXPECT_EQ(r->Addresses(), (std::map<std::string, std::string>{{"n1", "10.0.0.1:7100"}, {"n2", "10.0.0.9:7100"}}));
  Status stranger = r->MoveNode("n7", "10.0.0.7:7100");
  EXPECT_EQ(stranger.code(), Code::kNotFound);
  EXPECT_NE(stranger.message().find("not in this agent's ring (n1, n2)"), std::string::npos) << stranger.ToString();
  EXPECT_EQ(r->MoveNode("n2", "not an address").code(), Code::kInvalidArgument);
}

TEST(PeerAddressRefresherTest, AReplacedNodeAnsweringElsewhereIsMovedAndAStrangerIsNot) {
  std::unique_ptr<Replicator> rep = MakeReplicator();
  auto resolver = std::make_unique<cluster::StaticResolver>();
  cluster::StaticResolver* dns = resolver.get();
  dns->Set("peers.test", {"10.0.0.1", "10.0.0.2"});
  std::map<std::string, std::string> at{{"10.0.0.1:7100", "n1"}, {"10.0.0.2:7100", "n2"}};
  auto probe = [&at](const std::string& address) -> Result<std::string> {
    auto it = at.find(address);
    if (it == at.end()) return Unavailable("connecting to " + address + ": Connection refused");
    return it->second;
  };
  PeerAddressRefresher refresher({"peers.test", 7100}, std::move(resolver), probe, rep.get(),
                                 std::chrono::milliseconds(1000));
  refresher.RefreshOnce();
  EXPECT_EQ(rep->AddressOf("n2"), "10.0.0.2:7100");
  // n2's machine is replaced by one at 10.0.0.9; an agent outside the ring appears too.
  dns->Set("peers.test", {"10.0.0.1", "10.0.0.9", "10.0.0.5"});
  at.erase("10.0.0.2:7100");
  at["10.0.0.9:7100"] = "n2";
  at["10.0.0.5:7100"] = "n5";
  refresher.RefreshOnce();
  EXPECT_EQ(rep->AddressOf("n2"), "10.0.0.9:7100");
  EXPECT_EQ(rep->AddressOf("n5"), std::nullopt);
  // The name vanishing keeps the addresses known.
  dns->Remove("peers.test");
  refresher.RefreshOnce();
  EXPECT_EQ(rep->AddressOf("n2"), "10.0.0.9:7100");
}

}  // namespace
}  // namespace tierckpt::agent
