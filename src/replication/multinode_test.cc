// Steps spanning nodes, in process (docs/multinode.md): parts committed on
// every member through the peers, reads of another member's part, and the
// durable step assembled from part records, with a replica holder uploading
// the part of a member that is gone. The real agents and torch ranks over TCP
// are tested in python/tests/test_multinode.py.
#include <gtest/gtest.h>

#include <thread>

#include "cluster/placement_json.h"
#include "common/names.h"
#include "replication/commit.h"
#include "replication/peer_test_nodes.h"
#include "store/mem_store.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::ReadFd;
using testing::WriteObject;

class MultiNodeTest : public ::testing::Test {
 protected:
  void Start(int n, bool durable = false) {
    members = Members(n);
    for (int i = 1; i <= n; ++i) {
      const std::string id = "n" + std::to_string(i);
      nodes[id] = std::make_unique<Node>(id, net, members, 2, durable ? &store : nullptr);
    }
  }
  // Each node writes (without committing) the objects given for it.
  void WriteParts(uint64_t step, const std::map<std::string, std::map<std::string, std::string>>& what) {
    for (const auto& [node, objects] : what) {
      for (const auto& [name, data] : objects) {
        ASSERT_TRUE(WriteObject(*nodes[node]->h.tier, "job", step, name, data).ok()) << node << "/" << name;
      }
    }
  }
  // What the coordinator's agent does on CommitStep (handlers.cc): the
  // other parts down the commit tree, its own last; its part and the sums.
  Result<std::pair<Manifest, SubtreeSum>> CommitAcross(const std::string& coordinator, uint64_t step,
                                                       std::vector<std::string> span, bool persist = false) {
    std::sort(span.begin(), span.end());
    wire::CommitStepRequest req{"job", step, 4, persist, {}, std::move(span)};
    Node& c = *nodes[coordinator];
    TC_ASSIGN_OR_RETURN(SubtreeSum sum, c.cluster->CommitOtherParts(req));
    TC_ASSIGN_OR_RETURN(Manifest own, CommitOnNode({c.h.tier.get(), c.cluster.get()}, req));
    AddPart(&sum, own);
    return std::make_pair(std::move(own), sum);
  }

  MemObjectStore store{"durable"};
  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  cluster::Membership members;
  std::map<std::string, std::unique_ptr<Node>> nodes;
  const std::map<std::string, std::map<std::string, std::string>> parts = {
      {"n1", {{".metadata", Bytes(300, 'm')}, {"__0_0.distcp", Bytes(2u << 20, 'a')}}},
      {"n2", {{"__1_0.distcp", Bytes(1u << 20, 'b')}, {"__2_0.distcp", Bytes(5000, 'c')}}}};
};

TEST_F(MultiNodeTest, EveryMemberCommitsItsPartAndTheSumsCountEveryObject) {
  Start(3);
  WriteParts(7, parts);
  auto committed = CommitAcross("n1", 7, {"n2", "n1"});
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  const Manifest& own = committed->first;
  const SubtreeSum& sum = committed->second;
  EXPECT_EQ(own.members, (std::vector<std::string>{"n1", "n2"}));
  ASSERT_EQ(own.objects.size(), 2u);  // the coordinator's part only
  EXPECT_EQ(own.Find(".metadata")->node, "n1");
  EXPECT_EQ(sum.parts, 2u);
  EXPECT_EQ(sum.objects, 4u);
  EXPECT_EQ(sum.bytes, 300u + (2u << 20) + (1u << 20) + 5000u);
  EXPECT_EQ(sum.names, NamesDigest({".metadata", "__0_0.distcp", "__1_0.distcp", "__2_0.distcp"}));
  for (const std::string node : {"n1", "n2"}) {
    Result<Manifest> part = nodes[node]->h.tier->GetManifest("job", 7);
    ASSERT_TRUE(part.ok()) << node;
    EXPECT_EQ(part->objects.size(), 2u) << node;
    if (std::string(node) == "n1") {
      EXPECT_EQ(part->members, own.members) << node;
      EXPECT_EQ(part->placement, own.placement) << node;
    } else {
      // Decision 116: the members by count and digest, no placement.
      EXPECT_TRUE(part->members.empty()) << node;
      EXPECT_TRUE(part->placement.empty()) << node;
      ASSERT_TRUE(part->member_ref.has_value()) << node;
      EXPECT_EQ(part->member_ref->count, 2u);
      EXPECT_EQ(part->member_ref->index, 1u);
      EXPECT_EQ(part->member_ref->coordinator, "n1");
    }
  }
  // The placement is recorded: who holds each node's replicas.
  Result<cluster::Placement> placement = cluster::ParsePlacementJson(own.placement, "the coordinator's part");
  ASSERT_TRUE(placement.ok()) << placement.status().ToString();
  EXPECT_EQ(placement->HoldersOf("n1"), (std::vector<std::string>{"n1", "n2"}));
  // Each part is replicated to its ring successor as any commit: n2 holds n1's, n3 holds n2's.
  EXPECT_TRUE((*nodes["n2"]->replica_tiers->Get("n1", false))->HasCommitted("job", 7));
  EXPECT_TRUE((*nodes["n3"]->replica_tiers->Get("n2", false))->HasCommitted("job", 7));
}

