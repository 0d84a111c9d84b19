// The commit tree of a step spanning nodes (issue 21 item 2, decision 102):
// its shape (commit_tree.h), and N in-process nodes committing a step down
// it, each node's transport counting the requests it sends: at N = 2 … 64 no
// node sends more than the fan-out, the whole commit costs N−1 requests and
// N−1 answers of a fixed size, and the depth is ceil(log_k(N·(k−1)+1)) − 1.
// Failures: a member deep in the tree that cannot commit, or one that does
// not answer, fails the commit naming it, and the coordinator commits nothing.
// What each node sends is bounded too (decision 108): a request names the
// members as runs of ring places, so every request and answer has the same
// size at every N, and a node's bytes sent are O(fan-out).
#include "replication/commit_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/names.h"
#include "replication/commit.h"
#include "replication/member_runs.h"
#include "replication/peer_test_nodes.h"

namespace tierckpt::agent {
namespace {

using testing::Address;
using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::WriteObject;

std::vector<std::string> Ids(int n) {
  std::vector<std::string> ids;
  for (int i = 1; i <= n; ++i) ids.push_back("n" + std::to_string(i));
  std::sort(ids.begin(), ids.end());
  return ids;
}

// ceil(log_k(N·(k−1)+1)) − 1 by counting: the levels a k-ary tree of N nodes needs.
size_t ExpectedDepth(size_t n, size_t k) {
  size_t depth = 0;
  size_t level = 1;
  size_t covered = 1;
  while (covered < n) {
    level *= k;
    covered += level;
    ++depth;
  }
  return depth;
}

TEST(CommitTreeTest, EveryMemberButTheRootHasOneParentAndNoNodeMoreThanKChildren) {
  for (uint32_t k : {1u, 2u, 4u, 16u}) {
    for (int n : {1, 2, 3, 5, 17, 18, 64, 100}) {
      const std::vector<std::string> ids = Ids(n);
      const std::string root = ids[ids.size() / 2];  // not the first: the rotation matters
      Result<CommitTree> tree = CommitTree::Create(ids, root, k);
      ASSERT_TRUE(tree.ok()) << tree.status().ToString();
      std::map<std::string, int> asked;  // how often each member is someone's child
      size_t deepest = 0;
      for (const std::string& id : ids) {
        const std::vector<std::string> children = tree->ChildrenOf(id);
        EXPECT_LE(children.size(), k) << id;
        for (const std::string& c : children) {
          ++asked[c];
          EXPECT_EQ(tree->ParentOf(c), id) << c;
          EXPECT_EQ(*tree->LevelOf(c), *tree->LevelOf(id) + 1) << c;
        }
        deepest = std::max(deepest, *tree->LevelOf(id));
      }
      EXPECT_EQ(asked.count(root), 0u);
      EXPECT_FALSE(tree->ParentOf(root).has_value());
      EXPECT_EQ(asked.size(), ids.size() - 1) << "k=" << k << " N=" << n;  // everyone reached once
      for (const auto& [id, times] : asked) EXPECT_EQ(times, 1) << id;
      EXPECT_EQ(tree->Depth(), deepest);
      EXPECT_EQ(tree->Depth(), ExpectedDepth(n, k)) << "k=" << k << " N=" << n;
    }
  }
}

TEST(CommitTreeTest, WithTheDefaultFanOutUpTo17MembersTheRootAsksEveryoneItself) {
  const std::vector<std::string> ids = Ids(17);
  Result<CommitTree> tree = CommitTree::Create(ids, "n5", kDefaultCommitFanOut);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->ChildrenOf("n5").size(), 16u);
  EXPECT_EQ(tree->Depth(), 1u);
  tree = CommitTree::Create(Ids(18), "n5", kDefaultCommitFanOut);
  ASSERT_TRUE(tree.ok());
  EXPECT_EQ(tree->Depth(), 2u);
}

TEST(CommitTreeTest, BadTreesAreRefusedNamingWhy) {
  EXPECT_NE(CommitTree::Create({"a", "b"}, "c", 4).status().message().find("node c, is not among"),
            std::string::npos);
  EXPECT_EQ(CommitTree::Create({"b", "a"}, "a", 4).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(CommitTree::Create({"a", "a"}, "a", 4).status().code(), Code::kInvalidArgument);
  EXPECT_NE(CommitTree::Create({"a", "b"}, "a", 0).status().message().find("fan-out"), std::string::npos);
  Result<CommitTree> tree = CommitTree::Create({"a", "b"}, "a", 4);
  ASSERT_TRUE(tree.ok());
  EXPECT_TRUE(tree->ChildrenOf("z").empty());
  EXPECT_FALSE(tree->ParentOf("z").has_value());
}

TEST(CommitTreeTest, TheNamesDigestIsASumSoTheTreesShapeDoesNotChangeIt) {
  EXPECT_EQ(NamesDigest({"a", "b", "c"}), NamesDigest({"c", "a", "b"}));
  EXPECT_NE(NamesDigest({"a", "b"}), NamesDigest({"a", "c"}));
  EXPECT_NE(NamesDigest({"a", "a"}), NamesDigest({}));  // a sum, not a xor: duplicates do not cancel
  EXPECT_EQ(FormatSpanNamesDigest(0x1f), "sum64:000000000000001f");
  EXPECT_EQ(SpanNamesDigest({"x", "y"}), FormatSpanNamesDigest(NamesDigest({"y", "x"})));
}

// ---- N nodes committing down the tree ----

struct TreeCase {
  int n;
  uint32_t fan_out;
};

// The largest frame a commit may send whatever N: a CommitRingSubtree
// request of one member run is 74 B with namespace "job", an answer 37 B.
// (A request listing the members was 54 B at N = 2, 145 B at 16, 481 B at 64.)
constexpr uint64_t kMaxCommitFrameBytes = 96;

class CommitTreeScaleTest : public ::testing::TestWithParam<TreeCase> {};

TEST_P(CommitTreeScaleTest, EachNodeSendsAtMostKRequestsAndTheDepthIsLogarithmic) {
  const int n = GetParam().n;
  const uint32_t k = GetParam().fan_out;
  const uint64_t step = 3;
  auto net = peer::InMemoryNetwork::Create(1u << 20);
  const cluster::Membership members = Members(n);
  std::map<std::string, std::unique_ptr<Node>> nodes;
  std::vector<std::string> names;
  for (const std::string& id : Ids(n)) {
    // R = 1: no replication, so every connection a node makes is a commit request.
    nodes[id] = std::make_unique<Node>(id, net, members, 1);
    for (int o = 0; o < 2; ++o) {
      const std::string name = "__" + id + "_" + std::to_string(o) + ".distcp";
      ASSERT_TRUE(WriteObject(*nodes[id]->h.tier, "job", step, name, Bytes(1000 + o, 'a')).ok());
      names.push_back(name);
    }
  }
  const std::vector<std::string> ids = Ids(n);
  const std::string root = "n1";
  wire::CommitStepRequest req{"job", step, static_cast<uint32_t>(n), false, {}, ids};
  Result<CommitTree> tree = CommitTree::Create(ids, root, k);
  ASSERT_TRUE(tree.ok());
  std::map<std::string, uint64_t> sends_before;
  std::map<std::string, uint64_t> bytes_before;
  for (const auto& [id, node] : nodes) {
    sends_before[id] = node->faults->SendCount();
    bytes_before[id] = node->faults->SendBytes();
  }

  // What the coordinator's agent does on CommitStep (handlers.cc).
  Node& coordinator = *nodes[root];
  Result<SubtreeSum> sum = coordinator.replicator->CommitChildren(req, *tree);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  Result<Manifest> own = CommitOnNode({coordinator.h.tier.get(), coordinator.cluster.get()}, req);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  AddPart(&*sum, *own);

  EXPECT_EQ(sum->parts, static_cast<uint32_t>(n));
  EXPECT_EQ(sum->objects, 2u * n);
  EXPECT_EQ(sum->bytes, 2001u * n);
  EXPECT_EQ(sum->names, NamesDigest(names));
  EXPECT_EQ(sum->depth, tree->Depth());
  EXPECT_EQ(tree->Depth(), ExpectedDepth(n, k));
  // O(log N): at most ceil(log_k N) + 1 levels for k >= 2.
  if (k >= 2) {
    EXPECT_LE(sum->depth, std::ceil(std::log(n) / std::log(k)) + 1) << "N=" << n;
  }

  uint64_t requests = 0;
  uint64_t most = 0;
  uint64_t largest_frame = 0;
  for (const auto& [id, node] : nodes) {
    EXPECT_TRUE(node->h.tier->HasCommitted("job", step)) << id;
    const uint64_t sent = node->faults->ConnectCount();  // one connection per request
    const uint64_t frames = node->faults->SendCount() - sends_before[id];  // requests and answers
    EXPECT_LE(sent, k) << id << " sent more requests than the fan-out";
    EXPECT_EQ(sent, tree->ChildrenOf(id).size()) << id;
    EXPECT_EQ(frames, sent + (id == root ? 0 : 1)) << id << ": its requests and one answer";
    requests += sent;
    most = std::max(most, sent);
    // Bytes: a request names the members as ring runs (one run here), not
    // as a list of N ids, so no frame grows with N: 74 B a request, 37 B
    // an answer; a node's bytes are O(its children).
    const uint64_t largest = node->faults->LargestSend();
    EXPECT_LE(largest, kMaxCommitFrameBytes) << id << " sent a frame that grows with N=" << n;
    EXPECT_LE(node->faults->SendBytes() - bytes_before[id], (sent + 1) * kMaxCommitFrameBytes) << id;
    largest_frame = std::max(largest_frame, largest);
  }
  EXPECT_EQ(requests, static_cast<uint64_t>(n - 1)) << "every member but the root asked exactly once";
  // The answer up the tree has the same size whatever the subtree's.
  EXPECT_EQ(sum->Encode().size(), SubtreeSum{}.Encode().size());
  // What stays O(N) per node (decision 109): each stored part manifest
  // names every member.
  std::printf(
      "[commit-tree] N=%d k=%u requests=%llu busiest=%llu depth=%u answer=%zuB largest_frame=%lluB "
      "list_request=%zuB part_manifest=%zuB\n",
      n, k, static_cast<unsigned long long>(requests), static_cast<unsigned long long>(most), sum->depth,
      sum->Encode().size(), static_cast<unsigned long long>(largest_frame),
      peer::CommitSubtreeRequest{k, root, req.Encode()}.Encode().size(), own->ToJson().size());
}

INSTANTIATE_TEST_SUITE_P(Nodes, CommitTreeScaleTest,
                         ::testing::Values(TreeCase{2, 4}, TreeCase{4, 4}, TreeCase{8, 4}, TreeCase{16, 4},
                                           TreeCase{32, 4}, TreeCase{64, 4}, TreeCase{64, 16},
                                           TreeCase{33, 2}),
                         [](const ::testing::TestParamInfo<TreeCase>& p) {
                           return "N" + std::to_string(p.param.n) + "_k" + std::to_string(p.param.fan_out);
                         });

// Decision 108, the figures of docs/scale.md: at N = 2 … 64 (k = 4) every
// request of a commit has the same size, so the whole commit sends
// (N − 1) × (request + answer) bytes and no node's share grows with N.
// Before, each request listed every member: 54 B at N = 2, 481 B at 64.
TEST(CommitTreeBytesTest, EveryRequestHasTheSameSizeAtEveryN) {
  const uint32_t k = 4;
  uint64_t request_at_2 = 0;
  for (int n : {2, 4, 8, 16, 32, 64}) {
    auto net = peer::InMemoryNetwork::Create(1u << 20);
    const cluster::Membership members = Members(n);
    std::map<std::string, std::unique_ptr<Node>> nodes;
    for (const std::string& id : Ids(n)) {
      nodes[id] = std::make_unique<Node>(id, net, members, 1);
      ASSERT_TRUE(WriteObject(*nodes[id]->h.tier, "job", 4, "__" + id + ".distcp", "x").ok());
    }
    Result<CommitTree> tree = CommitTree::Create(Ids(n), "n1", k);
    ASSERT_TRUE(tree.ok());
    const wire::CommitStepRequest req{"job", 4, static_cast<uint32_t>(n), false, {}, Ids(n)};
    Result<SubtreeSum> sum = nodes["n1"]->replicator->CommitChildren(req, *tree);
    ASSERT_TRUE(sum.ok()) << sum.status().ToString();
    ASSERT_EQ(sum->parts, static_cast<uint32_t>(n - 1));
    uint64_t bytes = 0;
    uint64_t largest = 0;
    uint64_t busiest = 0;
    for (const auto& [id, node] : nodes) {
      bytes += node->faults->SendBytes();
      largest = std::max(largest, node->faults->LargestSend());
      busiest = std::max(busiest, node->faults->SendBytes());
    }
    const uint64_t answer = SubtreeSum{}.Encode().size();
    if (n == 2) request_at_2 = largest;
    EXPECT_EQ(largest, request_at_2) << "the largest request grew with N=" << n;
    EXPECT_EQ(bytes, static_cast<uint64_t>(n - 1) * (request_at_2 + answer)) << "N=" << n;
    EXPECT_LE(busiest, k * request_at_2 + answer) << "a node sent more than its fan-out's share at N=" << n;
    // Beside it, for docs/scale.md: the request that listed the members
    // (decision 102) and a stored part manifest, which still names every
    // member (decision 109).
    Result<Manifest> part = nodes["n2"]->h.tier->GetManifest("job", 4);
    ASSERT_TRUE(part.ok()) << part.status().ToString();
    const size_t list_request = peer::CommitSubtreeRequest{k, "n1", req.Encode()}.Encode().size();
    std::printf(
        "[commit-tree-bytes] N=%d k=%u request=%lluB list_request=%zuB answer=%lluB total=%lluB "
        "busiest=%lluB part_manifest=%zuB\n",
        n, k, static_cast<unsigned long long>(largest), list_request, static_cast<unsigned long long>(answer),
        static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(busiest),
        part->ToJson().size());
  }
}

class CommitTreeFailureTest : public ::testing::Test {
 protected:
  void Start(int n) {
    members = Members(n);
    for (const std::string& id : Ids(n)) {
      nodes[id] = std::make_unique<Node>(id, net, members, 1);
      if (id != "n7") {
        ASSERT_TRUE(WriteObject(*nodes[id]->h.tier, "job", 5, "__" + id + ".distcp", "x").ok());
      }
    }
  }
  Result<SubtreeSum> Commit(uint32_t k) {
    const std::vector<std::string> ids = Ids(static_cast<int>(nodes.size()));
    TC_ASSIGN_OR_RETURN(CommitTree tree, CommitTree::Create(ids, "n1", k));
    const wire::CommitStepRequest req{"job", 5, 8, false, {}, ids};
    return nodes["n1"]->replicator->CommitChildren(req, tree);
  }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(1u << 20);
  cluster::Membership members;
  std::map<std::string, std::unique_ptr<Node>> nodes;
};

TEST_F(CommitTreeFailureTest, AMemberDeepInTheTreeThatCannotCommitFailsTheStepNamingIt) {
  Start(8);  // sorted n1 … n8; with k = 2, n7 (position 6) is a leaf under n3 (position 2) under n1
  Result<CommitTree> tree = CommitTree::Create(Ids(8), "n1", 2);
  ASSERT_TRUE(tree.ok());
  ASSERT_EQ(tree->ParentOf("n7"), "n3");
  ASSERT_EQ(tree->ParentOf("n3"), "n1");
  Result<SubtreeSum> sum = Commit(2);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("committing node n7's part of job/5"), std::string::npos)
      << sum.status().ToString();
  // The rest of the tree committed its parts; the coordinator (the caller) commits nothing.
  EXPECT_TRUE(nodes["n3"]->h.tier->HasCommitted("job", 5));
  EXPECT_FALSE(nodes["n7"]->h.tier->HasCommitted("job", 5));
  EXPECT_FALSE(nodes["n1"]->h.tier->HasCommitted("job", 5));
}

TEST_F(CommitTreeFailureTest, AMemberThatDoesNotAnswerIsNamedWithTheNodeThatAskedIt) {
  Start(8);
  ASSERT_TRUE(WriteObject(*nodes["n7"]->h.tier, "job", 5, "__n7.distcp", "x").ok());
  nodes["n7"]->service->Stop();  // n7 is gone: nobody listens at its address
  Result<SubtreeSum> sum = Commit(2);
  ASSERT_FALSE(sum.ok());
  EXPECT_NE(sum.status().message().find("node n7 (asked by n3) did not answer"), std::string::npos)
      << sum.status().ToString();
}

TEST_F(CommitTreeFailureTest, ASubtreeRequestFromANodeThatIsNotTheParentIsRefused) {
  Start(4);
  const std::vector<std::string> ids = Ids(4);
  // n4 asks n3 to commit its subtree of a tree rooted at n1, where n3's parent is n1.
  Result<std::unique_ptr<peer::Connection>> conn =
      nodes["n4"]->faults->Connect(Address("n3"), peer::Millis(3000), "n3");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kCommitSubtree);
  f.request_id = 1;
  const wire::CommitStepRequest req{"job", 5, 4, false, {}, ids};
  f.payload = peer::CommitSubtreeRequest{16, "n1", req.Encode()}.Encode();
  ASSERT_TRUE((*conn)->Send(f).ok());
  Result<peer::Message> m = (*conn)->Receive(peer::Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->frame.type, static_cast<uint16_t>(PeerMsg::kError));
  const Status refused = DecodePeerError(m->frame.payload);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("its parent is n1"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(nodes["n3"]->h.tier->HasCommitted("job", 5));
}

// Decision 108: the members travel as places in the sender's ring, so a
// node whose peer list differs must refuse rather than read them as other
// nodes; the error names both nodes and both rings and says what to fix.
TEST_F(CommitTreeFailureTest, AMemberWhosePeerListDiffersRefusesNamingBothRings) {
  Start(4);
  nodes["n3"].reset();  // n3 again, with a hostfile that has a fifth agent
  nodes["n3"] = std::make_unique<Node>("n3", net, Members(5), 1);
  ASSERT_TRUE(WriteObject(*nodes["n3"]->h.tier, "job", 5, "__n3.distcp", "x").ok());
  Result<SubtreeSum> sum = Commit(16);
  ASSERT_FALSE(sum.ok());
  const std::string& why = sum.status().message();
  EXPECT_EQ(sum.status().code(), Code::kFailedPrecondition) << sum.status().ToString();
  EXPECT_NE(why.find("node n1 asked node n3 to commit its subtree of job/5"), std::string::npos) << why;
  EXPECT_NE(why.find("(4 agents, digest "), std::string::npos) << why;
  EXPECT_NE(why.find("node n3's ring (its --peers) is 5 agents"), std::string::npos) << why;
  EXPECT_NE(why.find("the same --peers"), std::string::npos) << why;
  EXPECT_FALSE(nodes["n3"]->h.tier->HasCommitted("job", 5));
  EXPECT_TRUE(nodes["n2"]->h.tier->HasCommitted("job", 5));  // a sibling committed its own part
}

TEST_F(CommitTreeFailureTest, ARingSubtreeRequestFromANodeThatIsNotTheParentIsRefused) {
  Start(4);
  Result<std::unique_ptr<peer::Connection>> conn =
      nodes["n4"]->faults->Connect(Address("n3"), peer::Millis(3000), "n3");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  const RingId ring = RingIdOf(members);
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kCommitRingSubtree);
  f.request_id = 1;
  const wire::CommitStepRequest req{"job", 5, 4, false, {}, {}};
  f.payload = peer::CommitRingSubtreeRequest{16, "n1", ring.size, ring.digest, {0, 4}, req.Encode()}.Encode();
  ASSERT_TRUE((*conn)->Send(f).ok());
  Result<peer::Message> m = (*conn)->Receive(peer::Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->frame.type, static_cast<uint16_t>(PeerMsg::kError));
  const Status refused = DecodePeerError(m->frame.payload);
  EXPECT_EQ(refused.code(), Code::kInvalidArgument);
  EXPECT_NE(refused.message().find("its parent is n1"), std::string::npos) << refused.ToString();
  EXPECT_FALSE(nodes["n3"]->h.tier->HasCommitted("job", 5));
}

