// The parity path of the erasure-coded memory tier (issue 23, decision 126),
// in process: MemoryTiers, ParityHolders, PeerServices and ParitySenders of
// several nodes over an in-memory network through a fault-injecting
// transport (peer_test_nodes.h), and one ParityHolder alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/parity_groups.h"
#include "ec/ec_test_parts.h"
#include "ec/reed_solomon.h"
#include "os/files.h"
#include "replication/parity_holder.h"
#include "replication/parity_sender.h"
#include "replication/peer_test_nodes.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::WriteStep;
using namespace std::chrono_literals;

constexpr uint64_t kTierStep = 7;

class ParityTierTest : public ::testing::Test {
 protected:
  // n nodes; every one given the rs:k+m layout over the placement ring.
  void Start(int n, uint32_t k, uint32_t m) {
    members = Members(n);
    for (int i = 1; i <= n; ++i) {
      const std::string id = "n" + std::to_string(i);
      nodes[id] = std::make_unique<Node>(id, net, members);
    }
    Result<cluster::ParityLayout> placed = cluster::PlaceParity(nodes["n1"]->replicator->placement().ring, k, m);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    layout = *placed;
    for (auto& [id, node] : nodes) node->parity_layout = layout;
  }
  // Member i of group 0 commits its part: objects of its own sizes.
  std::map<std::string, std::string> PartOf(size_t i) const {
    return {{"a", Bytes((1u << 20) + 1000 * i, static_cast<char>('a' + i))},
            {"b/c", Bytes(3000 * (i + 1), static_cast<char>('k' + i))},
            {"empty", ""}};
  }
  void CommitGroupParts(const cluster::ParityGroup& g) {
    for (size_t i = 0; i < g.data.size(); ++i) {
      ASSERT_TRUE(WriteStep(*nodes[g.data[i]]->h.tier, "job", kTierStep, PartOf(i)).ok());
    }
  }
  ParitySender SenderOf(const std::string& id) {
    Result<ParitySender> s = ParitySender::Create(nodes[id]->replicator.get(), layout, id);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }
  // The group's parity pieces by an independent ReedSolomon::Encode of the
  // members' pieces (objects back to back in name order, zero-padded).
  std::vector<std::string> ExpectedParity(const cluster::ParityGroup& g) const {
    std::vector<std::string> pieces;
    size_t longest = 0;
    for (size_t i = 0; i < g.data.size(); ++i) {
      std::string piece;
      for (const auto& [name, bytes] : PartOf(i)) piece += bytes;  // std::map: name order
      longest = std::max(longest, piece.size());
      pieces.push_back(std::move(piece));
    }
    pieces.resize(layout.k);  // a short group's missing pieces are zeros
    for (std::string& p : pieces) p.resize(longest, '\0');
    std::vector<std::string> parity(layout.m, std::string(longest, '\0'));
    std::vector<const uint8_t*> data;
    for (const std::string& p : pieces) data.push_back(reinterpret_cast<const uint8_t*>(p.data()));
    std::vector<uint8_t*> out;
    for (std::string& p : parity) out.push_back(reinterpret_cast<uint8_t*>(p.data()));
    Result<ec::ReedSolomon> rs = ec::ReedSolomon::Create(layout.k, layout.m);
    EXPECT_TRUE(rs.ok());
    EXPECT_TRUE(rs->Encode(data, out, longest).ok());
    return parity;
  }
  std::string ReadPiece(const std::string& holder, uint32_t group, uint32_t j) {
    Result<std::string> bytes =
        ReadFileToString(nodes[holder]->parity->PiecePath("job", kTierStep, group, j), size_t{1} << 30);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : "";
  }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  cluster::Membership members;
  std::map<std::string, std::unique_ptr<Node>> nodes;
  cluster::ParityLayout layout;
};

