// Replication between agents, in process: MemoryTiers, ReplicaTiers,
// PeerServices and Replicators of several nodes talking over an in-memory
// network through a fault-injecting transport. The real agents over TCP are
// tested in tests/integration/test_replication.py.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "os/files.h"
#include "replication/peer_messages.h"
#include "replication/peer_store.h"
#include "replication/peer_test_nodes.h"
#include "tier/layout.h"

namespace tierckpt::agent {
namespace {

using testing::Address;
using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::ReadFd;
using testing::TierHarness;
using testing::WriteStep;

class ReplicationTest : public ::testing::Test {
 protected:
  void Start(int n, uint32_t replicas = 2) {
    members = Members(n);
    for (int i = 1; i <= n; ++i) {
      const std::string id = "n" + std::to_string(i);
      nodes[id] = std::make_unique<Node>(id, net, members, replicas);
    }
  }
  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  cluster::Membership members;
  std::map<std::string, std::unique_ptr<Node>> nodes;
  const std::map<std::string, std::string> objects = {
      {"a", Bytes(3u << 20, 'a')}, {"dir/b", Bytes(1000, 'b')}, {"empty", ""}};
  // Objects are fetched in parallel: for faults on "the n-th stream", every
  // object is large enough for the fault's offset.
  const std::map<std::string, std::string> large = {
      {"a", Bytes(3u << 20, 'a')}, {"b", Bytes(2u << 20, 'b')}, {"c", Bytes(2u << 20, 'c')}};
};

TEST_F(ReplicationTest, TheRingSuccessorHoldsAVerifiedReplicaAndAReplacementRestoresFromIt) {
  Start(3);
  Node& n1 = *nodes["n1"];
  EXPECT_EQ(n1.replicator->holders(), std::vector<std::string>{"n2"});
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 4, objects).ok());
  ASSERT_TRUE(n1.replicator->Replicate("job", 4).ok());

  Result<MemoryTier*> held = nodes["n2"]->replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  EXPECT_EQ((*held)->GetManifest("job", 4)->node, "n1");  // the origin's manifest, unchanged
  for (const auto& [name, data] : objects) {
    Result<OpenedObject> o = (*held)->OpenObject("job", 4, name);
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(ReadFd(o->fd.get()), data) << name;
  }
  EXPECT_FALSE(nodes["n3"]->replica_tiers->Get("n1", false).ok());
  EXPECT_EQ(n1.replicator->StepsOnPeers("job"), (std::map<uint64_t, std::string>{{4, "n2"}}));
  EXPECT_EQ(n1.replicator->ManifestFromPeers("job", 4)->objects.size(), objects.size());

  // A replacement for n1: an empty tier.
  TierHarness fresh;
  Result<std::string> holder = n1.replicator->RestoreFromPeers(fresh.tier.get(), "job", 4);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  EXPECT_EQ(*holder, "n2");
  for (const auto& [name, data] : objects) {
    Result<OpenedObject> o = fresh.tier->OpenObject("job", 4, name);
    ASSERT_TRUE(o.ok()) << name;
    EXPECT_EQ(ReadFd(o->fd.get()), data) << name;
  }
  // Replicating again is a no-op for the holder.
  EXPECT_TRUE(n1.replicator->Replicate("job", 4).ok());
}

TEST_F(ReplicationTest, ACorruptedStreamLeavesNoReplicaAndTheErrorNamesTheHolder) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 1, large).ok());
  n1.faults->CorruptNthStream(1, 12345);  // n1 serves the objects n2 pulls
  Status s = n1.replicator->Replicate("job", 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("failed on n2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("committed in this node's memory"), std::string::npos) << s.message();
  Result<MemoryTier*> held = nodes["n2"]->replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE((*held)->HasCommitted("job", 1));
  n1.faults->ClearFaults();
  EXPECT_TRUE(n1.replicator->Replicate("job", 1).ok());
  EXPECT_TRUE((*held)->HasCommitted("job", 1));
}

TEST_F(ReplicationTest, ASenderDyingMidObjectLeavesNoReplica) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 2, large).ok());
  n1.faults->TruncateNthStream(1, 1u << 20);
  Status s = n1.replicator->Replicate("job", 2);
  ASSERT_FALSE(s.ok());
  Result<MemoryTier*> held = nodes["n2"]->replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE((*held)->HasCommitted("job", 2));
  EXPECT_TRUE((*held)->ListSteps("job").empty());
}