TEST_F(MultiNodeTest, AMemberThatCannotCommitFailsTheStepAndTheCoordinatorCommitsNothing) {
  Start(3);
  WriteParts(7, {{"n1", parts.at("n1")}});  // n2 never wrote its part
  auto whole = CommitAcross("n1", 7, {"n1", "n2"});
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("committing node n2's part"), std::string::npos)
      << whole.status().ToString();
  EXPECT_NE(whole.status().message().find("not committed on this node"), std::string::npos);
  EXPECT_FALSE(nodes["n1"]->h.tier->HasCommitted("job", 7));
  // A member outside the peer list fails at once, naming it.
  WriteParts(8, {{"n1", parts.at("n1")}});
  whole = CommitAcross("n1", 8, {"n1", "n9"});
  ASSERT_FALSE(whole.ok());
  EXPECT_NE(whole.status().message().find("n9"), std::string::npos) << whole.status().ToString();
}

TEST_F(MultiNodeTest, AnotherMembersPartIsFetchedFromItOrFromItsHolder) {
  Start(3);
  WriteParts(7, parts);
  ASSERT_TRUE(CommitAcross("n1", 7, {"n1", "n2"}).ok());
  Node& n3 = *nodes["n3"];  // reads n1's part: n1 serves it
  MemoryTier* copy = *n3.replica_tiers->Get("n1", true);
  ASSERT_TRUE(n3.replicator->PartManifest("n1", "job", 7).ok());
  ASSERT_TRUE(n3.replicator->FetchPart(copy, "n1", "job", 7).ok());
  Result<OpenedObject> o = copy->OpenObject("job", 7, "__0_0.distcp");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(ReadFd(o->fd.get()), parts.at("n1").at("__0_0.distcp"));
  // n1 is gone: n1 reads n2's part from n3, the holder of n2's replica, once n2 is gone too.
  nodes["n2"]->service->Stop();
  MemoryTier* from_holder = *nodes["n1"]->replica_tiers->Get("n2", true);
  Status fetched = nodes["n1"]->replicator->FetchPart(from_holder, "n2", "job", 7);
  ASSERT_TRUE(fetched.ok()) << fetched.ToString();
  o = from_holder->OpenObject("job", 7, "__1_0.distcp");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(ReadFd(o->fd.get()), parts.at("n2").at("__1_0.distcp"));
}

// Decision 116: a non-coordinator's part names the members by count and
// digest; a read of an object in another part takes the list from the
// coordinator's part, asked of the coordinator or, once it is gone, of its
// replica's holder.
TEST_F(MultiNodeTest, AMemberWithoutTheListReadsAnotherPartThroughTheCoordinatorsPart) {
  Start(4);
  std::map<std::string, std::map<std::string, std::string>> three = parts;
  three["n3"] = {{"__3_0.distcp", Bytes(7000, 'd')}};
  WriteParts(8, three);
  ASSERT_TRUE(CommitAcross("n1", 8, {"n1", "n2", "n3"}).ok());
  Result<Manifest> own = nodes["n3"]->h.tier->GetManifest("job", 8);
  ASSERT_TRUE(own.ok());
  ASSERT_TRUE(own->member_ref.has_value());
  // n3 holds no replica of n1 (n2 does): n1 serves its part's manifest and objects.
  Result<PartObject> o = nodes["n3"]->cluster->OpenFromOtherParts(*own, "__1_0.distcp");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->member, "n2");
  EXPECT_EQ(ReadFd(o->object.fd.get()), three.at("n2").at("__1_0.distcp"));
  // The coordinator is gone: its holder n2 serves the list and the part.
  nodes["n1"]->service->Stop();
  o = nodes["n3"]->cluster->OpenFromOtherParts(*own, ".metadata");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->member, "n1");
  EXPECT_EQ(ReadFd(o->object.fd.get()), three.at("n1").at(".metadata"));
  // An object in no part is named as such, with the members the list gave.
  Result<PartObject> none = nodes["n3"]->cluster->OpenFromOtherParts(*own, "absent");
  EXPECT_EQ(none.status().code(), Code::kNotFound);
  EXPECT_NE(none.status().message().find("n1, n2, n3"), std::string::npos) << none.status().ToString();
}