TEST_F(ParityTierTest, EveryHolderSealsThePiecesAnIndependentEncodeGivesAndEveryMemberSeesItRedundant) {
  Start(6, 4, 2);
  const cluster::ParityGroup& g = layout.groups[0];
  ASSERT_EQ(g.data.size(), 4u);
  ASSERT_EQ(g.parity.size(), 2u);
  CommitGroupParts(g);
  // Every member sends at once and waits for the group: each learns it sealed.
  std::vector<ParityReport> reports(g.data.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < g.data.size(); ++i) {
    threads.emplace_back([&, i] { reports[i] = SenderOf(g.data[i]).SendParity("job", kTierStep, 20s); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < reports.size(); ++i) {
    EXPECT_TRUE(reports[i].redundant()) << g.data[i] << ": " << reports[i].Describe();
    ASSERT_EQ(reports[i].holders.size(), 2u);
    EXPECT_EQ(reports[i].holders[1].state.folded, 4u);
  }
  const std::vector<std::string> expected = ExpectedParity(g);
  for (uint32_t j = 0; j < g.parity.size(); ++j) {
    const std::string& holder = g.parity[j];
    EXPECT_TRUE(ReadPiece(holder, g.index, j) == expected[j]) << "piece " << j << " on " << holder;
    Result<ec::ParityRecord> record = nodes[holder]->parity->Record("job", kTierStep, g.index);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    ASSERT_EQ(record->parity.size(), 1u);  // a holder describes the piece it holds
    EXPECT_EQ(record->parity[0].index, j);
    EXPECT_EQ(record->parity[0].checksum,
              ComputeChecksum(expected[j].data(), expected[j].size()).ToString());
    ASSERT_EQ(record->data.size(), 4u);
    for (size_t i = 0; i < g.data.size(); ++i) EXPECT_EQ(record->data[i].member, g.data[i]);
    EXPECT_EQ(nodes[holder]->parity->used_bytes(), expected[j].size());
  }
  // A member retrying after a lost answer gets the state, nothing folds twice.
  ParityReport again = SenderOf(g.data[0]).SendParity("job", kTierStep, 0ms);
  EXPECT_TRUE(again.redundant()) << again.Describe();
  EXPECT_TRUE(ReadPiece(g.parity[0], g.index, 0) == expected[0]);

  // Deletes reach the holders: the pieces and the record go, the budget is back.
  Result<std::vector<std::string>> dropped = SenderOf(g.data[0]).DropParity("job", kTierStep);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->size(), 2u);
  for (const std::string& holder : g.parity) {
    EXPECT_EQ(nodes[holder]->parity->Record("job", kTierStep, g.index).status().code(), Code::kNotFound);
    EXPECT_EQ(nodes[holder]->parity->used_bytes(), 0u);
    EXPECT_FALSE(std::filesystem::exists(nodes[holder]->parity->PiecePath("job", kTierStep, g.index, 0)));
  }
}

TEST_F(ParityTierTest, AHolderThatSawOnlySomePartsPublishesNothing) {
  Start(5, 3, 2);
  const cluster::ParityGroup& g = layout.groups[0];
  CommitGroupParts(g);
  for (size_t i = 0; i + 1 < g.data.size(); ++i) {
    ParityReport r = SenderOf(g.data[i]).SendParity("job", kTierStep, 0ms);
    EXPECT_FALSE(r.redundant()) << r.Describe();
    for (const ParityAck& a : r.holders) {
      ASSERT_TRUE(a.status.ok()) << a.status.ToString();
      EXPECT_EQ(a.state.folded, i + 1);
      EXPECT_EQ(a.state.members, 3u);
      EXPECT_FALSE(a.state.sealed);
    }
  }
  // Waiting does not make a missing part appear: the answer says so in time.
  ParityReport waited = SenderOf(g.data[0]).SendParity("job", kTierStep, 100ms);
  EXPECT_FALSE(waited.redundant());
  EXPECT_NE(waited.Describe().find("2 of 3 folded"), std::string::npos) << waited.Describe();
  Status not_yet = SenderOf(g.data[1]).MakeRedundant("job", kTierStep, 0ms);
  EXPECT_EQ(not_yet.code(), Code::kUnavailable) << not_yet.ToString();
  EXPECT_NE(not_yet.message().find("not redundant"), std::string::npos) << not_yet.ToString();
  for (uint32_t j = 0; j < g.parity.size(); ++j) {
    ParityHolder& holder = *nodes[g.parity[j]]->parity;
    EXPECT_EQ(holder.Record("job", kTierStep, g.index).status().code(), Code::kNotFound);
    EXPECT_FALSE(std::filesystem::exists(holder.PiecePath("job", kTierStep, g.index, j)));
    EXPECT_GT(holder.used_bytes(), 0u);  // the folding piece counts against the budget
  }
  // The last part seals it.
  EXPECT_TRUE(SenderOf(g.data.back()).MakeRedundant("job", kTierStep, 0ms).ok());
  const std::vector<std::string> expected = ExpectedParity(g);
  for (uint32_t j = 0; j < g.parity.size(); ++j) {
    EXPECT_TRUE(ReadPiece(g.parity[j], g.index, j) == expected[j]) << j;
  }
}

TEST_F(ParityTierTest, AShortLastGroupSealsWithItsFewerMembersAsIfTheRestWereZeros) {
  Start(5, 3, 2);  // groups of 3 and 2 members
  ASSERT_EQ(layout.groups.size(), 2u);
  const cluster::ParityGroup& g = layout.groups[1];
  ASSERT_EQ(g.data.size(), 2u);
  CommitGroupParts(g);
  // Both at once, each waiting for the group (one after the other, the
  // first would wait for a part not sent yet).
  std::vector<Status> results(g.data.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < g.data.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = SenderOf(g.data[i]).MakeRedundant("job", kTierStep, 20s); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_TRUE(results[i].ok()) << g.data[i] << ": " << results[i].ToString();
  }
  const std::vector<std::string> expected = ExpectedParity(g);
  for (uint32_t j = 0; j < g.parity.size(); ++j) {
    EXPECT_TRUE(ReadPiece(g.parity[j], g.index, j) == expected[j]) << j;
    Result<ec::ParityRecord> record = nodes[g.parity[j]]->parity->Record("job", kTierStep, g.index);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_EQ(record->data.size(), 2u);
    EXPECT_EQ(record->k, 3u);
  }
}

TEST_F(ParityTierTest, APartCorruptedInTransitIsRefusedAndFoldsCleanlyWhenSentAgain) {
  Start(4, 2, 1);  // rs:2+1, XOR
  const cluster::ParityGroup& g = layout.groups[0];
  CommitGroupParts(g);
  // The first object stream the member's agent sends has a byte flipped.
  nodes[g.data[0]]->faults->CorruptNthStream(1, 4096);
  ParityReport bad = SenderOf(g.data[0]).SendParity("job", kTierStep, 0ms);
  ASSERT_EQ(bad.holders.size(), 1u);
  EXPECT_EQ(bad.holders[0].status.code(), Code::kCorruption) << bad.Describe();
  EXPECT_NE(bad.holders[0].status.message().find(g.data[0]), std::string::npos) << bad.Describe();
  EXPECT_FALSE(bad.redundant());
  nodes[g.data[0]]->faults->ClearFaults();
  // The refused part was taken out: the group folds as if it never came.
  EXPECT_FALSE(SenderOf(g.data[0]).SendParity("job", kTierStep, 0ms).redundant());
  EXPECT_TRUE(SenderOf(g.data[1]).SendParity("job", kTierStep, 0ms).redundant());
  EXPECT_TRUE(ReadPiece(g.parity[0], g.index, 0) == ExpectedParity(g)[0]);
  EXPECT_TRUE(nodes[g.parity[0]]->parity->Record("job", kTierStep, g.index).ok());
}

TEST_F(ParityTierTest, AFoldTheHoldersLayoutDoesNotGiveAndBadFramesAreRefused) {
  Start(4, 2, 1);
  const cluster::ParityGroup& g = layout.groups[0];
  CommitGroupParts(g);
  Replicator& member = *nodes[g.data[0]]->replicator;
  auto ask = [&](const peer::FoldParityRequest& r) {
    return member.Call(g.parity[0], PeerMsg::kFoldParity, r.Encode(), PeerMsg::kParityFolded, 5000ms).status();
  };
  peer::FoldParityRequest r{"job", kTierStep, 2, 1, g.index, 0, 0};
  r.index = 1;  // the other member's piece
  Status s = ask(r);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("layout gives node " + g.data[0] + " data piece 0"), std::string::npos) << s.ToString();
  r.index = 0;
  r.k = 3;  // another code
  EXPECT_EQ(ask(r).code(), Code::kInvalidArgument);
  r.k = 2;
  r.ns = "../x";
  EXPECT_EQ(ask(r).code(), Code::kInvalidArgument);
  // A node that holds no parity of the group.
  r.ns = "job";
  Status not_holder =
      member.Call(g.data[1], PeerMsg::kFoldParity, r.Encode(), PeerMsg::kParityFolded, 5000ms).status();
  EXPECT_EQ(not_holder.code(), Code::kInvalidArgument) << not_holder.ToString();
  // Malformed frames close the connection (logged); the service goes on.
  EXPECT_FALSE(member.Call(g.parity[0], PeerMsg::kFoldParity, "xyz", PeerMsg::kParityFolded, 5000ms).ok());
  r.wait_ms = peer::kMaxParityWaitMs + 1;
  EXPECT_FALSE(ask(r).ok());
  r.wait_ms = 0;
  EXPECT_TRUE(ask(r).ok());
  // Nothing was folded by the refused requests: one of two parts is in.
  EXPECT_EQ(nodes[g.parity[0]]->parity->WaitSealed("job", kTierStep, g.index, std::chrono::steady_clock::now()).folded,
            1u);
}