// Mixed versions (decision 108): an agent from before CommitRingSubtree
// closes the connection on a request type it does not know (PeerService's
// `default:`); the asking node names it and advises one version everywhere.
TEST_F(CommitTreeFailureTest, AnOlderAgentThatClosesOnTheRingRequestIsNamedWithTheAdviceOfOneVersion) {
  Start(4);
  nodes["n3"]->service->Stop();  // n3 is now an older agent: it reads one request and hangs up
  auto older = peer::InMemoryTransport::Create(net, peer::testing_util::Options("n3"));
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  auto listener = (*older)->Listen(Address("n3"));
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  uint16_t seen = 0;
  std::thread agent([&] {
    auto conn = (*listener)->Accept(peer::Millis(5000));
    if (!conn.ok()) return;
    auto m = (*conn)->Receive(peer::Millis(5000));
    if (m.ok()) seen = m->frame.type;
    (*conn)->Close();
  });
  Result<SubtreeSum> sum = Commit(16);
  agent.join();
  EXPECT_EQ(seen, static_cast<uint16_t>(PeerMsg::kCommitRingSubtree));
  ASSERT_FALSE(sum.ok());
  const std::string& why = sum.status().message();
  EXPECT_NE(why.find("node n3 (asked by n1) did not answer"), std::string::npos) << why;
  EXPECT_NE(why.find("run one tierckptd version on every node"), std::string::npos) << why;
}

