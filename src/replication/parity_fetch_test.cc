// The fetch of a parity holder's sealed record and pieces over the peer
// protocol (kGetParityRecord, kGetParityPiece; decision 138), in process:
// nodes over an in-memory network through a fault-injecting transport
// (peer_test_nodes.h).
#include "replication/parity_fetch.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/parity_groups.h"
#include "os/files.h"
#include "replication/parity_holder.h"
#include "replication/parity_sender.h"
#include "replication/peer_test_nodes.h"

namespace tierckpt::agent {
namespace {

using testing::Address;
using testing::Bytes;
using testing::Members;
using testing::Node;
using testing::WriteStep;
using namespace std::chrono_literals;

constexpr uint64_t kFetchStep = 9;

class ParityFetchTest : public ::testing::Test {
 protected:
  // Four nodes, rs:2+1: group 0 is two members and one holder; both parts
  // committed and sent, so the holder seals.
  void SetUp() override {
    Result<cluster::ParityLayout> placed = testing::StartParityNodes(nodes, net, 4, 2, 1);
    ASSERT_TRUE(placed.ok()) << placed.status().ToString();
    layout = *placed;
    g = layout.groups[0];
    ASSERT_EQ(g.data.size(), 2u);
    holder = g.parity[0];
    for (size_t i = 0; i < g.data.size(); ++i) {
      ASSERT_TRUE(
          WriteStep(*nodes[g.data[i]]->h.tier, "job", kFetchStep,
                    {{"a", Bytes((1u << 20) + 333 * i, static_cast<char>('a' + i))}, {"b", Bytes(77, 'z')}})
              .ok());
    }
    std::vector<std::thread> threads;
    for (const std::string& m : g.data) {
      threads.emplace_back([&, m] {
        Result<ParitySender> s = ParitySender::Create(nodes[m]->replicator.get(), layout, m);
        ASSERT_TRUE(s.ok());
        EXPECT_TRUE(s->SendParity("job", kFetchStep, 20s).redundant());
      });
    }
    for (std::thread& t : threads) t.join();
  }
  // A fetch from `from`'s transport to the holder.
  ParityFetch FetchFrom(const std::string& from) {
    return ParityFetch(nodes[from]->faults.get(), holder, Address(holder), peer::Millis(3000));
  }
  std::string PieceFile() {
    Result<std::string> b =
        ReadFileToString(nodes[holder]->parity->PiecePath("job", kFetchStep, g.index, 0), 1u << 30);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? *b : "";
  }

  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  std::map<std::string, std::unique_ptr<Node>> nodes;
  cluster::ParityLayout layout;
  cluster::ParityGroup g;
  std::string holder;
};

TEST_F(ParityFetchTest, AnyPeerReadsTheSealedRecordAndPieceTheHolderKeeps) {
  ParityFetch fetch = FetchFrom(g.data[0]);
  Result<ec::ParityRecord> record = fetch.Record("job", kFetchStep, g.index);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  Result<ec::ParityRecord> there = nodes[holder]->parity->Record("job", kFetchStep, g.index);
  ASSERT_TRUE(there.ok());
  EXPECT_EQ(*record, *there);
  Result<std::vector<uint8_t>> piece = fetch.Piece("job", kFetchStep, g.index, 0, record->PieceLength());
  ASSERT_TRUE(piece.ok()) << piece.status().ToString();
  const std::string file = PieceFile();
  EXPECT_TRUE(std::string(piece->begin(), piece->end()) == file);
  // The source fetches at its first read and serves the rest from its buffer.
  PeerPieceSource source(&fetch, "job", kFetchStep, g.index, 0, record->PieceLength());
  std::vector<uint8_t> tail(100);
  ASSERT_TRUE(source.Read(0, tail.data(), 10).ok());
  ASSERT_TRUE(source.Read(file.size() - 100, tail.data(), 100).ok());
  EXPECT_TRUE(std::string(tail.begin(), tail.end()) == file.substr(file.size() - 100));
  EXPECT_EQ(source.Read(file.size() - 10, tail.data(), 100).code(), Code::kIoError);
}

TEST_F(ParityFetchTest, WhatTheHolderDoesNotHoldIsNotFoundNamingTheGroupAndTheHolder) {
  ParityFetch fetch = FetchFrom(g.data[0]);
  Result<ec::ParityRecord> other_step = fetch.Record("job", kFetchStep + 1, g.index);
  EXPECT_EQ(other_step.status().code(), Code::kNotFound) << other_step.status().ToString();
  EXPECT_NE(other_step.status().message().find("parity holder " + holder), std::string::npos)
      << other_step.status().ToString();
  Result<ec::ParityRecord> record = fetch.Record("job", kFetchStep, g.index);
  ASSERT_TRUE(record.ok());
  Result<std::vector<uint8_t>> not_held = fetch.Piece("job", kFetchStep, g.index, 1, record->PieceLength());
  EXPECT_EQ(not_held.status().code(), Code::kNotFound) << not_held.status().ToString();
  EXPECT_NE(not_held.status().message().find("holds no parity piece 1"), std::string::npos)
      << not_held.status().ToString();
  // A node that holds no parity of the group (a data member) has no record of it.
  ParityFetch from_member(nodes[g.data[0]]->faults.get(), g.data[1], Address(g.data[1]), peer::Millis(3000));
  EXPECT_EQ(from_member.Record("job", kFetchStep, g.index).status().code(), Code::kNotFound);
  // The length the record gives is the only one accepted.
  EXPECT_EQ(fetch.Piece("job", kFetchStep, g.index, 0, record->PieceLength() + 1).status().code(),
            Code::kCorruption);
  EXPECT_EQ(fetch.Record("../x", kFetchStep, g.index).status().code(), Code::kInvalidArgument);
}

TEST_F(ParityFetchTest, APieceDamagedInTransitOrAtRestFailsOnArrival) {
  ParityFetch fetch = FetchFrom(g.data[0]);
  Result<ec::ParityRecord> record = fetch.Record("job", kFetchStep, g.index);
  ASSERT_TRUE(record.ok());
  nodes[holder]->faults->CorruptNthStream(1, 4096);
  Result<std::vector<uint8_t>> in_transit = fetch.Piece("job", kFetchStep, g.index, 0, record->PieceLength());
  EXPECT_EQ(in_transit.status().code(), Code::kCorruption) << in_transit.status().ToString();
  nodes[holder]->faults->ClearFaults();
  ASSERT_TRUE(fetch.Piece("job", kFetchStep, g.index, 0, record->PieceLength()).ok());
  // At rest: the holder streams its record's checksum, not a hash of the damaged file.
  std::string file = PieceFile();
  file[1000] = static_cast<char>(file[1000] ^ 0x5a);
  ASSERT_TRUE(WriteFileAtomic(nodes[holder]->parity->PiecePath("job", kFetchStep, g.index, 0), file, false).ok());
  Result<std::vector<uint8_t>> at_rest = fetch.Piece("job", kFetchStep, g.index, 0, record->PieceLength());
  EXPECT_EQ(at_rest.status().code(), Code::kCorruption) << at_rest.status().ToString();
  EXPECT_NE(at_rest.status().message().find("parity piece 0"), std::string::npos)
      << at_rest.status().ToString();
}

TEST_F(ParityFetchTest, MalformedRequestsCloseTheConnectionAndTheServiceGoesOn) {
  Replicator& member = *nodes[g.data[0]]->replicator;
  for (const std::string& bad :
       {std::string("xyz"), peer::GetParityRequest{"job", kFetchStep, 0, 0}.Encode() + "x",
        std::string("\xff\xff\xff\xff\x00", 5)}) {
    EXPECT_FALSE(member.Call(holder, PeerMsg::kGetParityRecord, bad, PeerMsg::kParityRecord, 3000ms).ok());
    EXPECT_FALSE(member.Call(holder, PeerMsg::kGetParityPiece, bad, PeerMsg::kObject, 3000ms).ok());
  }
  Result<std::string> good =
      member.Call(holder, PeerMsg::kGetParityRecord,
                  peer::GetParityRequest{"job", kFetchStep, g.index, 0}.Encode(), PeerMsg::kParityRecord, 3000ms);
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_TRUE(ec::ParityRecord::Parse(*good, "test").ok());
}

}  // namespace
}  // namespace tierckpt::agent
