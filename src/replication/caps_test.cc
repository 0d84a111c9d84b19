// Replication under --replicate-rate: the origin's peer service pays for
// each chunk of its own objects before it streams it; replicas it holds for
// others go back uncapped.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "common/rate_limiter.h"
#include "replication/peer_test_nodes.h"
#include "testing/fake_clock.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::ReadFd;
using testing::TierHarness;
using testing::WriteStep;

TEST(ReplicationCapsTest, ReplicaBytesArePaidForChunkByChunkAndTheReplicaIsWhole) {
  auto net = peer::InMemoryNetwork::Create(4u << 20);
  const cluster::Membership members = Members(2);
  ::tierckpt::testing::FakeClock clock1, clock2;
  RateLimiter rate1(1u << 20, 1u << 20, &clock1);  // 1 MiB/s, 1 MiB of burst
  RateLimiter rate2(1u << 20, 1u << 20, &clock2);
  Node n1("n1", net, members, 2, nullptr, &rate1);
  Node n2("n2", net, members, 2, nullptr, &rate2);
  const std::map<std::string, std::string> objects = {{"a", Bytes(3u << 20, 'a')}, {"b", Bytes(1000, 'b')}};
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 1, objects).ok());
  ASSERT_TRUE(n1.replicator->Replicate("job", 1).ok());
  EXPECT_EQ(rate1.charged_bytes(), (3u << 20) + 1000);
  // 3 MiB + 1000 B at 1 MiB/s after a burst of 1 MiB: about 2 s of waits.
  EXPECT_GE(clock1.slept_ns(), 2'000'000'000);
  EXPECT_LT(clock1.slept_ns(), 2'100'000'000);
  Result<MemoryTier*> held = n2.replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  for (const auto& [name, data] : objects) {
    Result<OpenedObject> o = (*held)->OpenObject("job", 1, name);
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(ReadFd(o->fd.get()), data) << name;
  }
  // A replacement for n1 restores from n2's replica: uncapped (a restore
  // waits on it), so n2's limiter is never charged.
  TierHarness fresh;
  Result<std::string> holder = n1.replicator->RestoreFromPeers(fresh.tier.get(), "job", 1);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  EXPECT_EQ(rate2.charged_bytes(), 0u);
  EXPECT_EQ(clock2.slept_ns(), 0);
}

}  // namespace
}  // namespace tierckpt::agent