TEST_F(ReplicationTest, ADeleteReachesEveryHolderAndAnUnreachableOneIsNamed) {
  Start(3, 3);  // n1's holders: n2 and n3
  Node& n1 = *nodes["n1"];
  for (uint64_t step : {1, 2}) {
    ASSERT_TRUE(WriteStep(*n1.h.tier, "job", step, objects).ok());
    ASSERT_TRUE(n1.replicator->Replicate("job", step).ok());
  }
  auto held = [&](const char* holder, uint64_t step) {
    Result<MemoryTier*> t = nodes[holder]->replica_tiers->Get("n1", false);
    return t.ok() && (*t)->HasCommitted("job", step);
  };
  ASSERT_TRUE(held("n2", 1) && held("n3", 1));
  ASSERT_TRUE(n1.h.tier->DeleteStep("job", 1).ok());
  Result<std::vector<std::string>> dropped = n1.replicator->DropReplicas("job", 1);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(*dropped, (std::vector<std::string>{"n2", "n3"}));
  EXPECT_FALSE(held("n2", 1) || held("n3", 1));
  EXPECT_TRUE(held("n2", 2) && held("n3", 2));  // only that step
  TierHarness fresh;  // a replacement node finds it nowhere now
  EXPECT_EQ(n1.replicator->RestoreFromPeers(fresh.tier.get(), "job", 1).status().code(), Code::kNotFound);
  dropped = n1.replicator->DropReplicas("job", 1);  // again: nothing held, still fine
  ASSERT_TRUE(dropped.ok());
  EXPECT_TRUE(dropped->empty());

  n1.faults->FailEveryConnect(Status::Ok());
  dropped = n1.replicator->DropReplicas("job", 2);
  EXPECT_EQ(dropped.status().code(), Code::kUnavailable);
  EXPECT_NE(dropped.status().message().find("n2: "), std::string::npos) << dropped.status().ToString();
  EXPECT_NE(dropped.status().message().find("run the delete again"), std::string::npos);
  EXPECT_TRUE(held("n2", 2));  // the copy stays until the delete is run again
  n1.faults->ClearFaults();
  ASSERT_TRUE(n1.replicator->DropReplicas("job", 2).ok());
  EXPECT_FALSE(held("n2", 2) || held("n3", 2));
}

TEST_F(ReplicationTest, AnUnreachableHolderFailsTheReplicationNamingIt) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 3, objects).ok());
  n1.faults->FailEveryConnect(Status::Ok());
  Status s = n1.replicator->Replicate("job", 3);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("n2: "), std::string::npos) << s.message();
  TierHarness fresh;
  Status r = n1.replicator->RestoreFromPeers(fresh.tier.get(), "job", 3).status();
  EXPECT_EQ(r.code(), Code::kNotFound) << r.ToString();
  EXPECT_NE(r.message().find("no replica holder of node n1 has job step 3 (n2:"), std::string::npos)
      << r.message();
}

TEST_F(ReplicationTest, WithOneReplicaThereAreNoHolders) {
  Start(2, 1);
  Node& n1 = *nodes["n1"];
  EXPECT_TRUE(n1.replicator->holders().empty());
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 1, objects).ok());
  EXPECT_TRUE(n1.replicator->Replicate("job", 1).ok());
  EXPECT_FALSE(nodes["n2"]->replica_tiers->Get("n1", false).ok());
  TierHarness fresh;
  EXPECT_EQ(n1.replicator->RestoreFromPeers(fresh.tier.get(), "job", 1).status().code(), Code::kNotFound);
}

TEST_F(ReplicationTest, BytesDamagedAtRestOnTheSenderFailTheReadWithCorruption) {
  // The sender streams the checksum taken at commit, not a fresh hash of what
  // it holds now: damage since the commit must still fail on the receiver.
  Start(2, 1);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 6, objects).ok());
  {
    Result<UniqueFd> fd = OpenFile(Layout::ObjectPath(n1.h.StepDir("job", 6), "dir/b"), O_RDWR);
    ASSERT_TRUE(fd.ok()) << fd.status().ToString();
    ASSERT_EQ(::pwrite(fd->get(), "X", 1, 500), 1);
  }
  PeerObjectStore store(nodes["n2"]->faults.get(), PeerStoreTarget{"n1", Address("n1"), "n1"});
  std::string got(1000, '\0');
  Status damaged = store.ReadObject("job", 6, "dir/b", 0, got.data(), got.size());
  EXPECT_EQ(damaged.code(), Code::kCorruption) << damaged.ToString();
  std::string a(objects.at("a").size(), '\0');
  EXPECT_TRUE(store.ReadObject("job", 6, "a", 0, a.data(), a.size()).ok());  // the others still read
  EXPECT_EQ(a, objects.at("a"));
}