TEST_F(ParityTierTest, DropParityFromANodeThatIsNoDataMemberOfTheGroupIsRefusedAndDropsNothing) {
  Start(6, 4, 2);  // group 0: four members; group 1: two, its parity held elsewhere or here
  const cluster::ParityGroup& g = layout.groups[0];
  CommitGroupParts(g);
  std::vector<std::thread> threads;
  for (const std::string& id : g.data) {
    threads.emplace_back([&, id] { EXPECT_TRUE(SenderOf(id).MakeRedundant("job", kTierStep, 20s).ok()) << id; });
  }
  for (std::thread& t : threads) t.join();
  const std::string& holder = g.parity[0];
  // Every node that is no data member of group 0 (the holders themselves,
  // the members of group 1) is refused by the holder, naming the rule.
  int refused = 0;
  for (const auto& [id, node] : nodes) {
    if (id == holder || std::find(g.data.begin(), g.data.end(), id) != g.data.end()) continue;
    ++refused;
    const std::string request = EncodePeerRequest(PeerMsg::kDropParity, {"", "job", kTierStep, ""});
    Status s = node->replicator->Call(holder, PeerMsg::kDropParity, request, PeerMsg::kDone, 5000ms).status();
    EXPECT_EQ(s.code(), Code::kPermissionDenied) << id << ": " << s.ToString();
    EXPECT_NE(s.message().find("only a group's data members may drop its parity"), std::string::npos)
        << s.ToString();
  }
  EXPECT_EQ(refused, 1);  // the other holder, a data member of group 1
  EXPECT_TRUE(nodes[holder]->parity->Record("job", kTierStep, g.index).ok());
  EXPECT_TRUE(std::filesystem::exists(nodes[holder]->parity->PiecePath("job", kTierStep, g.index, 0)));
  // A data member may.
  Result<std::vector<std::string>> dropped = SenderOf(g.data[3]).DropParity("job", kTierStep);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ(dropped->size(), 2u);
  EXPECT_EQ(nodes[holder]->parity->Record("job", kTierStep, g.index).status().code(), Code::kNotFound);
}

