// A lost member's part rebuilt from its rs:K+M group's survivors (issue 23
// item 3, decision 139), in process: six nodes over an in-memory network
// (peer_test_nodes.h), the group's parts folded and sealed on its holders,
// then a member's part gone from its tier (its memory lost) and other nodes
// stopped, and RestoreFromParity run as the replacement's read path runs it.
#include "replication/parity_restore.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cluster/parity_groups.h"
#include "cluster/placement_json.h"
#include "os/files.h"
#include "replication/parity_sender.h"
#include "replication/peer_test_nodes.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::ReadFd;
using testing::WriteStep;
using namespace std::chrono_literals;

constexpr uint64_t kRestoreStep = 11;
constexpr uint64_t kSpanStep = 12;  // a step spanning the group's four data members

class ParityRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<cluster::ParityLayout> placed = testing::StartParityNodes(nodes, net, 6, 4, 2, /*replicas=*/1);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    layout = *placed;
    g = layout.groups[0];
    ASSERT_EQ(g.data.size(), 4u);
    for (size_t i = 0; i < g.data.size(); ++i) {
      ASSERT_TRUE(WriteStep(*nodes[g.data[i]]->h.tier, "job", kRestoreStep, PartOf(i)).ok());
    }
    std::vector<std::thread> threads;
    for (const std::string& m : g.data) {
      threads.emplace_back([&, m] { EXPECT_TRUE(Sender(m).SendParity("job", kRestoreStep, 20s).redundant()) << m; });
    }
    for (std::thread& t : threads) t.join();
  }
  // Member i's part: objects of its own sizes and bytes, an empty one too.
  static std::map<std::string, std::string> PartOf(size_t i) {
    return {{"a", Bytes((1u << 20) + 4099 * i, static_cast<char>('a' + i))},
            {"b/c", Bytes(70000 * (i + 1), static_cast<char>('q' + i))},
            {"empty", ""}};
  }
  ParitySender Sender(const std::string& id) {
    Result<ParitySender> s = ParitySender::Create(nodes[id]->replicator.get(), layout, id);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }
  // Member i loses its memory: its part of the step is gone from its tier.
  void Lose(size_t i) {
    Result<bool> d = nodes[g.data[i]]->h.tier->DeleteStep("job", kRestoreStep);
    ASSERT_TRUE(d.ok() && *d) << (d.ok() ? "held none" : d.status().ToString());
  }
  // Node id is gone from the network (its service answers no one).
  void Kill(const std::string& id) { nodes[id]->service->Stop(); }
  Result<std::string> Restore(size_t i, uint64_t step = kRestoreStep) {
    Node& n = *nodes[g.data[i]];
    return RestoreFromParity(Sender(n.id), n.replicator.get(), n.h.tier.get(), "job", step);
  }
  // kSpanStep committed across the group's data members as a commit tree
  // commits it (g.data[0] the coordinator: its part lists the members and
  // the placement, the others name them by member_ref), its parity sealed;
  // returns each member's part manifest as committed.
  std::vector<Manifest> CommitSpanningStep() {
    StepSpan span;
    span.members = g.data;
    std::sort(span.members.begin(), span.members.end());
    span.coordinator = g.data[0];
    // (Replicas 1 here: the cluster records none, so the ring's is written.)
    span.placement = cluster::PlacementToJsonText(nodes[g.data[0]]->replicator->placement());
    std::vector<Manifest> committed;
    for (size_t i = 0; i < g.data.size(); ++i) {
      MemoryTier& tier = *nodes[g.data[i]]->h.tier;
      for (const auto& [name, bytes] : PartOf(i)) EXPECT_TRUE(testing::WriteObject(tier, "job", kSpanStep, name, bytes).ok());
      Result<Manifest> m = tier.CommitStep("job", kSpanStep, 4, false, {}, span);
      EXPECT_TRUE(m.ok()) << m.status().ToString();
      Result<Manifest> stored = tier.GetManifest("job", kSpanStep);
      EXPECT_TRUE(stored.ok() && stored->SpansNodes()) << g.data[i];
      committed.push_back(stored.ok() ? *stored : Manifest{});
    }
    std::vector<std::thread> threads;
    for (const std::string& m : g.data) {
      threads.emplace_back([&, m] { EXPECT_TRUE(Sender(m).SendParity("job", kSpanStep, 20s).redundant()) << m; });
    }
    for (std::thread& t : threads) t.join();
    return committed;
  }
  // Each holder's record of the spanning step rewritten as one written before
  // decision 141: no part manifest fields.
  void StripPartHeaders() {
    for (uint32_t j = 0; j < g.parity.size(); ++j) {
      const std::string piece = nodes[g.parity[j]]->parity->PiecePath("job", kSpanStep, g.index, j);
      const std::string path = JoinPath(DirName(piece), "record.json");
      Result<std::string> text = ReadFileToString(path, 1u << 20);
      ASSERT_TRUE(text.ok()) << text.status().ToString();
      nlohmann::json record = nlohmann::json::parse(*text);
      for (nlohmann::json& d : record["data"]) d.erase("part");
      ASSERT_TRUE(WriteFileAtomic(path, record.dump(2) + "\n", false).ok());
    }
  }
  // Member i's tier holds exactly its part again, byte for byte.
  void ExpectRestored(size_t i, uint64_t step = kRestoreStep) {
    MemoryTier& tier = *nodes[g.data[i]]->h.tier;
    Result<Manifest> m = tier.GetManifest("job", step);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->node, g.data[i]);
    const std::map<std::string, std::string> want = PartOf(i);
    ASSERT_EQ(m->objects.size(), want.size());
    for (const auto& [name, bytes] : want) {
      Result<OpenedObject> o = tier.OpenObject("job", step, name);
      ASSERT_TRUE(o.ok()) << name << ": " << o.status().ToString();
      EXPECT_TRUE(ReadFd(o->fd.get()) == bytes) << name;
    }
  }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  std::map<std::string, std::unique_ptr<Node>> nodes;
  cluster::ParityLayout layout;
  cluster::ParityGroup g;
};