Result<Manifest> WaitDurable(ObjectStore& store, uint64_t step) {
  for (int i = 0; i < 400; ++i) {
    Result<Manifest> m = store.ReadManifest("job", step);
    if (m.ok() || m.status().code() != Code::kNotFound) return m;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return store.ReadManifest("job", step);
}

TEST_F(MultiNodeTest, EveryMemberUploadsItsPartAndOneManifestCommitsTheDurableStep) {
  Start(3, /*durable=*/true);
  WriteParts(7, parts);
  ASSERT_TRUE(CommitAcross("n1", 7, {"n1", "n2"}, /*persist=*/true).ok());
  Result<Manifest> durable = WaitDurable(store, 7);
  ASSERT_TRUE(durable.ok()) << durable.status().ToString();
  EXPECT_EQ(durable->members, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(durable->objects.size(), 4u);
  for (const auto& [node, objects] : parts) {
    for (const auto& [name, data] : objects) {
      std::string back(data.size(), '\0');
      ASSERT_TRUE(store.ReadObject("job", 7, name, 0, back.data(), back.size()).ok()) << name;
      EXPECT_EQ(back, data) << name;
    }
    EXPECT_TRUE(store.ObjectSize("job", 7, PartRecordName(node)).ok()) << node;
  }
  // Both persisters end with the step durable.
  for (const std::string node : {"n1", "n2"}) {
    Result<PersistStatus> st = nodes[node]->h.tier->WaitPersist("job", 7, std::chrono::seconds(10));
    ASSERT_TRUE(st.ok()) << node;
    EXPECT_EQ(st->state, PersistState::kDurable) << node << ": " << st->error.ToString();
  }
}

TEST_F(MultiNodeTest, AHolderUploadsThePartOfAMemberThatIsGoneAndTheStepBecomesDurable) {
  Start(3, /*durable=*/true);
  WriteParts(7, parts);
  // n2 commits its part (and n3 holds its replica) but dies before it persists anything.
  nodes["n2"]->persister->Stop(std::chrono::milliseconds(0));
  ASSERT_TRUE(CommitAcross("n1", 7, {"n1", "n2"}, /*persist=*/true).ok());
  nodes["n2"]->service->Stop();
  Result<Manifest> durable = WaitDurable(store, 7);
  ASSERT_TRUE(durable.ok()) << durable.status().ToString();
  EXPECT_EQ(durable->objects.size(), 4u);
  std::string back(parts.at("n2").at("__1_0.distcp").size(), '\0');
  ASSERT_TRUE(store.ReadObject("job", 7, "__1_0.distcp", 0, back.data(), back.size()).ok());
  EXPECT_EQ(back, parts.at("n2").at("__1_0.distcp"));
  Result<PersistStatus> st = nodes["n1"]->h.tier->WaitPersist("job", 7, std::chrono::seconds(10));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, PersistState::kDurable) << st->error.ToString();
}

// Decision 116: the merger of step 7 (members[7 % 2] = n2) names the members
// by count and digest only, and the coordinator n1 dies before persisting:
// its holder uploads n1's record from its replica, with the list the merger
// takes, and the durable manifest lists both members and the placement.
TEST_F(MultiNodeTest, AMergerWithoutTheListTakesItFromTheCoordinatorsRecordUploadedByItsHolder) {
  Start(3, /*durable=*/true);
  WriteParts(7, parts);
  nodes["n1"]->persister->Stop(std::chrono::milliseconds(0));
  ASSERT_TRUE(CommitAcross("n1", 7, {"n1", "n2"}, /*persist=*/true).ok());
  nodes["n1"]->service->Stop();
  Result<Manifest> durable = WaitDurable(store, 7);
  ASSERT_TRUE(durable.ok()) << durable.status().ToString();
  EXPECT_EQ(durable->members, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(durable->objects.size(), 4u);
  EXPECT_FALSE(durable->placement.empty());
  EXPECT_EQ(durable->node, "n2");
  Result<PersistStatus> st = nodes["n2"]->h.tier->WaitPersist("job", 7, std::chrono::seconds(10));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->state, PersistState::kDurable) << st->error.ToString();
}

TEST(MergePartsTest, RejectsMissingForeignAndDuplicateParts) {
  auto part = [](std::string node, std::vector<std::string> names) {
    Manifest m;
    m.ns = "job";
    m.step = 3;
    m.node = node;
    m.members = {"n1", "n2"};
    for (auto& n : names) m.objects.push_back({n, 1, ComputeChecksum("x", 1).ToString(), node});
    return m;
  };
  EXPECT_TRUE(MergeParts({part("n1", {"a"}), part("n2", {"b"})}, "n1").ok());
  Result<Manifest> r = MergeParts({part("n1", {"a"})}, "n1");
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("n2"), std::string::npos);
  r = MergeParts({part("n1", {"a"}), part("n2", {"a"})}, "n1");
  EXPECT_EQ(r.status().code(), Code::kCorruption);
  EXPECT_NE(r.status().message().find("both node n1 and node n2"), std::string::npos) << r.status().ToString();
  Manifest other = part("n2", {"b"});
  other.members = {"n1", "n2", "n3"};
  EXPECT_EQ(MergeParts({part("n1", {"a"}), other}, "n1").status().code(), Code::kCorruption);
  EXPECT_EQ(MergeParts({part("n1", {"a"}), part("n1", {"b"})}, "n1").status().code(), Code::kCorruption);
  EXPECT_TRUE(ContainsPart(*MergeParts({part("n1", {"a"}), part("n2", {"b"})}, "n1"), part("n2", {"b"})));
}