// ---- one holder, no network ----

ParityFoldTarget FoldTargetOf(uint32_t index, uint32_t members = 2) {
  return ParityFoldTarget{ec::testing::kNs, ec::testing::kStep, 3, 2, 1, members, index, {0}};
}

TEST(ParityHolderTest, AFoldOverTheBudgetIsRefusedBeforeAnyByteIsRead) {
  testing_util::TempDir dir;
  ParityHolder holder({dir.Sub("parity"), /*budget_bytes=*/50000, 4096});
  std::vector<ec::testing::TestPart> parts = ec::testing::MakeParts(2, 11, /*min_bytes=*/60000);
  Result<ParityFoldState> s = holder.Fold(FoldTargetOf(0), parts[0].manifest, parts[0].source);
  ASSERT_EQ(s.status().code(), Code::kResourceExhausted) << s.status().ToString();
  EXPECT_NE(s.status().message().find("--memory-budget"), std::string::npos);
  EXPECT_EQ(holder.used_bytes(), 0u);
}

TEST(ParityHolderTest, ATargetThatDisagreesWithTheGroupsFirstIsRefused) {
  testing_util::TempDir dir;
  ParityHolder holder({dir.Sub("parity"), 64u << 20, 4096});
  std::vector<ec::testing::TestPart> parts = ec::testing::MakeParts(3, 12);
  ASSERT_TRUE(holder.Fold(FoldTargetOf(0), parts[0].manifest, parts[0].source).ok());
  EXPECT_EQ(holder.Fold(FoldTargetOf(1, 3), parts[1].manifest, parts[1].source).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(holder.Fold(FoldTargetOf(0), parts[1].manifest, parts[1].source).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(holder.Fold(FoldTargetOf(2), parts[2].manifest, parts[2].source).status().code(), Code::kInvalidArgument);
  Result<ParityFoldState> done = holder.Fold(FoldTargetOf(1), parts[1].manifest, parts[1].source);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_TRUE(done->sealed);
  EXPECT_TRUE(holder.Record(ec::testing::kNs, ec::testing::kStep, 3).ok());
  EXPECT_EQ(*holder.Drop(ec::testing::kNs, ec::testing::kStep), true);
  EXPECT_EQ(*holder.Drop(ec::testing::kNs, ec::testing::kStep), false);
}

}  // namespace
}  // namespace tierckpt::agent