TEST_F(ParityRestoreTest, TwoLostMembersOfAFourPlusTwoGroupAreEachRebuiltByteForByteFromTheSurvivors) {
  Lose(1);
  Lose(2);
  Kill(g.data[2]);  // gone from the network too while the first is rebuilt
  Result<std::string> first = Restore(1);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, "parity group 0: data " + g.data[0] + ", " + g.data[3] + "; parity " + g.parity[0] +
                        ", " + g.parity[1]);
  ExpectRestored(1);
  // The second replacement rebuilds from the first's rebuilt part: a survivor like any other.
  Result<std::string> second = Restore(2);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  ExpectRestored(2);
}

TEST_F(ParityRestoreTest, MoreThanMPiecesGoneIsRefusedNamingTheGroupTheCountAndM) {
  Lose(0);
  Kill(g.data[1]);
  Kill(g.parity[0]);
  Result<std::string> r = Restore(0);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  const std::string& msg = r.status().message();
  EXPECT_NE(msg.find("parity group 0 of job step 11: 3 of its 6 pieces are gone (M = 2)"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(g.data[1] + " (data 1)"), std::string::npos) << msg;
  EXPECT_NE(msg.find(g.parity[0] + " (parity 0)"), std::string::npos) << msg;
  EXPECT_FALSE(nodes[g.data[0]]->h.tier->GetManifest("job", kRestoreStep).ok());  // nothing partial published
}

TEST_F(ParityRestoreTest, ACorruptParityPieceIsSetAsideAndAnotherSurvivorUsed) {
  // Three data survivors and parity piece 0 rebuild it first; piece 0 is
  // corrupt, so the rebuilt part fails its checksums, the survivors are
  // checked, piece 0 is set aside and piece 1 used instead.
  Lose(1);
  const std::string path = nodes[g.parity[0]]->parity->PiecePath("job", kRestoreStep, g.index, 0);
  Result<std::string> piece = ReadFileToString(path, 1u << 30);
  ASSERT_TRUE(piece.ok());
  (*piece)[12345] = static_cast<char>((*piece)[12345] ^ 1);
  ASSERT_TRUE(WriteFileAtomic(path, *piece, false).ok());
  Result<std::string> r = Restore(1);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->find(g.parity[0]), std::string::npos) << *r;  // the corrupt piece was not what rebuilt it
  ExpectRestored(1);
}