// Mixed versions (decision 108): a coordinator of decision 102 sends
// CommitSubtree with the member list; a newer member still commits its
// subtree, asking its own children with the ring runs.
TEST_F(CommitTreeFailureTest, ACommitSubtreeWithTheMemberListIsStillAnswered) {
  Start(4);
  // k = 2: n1's children are n2 and n3, n2's child is n4.
  Result<std::unique_ptr<peer::Connection>> conn =
      nodes["n1"]->faults->Connect(Address("n2"), peer::Millis(3000), "n2");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kCommitSubtree);
  f.request_id = 1;
  const wire::CommitStepRequest listed{"job", 5, 4, false, {}, Ids(4)};
  f.payload = peer::CommitSubtreeRequest{2, "n1", listed.Encode()}.Encode();
  ASSERT_TRUE((*conn)->Send(f).ok());
  Result<peer::Message> m = (*conn)->Receive(peer::Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->frame.type, static_cast<uint16_t>(PeerMsg::kSubtreeCommitted))
      << DecodePeerError(m->frame.payload).ToString();
  Result<SubtreeSum> sum = SubtreeSum::Decode(m->frame.payload);
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(sum->parts, 2u);  // n2 and n4
  EXPECT_EQ(sum->depth, 1u);
  EXPECT_TRUE(nodes["n4"]->h.tier->HasCommitted("job", 5));
  Result<Manifest> n4 = nodes["n4"]->h.tier->GetManifest("job", 5);
  ASSERT_TRUE(n4.ok()) << n4.status().ToString();
  // Expanded from n2's ring runs, and kept as a non-coordinator does (decision 116).
  ASSERT_TRUE(n4->member_ref.has_value());
  EXPECT_EQ(n4->member_ref->count, 4u);
  EXPECT_EQ(n4->member_ref->index, 3u);
  EXPECT_EQ(n4->member_ref->coordinator, "n1");
  EXPECT_EQ(n4->member_ref->digest, DigestMembers(Ids(4)).digest);
}

// Mixed versions (decision 102): a coordinator from before the tree sends
// CommitPart to every member; a newer member still commits its part and
// answers its manifest.
TEST_F(CommitTreeFailureTest, ACommitPartFromACoordinatorBeforeTheTreeIsStillAnswered) {
  Start(3);
  Result<std::unique_ptr<peer::Connection>> conn =
      nodes["n1"]->faults->Connect(Address("n3"), peer::Millis(3000), "n3");
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kCommitPart);
  f.request_id = 1;
  f.payload = wire::CommitStepRequest{"job", 5, 3, false, {}, Ids(3)}.Encode();
  ASSERT_TRUE((*conn)->Send(f).ok());
  Result<peer::Message> m = (*conn)->Receive(peer::Millis(3000));
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->frame.type, static_cast<uint16_t>(PeerMsg::kManifest))
      << DecodePeerError(m->frame.payload).ToString();
  Result<Manifest> part = Manifest::Parse(m->frame.payload, "n3's answer");
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_EQ(part->node, "n3");
  EXPECT_EQ(part->objects.size(), 1u);
  EXPECT_TRUE(nodes["n3"]->h.tier->HasCommitted("job", 5));
}

}  // namespace
}  // namespace tierckpt::agent