// Decision 112: the durable merger adds the part records one at a time and
// keeps one member list, whatever the number of parts added.
TEST(MergePartsTest, APartMergerKeepsOneMemberListAndChecksEachPartAsItIsAdded) {
  const int n = 32;
  std::vector<std::string> members;
  for (int i = 0; i < n; ++i) members.push_back("n" + std::to_string(100 + i));
  auto part = [&](int i) {
    Manifest m;
    m.ns = "job";
    m.step = 3;
    m.node = members[i];
    m.members = members;
    m.objects.push_back({"o" + std::to_string(i), 1, ComputeChecksum("x", 1).ToString(), m.node});
    return m;
  };
  PartMerger merger(part(0));
  for (int i = 0; i < n; ++i) {
    ASSERT_TRUE(merger.Add(part(i)).ok());
    EXPECT_TRUE(merger.Has(members[i]));
    EXPECT_EQ(merger.HeldMemberIds(), static_cast<size_t>(n + i + 1));  // not (i + 1) lists of n
    if (i + 1 < n) {
      EXPECT_EQ(merger.Missing().front(), members[i + 1]);
    }
  }
  Result<Manifest> whole = merger.Finish("n100");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->objects.size(), static_cast<size_t>(n));
  EXPECT_EQ(whole->members, members);

  PartMerger strict(part(0));
  Manifest foreign = part(1);
  foreign.members.pop_back();
  Status st = strict.Add(foreign);
  EXPECT_EQ(st.code(), Code::kCorruption);
  EXPECT_NE(st.message().find("node n101"), std::string::npos) << st.ToString();
  EXPECT_FALSE(strict.Has("n101"));  // nothing of a refused part is kept
  Manifest stranger = part(1);
  stranger.node = "n9";
  EXPECT_EQ(strict.Add(stranger).code(), Code::kFailedPrecondition);
  EXPECT_EQ(strict.Finish("n100").status().code(), Code::kFailedPrecondition);
}

}  // namespace
}  // namespace tierckpt::agent