TEST_F(ParityRestoreTest, ASurvivorHoldingAnotherSaveOfTheStepIsNotUsed) {
  Lose(1);
  Lose(3);  // member 3 saves the step again with other bytes
  ASSERT_TRUE(WriteStep(*nodes[g.data[3]]->h.tier, "job", kRestoreStep, {{"a", "other"}}).ok());
  Kill(g.parity[1]);
  Result<std::string> r = Restore(1);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find(g.data[3] +
                                      " (data 3): its part is not the one the parity was computed over"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(ParityRestoreTest, TheManifestFromTheRecordIsThePartsObjects) {
  Result<ec::ParityRecord> record =
      GroupRecord(Sender(g.data[2]), nodes[g.data[2]]->replicator.get(), "job", kRestoreStep);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  const Manifest m = PartManifestFromRecord(*record, 2, g.data[2]);
  Result<Manifest> real = nodes[g.data[2]]->h.tier->GetManifest("job", kRestoreStep);
  ASSERT_TRUE(real.ok());
  ASSERT_EQ(m.objects.size(), real->objects.size());
  for (size_t i = 0; i < m.objects.size(); ++i) {
    EXPECT_EQ(m.objects[i].name, real->objects[i].name);
    EXPECT_EQ(m.objects[i].size, real->objects[i].size);
    EXPECT_EQ(m.objects[i].checksum, real->objects[i].checksum);
  }
  EXPECT_TRUE(m.Validate().ok());
  EXPECT_EQ(m.ToJson(), real->ToJson());  // world size and creation time too (decision 141)
  Kill(g.parity[0]);
  Kill(g.parity[1]);
  EXPECT_EQ(GroupRecord(Sender(g.data[2]), nodes[g.data[2]]->replicator.get(), "job", kRestoreStep).status().code(),
            Code::kNotFound);
}

// Decision 141: a part of a step spanning nodes is rebuilt and published
// with the manifest its member committed: the coordinator's part with the
// member list and placement, another's with its member_ref.
TEST_F(ParityRestoreTest, LostPartsOfAStepSpanningNodesAreRebuiltWithTheirMembership) {
  const std::vector<Manifest> committed = CommitSpanningStep();
  ASSERT_TRUE(committed[1].member_ref.has_value());
  ASSERT_EQ(committed[0].members.size(), 4u);
  ASSERT_FALSE(committed[0].placement.empty());
  ASSERT_TRUE(nodes[g.data[1]]->h.tier->DeleteStep("job", kSpanStep).ok());
  ASSERT_TRUE(nodes[g.data[0]]->h.tier->DeleteStep("job", kSpanStep).ok());
  for (size_t i : {size_t{1}, size_t{0}}) {  // the second rebuilt from the first's rebuilt part
    Result<std::string> r = Restore(i, kSpanStep);
    ASSERT_TRUE(r.ok()) << g.data[i] << ": " << r.status().ToString();
    ExpectRestored(i, kSpanStep);
    Result<Manifest> back = nodes[g.data[i]]->h.tier->GetManifest("job", kSpanStep);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(back->ToJson(), committed[i].ToJson()) << g.data[i];
    EXPECT_EQ(back->member_ref, committed[i].member_ref);
    EXPECT_EQ(back->members, committed[i].members);
    EXPECT_EQ(back->world_size, 4u);
  }
}

// A record written before decision 141 has no part manifest fields: its
// spanning part is still refused, saying why, and the durable tier serves it.
TEST_F(ParityRestoreTest, ARecordWithoutThePartsMembershipStillRefusesASpanningPart) {
  CommitSpanningStep();
  StripPartHeaders();
  Lose(1);
  ASSERT_TRUE(nodes[g.data[1]]->h.tier->DeleteStep("job", kSpanStep).ok());
  Result<std::string> r = Restore(1, kSpanStep);
  ASSERT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("parity group 0 of job step 12: the step spans nodes, and a part of such "
                                      "a step is not rebuilt from parity yet (its record does not carry the "
                                      "part's members)"),
            std::string::npos)
      << r.status().ToString();
  EXPECT_FALSE(nodes[g.data[1]]->h.tier->GetManifest("job", kSpanStep).ok());  // nothing published
  // A step on one node from such a record is rebuilt as before (world size unknown).
  Result<std::string> one = Restore(1);
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ExpectRestored(1);
}

}  // namespace
}  // namespace tierckpt::agent