TEST_F(ReplicationTest, APeerStoreReadsWholeObjectsAndWritesNothing) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 6, objects).ok());
  PeerObjectStore store(nodes["n2"]->faults.get(), PeerStoreTarget{"n1", Address("n1"), "n1"});
  EXPECT_EQ(store.Describe(), "peer n1 at n1.test:7100");
  EXPECT_EQ(*store.ListCommittedSteps("job"), std::vector<uint64_t>{6});
  EXPECT_EQ(*store.ObjectSize("job", 6, "dir/b"), 1000u);
  std::string got(1000, '\0');
  ASSERT_TRUE(store.ReadObject("job", 6, "dir/b", 0, got.data(), got.size()).ok());
  EXPECT_EQ(got, objects.at("dir/b"));
  EXPECT_EQ(store.ReadObject("job", 6, "dir/b", 1, got.data(), 999).code(), Code::kInvalidArgument);
  EXPECT_EQ(store.ReadObject("job", 6, "dir/b", 0, got.data(), 999).code(), Code::kCorruption);
  Status missing = store.ReadObject("job", 7, "a", 0, got.data(), 1);
  EXPECT_EQ(missing.code(), Code::kNotFound) << missing.ToString();
  EXPECT_NE(missing.message().find("peer n1 at n1.test:7100"), std::string::npos) << missing.message();
  // The connection stays usable after those errors.
  ASSERT_TRUE(store.ReadObject("job", 6, "dir/b", 0, got.data(), got.size()).ok());
  EXPECT_EQ(store.ReadManifest("job", 7).status().code(), Code::kNotFound);
  EXPECT_EQ(store.PutObject("job", 6, "x", "x", 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store.DeleteStep("job", 6).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store.ReadObject("../x", 6, "a", 0, got.data(), 1).code(), Code::kInvalidArgument);
  PeerObjectStore other(nodes["n2"]->faults.get(), PeerStoreTarget{"n1", Address("n1"), "n9"});
  Status none = other.ReadManifest("job", 6).status();
  EXPECT_EQ(none.code(), Code::kNotFound);
  EXPECT_NE(none.message().find("holds no replica of node n9"), std::string::npos) << none.message();
}

TEST_F(ReplicationTest, APeerStoreFillsFreshAndRecycledFilesAlike) {
  Start(2);
  ASSERT_TRUE(WriteStep(*nodes["n1"]->h.tier, "job", 6, large).ok());
  PeerObjectStore store(nodes["n2"]->faults.get(), PeerStoreTarget{"n1", Address("n1"), "n1"});
  testing::TempDir dir;
  const std::string& data = large.at("b");
  // A fresh file (no blocks: written with pwrite) and a recycled one (every
  // block allocated, stale bytes: received through a mapping).
  for (bool recycled : {false, true}) {
    const std::string path = dir.Sub(recycled ? "recycled" : "fresh");
    Result<UniqueFd> fd = OpenFile(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(fd.ok());
    if (recycled) {
      const std::string stale(data.size(), 'z');
      ASSERT_TRUE(PwriteAll(fd->get(), stale.data(), stale.size(), 0, path).ok());
    } else {
      ASSERT_EQ(::ftruncate(fd->get(), static_cast<off_t>(data.size())), 0);
    }
    Result<std::string> sum = store.ReadObjectToFileHashed("job", 6, "b", fd->get(), data.size());
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    EXPECT_EQ(*sum, testing::ChecksumOf(data)) << path;
    EXPECT_EQ(ReadFd(fd->get()), data) << path;
  }
}

TEST(PeerMessagesTest, RequestsRoundTripAndMalformedPayloadsAreProtocolErrors) {
  PeerRequest r{"n1", "job", 42, "dir/obj"};
  for (PeerMsg t : {PeerMsg::kGetManifest, PeerMsg::kListSteps, PeerMsg::kGetObject, PeerMsg::kReplicate,
                    PeerMsg::kPersistPart}) {
    Result<PeerRequest> back = DecodePeerRequest(t, EncodePeerRequest(t, r));
    ASSERT_TRUE(back.ok()) << PeerMsgName(static_cast<uint16_t>(t));
    EXPECT_EQ(back->ns, "job");
    EXPECT_EQ(back->origin, t == PeerMsg::kReplicate ? "" : "n1");
    EXPECT_EQ(back->step, t == PeerMsg::kListSteps ? 0u : 42u);
    EXPECT_EQ(back->name, t == PeerMsg::kGetObject ? "dir/obj" : "");
  }
  const std::string get = EncodePeerRequest(PeerMsg::kGetObject, r);
  EXPECT_EQ(DecodePeerRequest(PeerMsg::kGetObject, get.substr(0, get.size() - 1)).status().code(),
            Code::kProtocolError);
  EXPECT_EQ(DecodePeerRequest(PeerMsg::kGetManifest, get).status().code(), Code::kProtocolError);  // trailing
  Status e = DecodePeerError(EncodePeerError(NotFound("gone")));
  EXPECT_EQ(e.code(), Code::kNotFound);
  EXPECT_EQ(e.message(), "gone");
  EXPECT_EQ(DecodePeerError("").code(), Code::kProtocolError);
  EXPECT_EQ(*DecodeSteps(EncodeSteps({1, 5, 9})), (std::vector<uint64_t>{1, 5, 9}));
  EXPECT_EQ(DecodeSteps("\xff\xff\xff\xff").status().code(), Code::kProtocolError);
  EXPECT_EQ(PeerMsgName(999), "unknown");
}

}  // namespace
}  // namespace tierckpt::agent
