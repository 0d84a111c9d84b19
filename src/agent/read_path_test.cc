// ReadPath — which tier serves a read, and the repair of a corrupt copy
// (read_path.h): memory, then the replica holders, then the durable tier;
// a corrupt memory copy re-hashed, dropped on this node only and restored;
// concurrent repairs of one step; no other copy.
#include "agent/read_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "replication/commit.h"
#include "replication/peer_test_nodes.h"
#include "store/mem_store.h"
#include "testing/fault_store.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::Bytes;
using testing::ChecksumOf;
using testing::Members;
using testing::Node;
using testing::ReadFd;
using testing::TierHarness;
using testing::WriteObject;
using testing::WriteStep;

const std::string kData = std::string(300000, 'x') + "tail";

void PutDurableStep(ObjectStore& store, const std::string& ns, uint64_t step,
                    const std::map<std::string, std::string>& objects) {
  Manifest m;
  m.ns = ns;
  m.step = step;
  m.node = "node-t";
  m.created_unix_ms = 1700000000000ull;
  for (const auto& [name, data] : objects) {
    ASSERT_TRUE(store.PutObject(ns, step, name, data.data(), data.size()).ok());
    m.objects.push_back({name, data.size(), ChecksumOf(data), "node-t"});
  }
  ASSERT_TRUE(store.CommitStep(m).ok());
}

// Flips one byte of an object file in place (the inode readers map).
void Corrupt(const std::string& step_dir, const std::string& name, off_t offset = 1000) {
  const std::string path = Layout::ObjectPath(step_dir, name);
  Result<UniqueFd> fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  char byte = 0;
  ASSERT_EQ(::pread(fd->get(), &byte, 1, offset), 1);
  byte = static_cast<char>(byte ^ 0xff);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, offset, path).ok());
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ReadPathTest, MemoryServesACommittedStepAsIs) {
  TierHarness h;
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", kData}}).ok());
  ReadPath path({"node-t", h.tier.get()});
  Result<ServedObject> got = path.Open("job", 1, "a", /*repair=*/false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_EQ(got->object.checksum, ChecksumOf(kData));
  EXPECT_TRUE(got->repaired.empty());
}

TEST(ReadPathTest, AStepMissingFromMemoryIsRestoredFromTheDurableTier) {
  TierHarness h(64u << 20, 3, /*has_durable=*/true);
  MemObjectStore store("read-path-durable");
  PutDurableStep(store, "job", 2, {{"a", kData}});
  ReadPath path({"node-t", h.tier.get(), &store});
  Result<ServedObject> got = path.Open("job", 2, "a", false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_TRUE(h.tier->HasCommitted("job", 2));
}

TEST(ReadPathTest, AStepInNoTierIsNotFoundNamingIt) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("read-path-none");
  ReadPath path({"node-t", h.tier.get(), &store});
  Result<ServedObject> got = path.Open("job", 7, "a", false);
  EXPECT_EQ(got.status().code(), Code::kNotFound);
  EXPECT_TRUE(Contains(got.status().message(), "job/7")) << got.status().ToString();
  ReadPath memory_only({"node-t", h.tier.get()});
  EXPECT_EQ(memory_only.Open("job", 7, "a", false).status().code(), Code::kNotFound);
  EXPECT_EQ(memory_only.Open("job", 7, "a", true).status().code(), Code::kNotFound);
}

TEST(ReadPathTest, ARepairOfASoundCopyHandsItOutAgainWithoutDroppingIt) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("read-path-sound");
  ASSERT_TRUE(WriteStep(*h.tier, "job", 3, {{"a", kData}}).ok());
  PutDurableStep(store, "job", 3, {{"a", kData}});
  const uint64_t inode = testing::InodeOf(Layout::ObjectPath(h.StepDir("job", 3), "a"));
  ReadPath path({"node-t", h.tier.get(), &store});
  Result<ServedObject> got = path.Open("job", 3, "a", /*repair=*/true);  // the client's word is not enough
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(got->repaired.empty()) << got->repaired;
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_EQ(testing::InodeOf(Layout::ObjectPath(h.StepDir("job", 3), "a")), inode);
  // The re-hash that found it sound is a verification (attested reads may trust it).
  Result<OpenedObject> again = h.tier->OpenObject("job", 3, "a");
  ASSERT_TRUE(again.ok());
  EXPECT_LT(again->verified_age_ms, 10'000u);
}

TEST(ReadPathTest, ARepairDropsACorruptMemoryCopyAndRestoresItFromTheDurableTier) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("read-path-repair");
  const std::map<std::string, std::string> objects = {{"a", kData}, {"b", Bytes(5000, 'b')}};
  ASSERT_TRUE(WriteStep(*h.tier, "job", 4, objects).ok());
  PutDurableStep(store, "job", 4, objects);
  Corrupt(h.StepDir("job", 4), "a");
  ReadPath path({"node-t", h.tier.get(), &store});
  // A plain open trusts memory: the client's checksum is what catches this.
  Result<ServedObject> plain = path.Open("job", 4, "a", false);
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(ReadFd(plain->object.fd.get()), kData);

  Result<ServedObject> got = path.Open("job", 4, "a", /*repair=*/true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_TRUE(Contains(got->repaired, "memory copy of object job/4/a is corrupt")) << got->repaired;
  EXPECT_TRUE(Contains(got->repaired, "durable tier (" + store.Describe() + ")")) << got->repaired;
  Result<MemoryVerifyResult> verified = h.tier->VerifyStep("job", 4);
  ASSERT_TRUE(verified.ok());
  EXPECT_TRUE(verified->errors.empty());
  EXPECT_EQ(h.tier->ListSteps("job")[0].persist, PersistState::kDurable);
}

TEST(ReadPathTest, ACorruptCopyWithNoOtherTierIsCorruptionAndIsKept) {
  TierHarness h;
  ASSERT_TRUE(WriteStep(*h.tier, "job", 5, {{"a", kData}}).ok());
  Corrupt(h.StepDir("job", 5), "a");
  ReadPath path({"node-t", h.tier.get()});
  Result<ServedObject> got = path.Open("job", 5, "a", true);
  ASSERT_EQ(got.status().code(), Code::kCorruption) << got.status().ToString();
  const std::string& msg = got.status().message();
  EXPECT_TRUE(Contains(msg, "object job/5/a")) << msg;
  EXPECT_TRUE(Contains(msg, "no other tier holds job/5")) << msg;
  EXPECT_TRUE(Contains(msg, "no durable copy")) << msg;
  EXPECT_TRUE(h.tier->HasCommitted("job", 5));  // kept: Verify and `tierckpt rm` still see it

  // A durable tier without the step: the same, naming the store.
  MemObjectStore store("read-path-empty");
  ReadPath with_store({"node-t", h.tier.get(), &store});
  got = with_store.Open("job", 5, "a", true);
  ASSERT_EQ(got.status().code(), Code::kCorruption);
  EXPECT_TRUE(Contains(got.status().message(), "no durable copy in " + store.Describe()))
      << got.status().ToString();
  EXPECT_TRUE(h.tier->HasCommitted("job", 5));
}

// The durable tier holds another save of the step number (the step was
// deleted and written again, and the new save not persisted yet): restoring
// from it would hand out other bytes under the same name; the copy is kept.
TEST(ReadPathTest, ACorruptCopyIsNotReplacedByAnotherSaveOfItsStepNumber) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("read-path-other-save");
  ASSERT_TRUE(WriteStep(*h.tier, "job", 12, {{"a", kData}}).ok());
  PutDurableStep(store, "job", 12, {{"a", Bytes(kData.size(), 'o')}});
  Corrupt(h.StepDir("job", 12), "a");
  ReadPath path({"node-t", h.tier.get(), &store});
  Result<ServedObject> got = path.Open("job", 12, "a", true);
  ASSERT_EQ(got.status().code(), Code::kCorruption) << got.status().ToString();
  const std::string& msg = got.status().message();
  EXPECT_TRUE(Contains(msg, "no other tier holds job/12")) << msg;
  EXPECT_TRUE(Contains(msg, "the durable copy in " + store.Describe() +
                                " is another save of that step number (its object a differs)"))
      << msg;
  EXPECT_TRUE(h.tier->HasCommitted("job", 12));  // kept: nothing else was brought in under its name
}

TEST(ReadPathTest, ADurableCopyThatIsCorruptTooFailsWithCorruption) {
  TierHarness h(64u << 20, 3, true);
  auto mem = std::make_shared<MemObjectStore>("read-path-both");
  FaultInjectingStore store(mem);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 6, {{"a", kData}}).ok());
  PutDurableStep(store, "job", 6, {{"a", kData}});
  Corrupt(h.StepDir("job", 6), "a");
  store.CorruptReads("a");
  ReadPath path({"node-t", h.tier.get(), &store});
  Result<ServedObject> got = path.Open("job", 6, "a", true);
  ASSERT_EQ(got.status().code(), Code::kCorruption) << got.status().ToString();
  EXPECT_TRUE(Contains(got.status().message(), "restoring job/6 failed")) << got.status().ToString();
  store.ClearFaults();
  got = path.Open("job", 6, "a", false);  // the step comes back on the next read
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
}

// Regression: ranks of one node that read the same corrupt copy raced to drop
// it, and the loser's drop met the winner's restore (the load failed).
TEST(ReadPathTest, ConcurrentRepairsOfOneStepAllReadTheRestoredCopy) {
  TierHarness h(64u << 20, 3, true);
  MemObjectStore store("read-path-race");
  const std::map<std::string, std::string> objects = {{"a", kData}, {"b", Bytes(2u << 20, 'b')}};
  ASSERT_TRUE(WriteStep(*h.tier, "job", 8, objects).ok());
  PutDurableStep(store, "job", 8, objects);
  Corrupt(h.StepDir("job", 8), "a");
  Corrupt(h.StepDir("job", 8), "b");
  ReadPath path({"node-t", h.tier.get(), &store});
  constexpr int kReaders = 8;
  std::vector<std::thread> readers;
  std::atomic<int> ok{0}, repaired{0};
  std::vector<std::string> errors(kReaders);
  for (int i = 0; i < kReaders; ++i) {
    readers.emplace_back([&, i] {
      const std::string name = i % 2 == 0 ? "a" : "b";
      // Half ask for a repair, the others read meanwhile as plain readers do.
      Result<ServedObject> got = path.Open("job", 8, name, /*repair=*/i < kReaders / 2 || i % 3 == 0);
      if (!got.ok()) {
        errors[i] = got.status().ToString();
        return;
      }
      if (!got->repaired.empty()) ++repaired;
      ++ok;
    });
  }
  for (std::thread& t : readers) t.join();
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << e;
  EXPECT_EQ(ok.load(), kReaders);
  EXPECT_EQ(repaired.load(), 1);  // one dropped and restored; the others read its result
  for (const auto& [name, data] : objects) {
    Result<ServedObject> got = path.Open("job", 8, name, true);
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(got->repaired.empty());
    EXPECT_EQ(ReadFd(got->object.fd.get()), data);
  }
}

class ReadPathPeersTest : public ::testing::Test {
 protected:
  void Start(int n) {
    const cluster::Membership members = Members(n);
    for (int i = 1; i <= n; ++i) {
      const std::string id = "n" + std::to_string(i);
      nodes[id] = std::make_unique<Node>(id, net, members, 2, &store);
    }
  }
  ReadPathDeps DepsOf(Node& n) { return {n.id, n.h.tier.get(), &store, n.cluster.get()}; }

  MemObjectStore store{"durable"};
  std::shared_ptr<peer::InMemoryNetwork> net = peer::InMemoryNetwork::Create(4u << 20);
  std::map<std::string, std::unique_ptr<Node>> nodes;
  const std::map<std::string, std::string> objects = {{"a", kData}, {"b", Bytes(70000, 'b')}};
};

TEST_F(ReadPathPeersTest, ACorruptCopyComesBackFromAReplicaHolderBeforeTheDurableTierAndTheReplicaStays) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 9, objects).ok());
  ASSERT_TRUE(n1.replicator->Replicate("job", 9).ok());
  PutDurableStep(store, "job", 9, objects);
  Corrupt(n1.h.StepDir("job", 9), "a");
  ReadPath path(DepsOf(n1));
  Result<ServedObject> got = path.Open("job", 9, "a", true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_TRUE(Contains(got->repaired, "from replica holder n2")) << got->repaired;
  Result<MemoryTier*> held = nodes["n2"]->replica_tiers->Get("n1", false);
  ASSERT_TRUE(held.ok());
  EXPECT_TRUE((*held)->HasCommitted("job", 9));  // the holder's verified copy is kept
}

// Regression: a step restored from a replica holder was published as a
// restore from the durable tier is (durable), though the durable tier did
// not hold it: status and `tierckpt ls` called it durable, and verify failed
// on its absent durable copy.
TEST_F(ReadPathPeersTest, AStepRestoredFromAHolderIsDurableOnlyIfTheDurableTierHoldsThisSaveOfIt) {
  Start(2);
  Node& n1 = *nodes["n1"];
  ASSERT_TRUE(WriteStep(*n1.h.tier, "job", 13, objects).ok());
  ASSERT_TRUE(n1.replicator->Replicate("job", 13).ok());
  Corrupt(n1.h.StepDir("job", 13), "b");
  ReadPath path(DepsOf(n1));
  Result<ServedObject> got = path.Open("job", 13, "b", true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(Contains(got->repaired, "from replica holder n2")) << got->repaired;
  EXPECT_EQ(n1.h.tier->ListSteps("job")[0].persist, PersistState::kNone);

  // Persisted meanwhile (this save): a second repair keeps it durable.
  PutDurableStep(store, "job", 13, objects);
  Corrupt(n1.h.StepDir("job", 13), "a");
  got = path.Open("job", 13, "a", true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), kData);
  EXPECT_EQ(n1.h.tier->ListSteps("job")[0].persist, PersistState::kDurable);
}

TEST_F(ReadPathPeersTest, AStepMissingEverywhereButTheDurableTierComesFromThereAfterTheHolders) {
  Start(2);
  Node& n1 = *nodes["n1"];
  PutDurableStep(store, "job", 10, objects);
  ReadPath path(DepsOf(n1));
  std::string from;
  ASSERT_TRUE(path.RestoreStep("job", 10, &from).ok());
  EXPECT_EQ(from, "the durable tier (" + store.Describe() + ")");
  Result<ServedObject> got = path.Open("job", 10, "b", false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), objects.at("b"));
}

// A step spanning n1 and n2, committed by n1 and made durable: n1's part holds "own", n2's "theirs".
class ReadPathSpanTest : public ReadPathPeersTest {
 protected:
  void CommitDurableSpan(uint64_t step) {
    Start(3);  // n3 holds n2's replica, n2 holds n1's
    ASSERT_TRUE(WriteObject(*nodes["n1"]->h.tier, "job", step, "own", kData).ok());
    ASSERT_TRUE(WriteObject(*nodes["n2"]->h.tier, "job", step, "theirs", theirs).ok());
    wire::CommitStepRequest req{"job", step, 2, /*persist=*/true, {}, {"n1", "n2"}};
    Node& n1 = *nodes["n1"];
    ASSERT_TRUE(n1.cluster->CommitOtherParts(req).ok());
    ASSERT_TRUE(CommitOnNode({n1.h.tier.get(), n1.cluster.get()}, req).ok());
    for (const std::string node : {"n1", "n2"}) {
      Result<PersistStatus> st = nodes[node]->h.tier->WaitPersist("job", step, std::chrono::seconds(20));
      ASSERT_TRUE(st.ok()) << node;
      ASSERT_EQ(st->state, PersistState::kDurable) << node << ": " << st->error.ToString();
    }
    ASSERT_TRUE(store.ReadManifest("job", step).ok());
  }
  const std::string theirs = Bytes(90000, 't');
};

TEST_F(ReadPathSpanTest, AnotherMembersPartComesFromTheDurableTierWhenNeitherItNorItsHoldersAnswer) {
  CommitDurableSpan(11);
  nodes["n2"]->service->Stop();  // the member
  nodes["n3"]->service->Stop();  // the holder of its replica
  Node& n1 = *nodes["n1"];
  ReadPath path(DepsOf(n1));
  Result<ServedObject> got = path.Open("job", 11, "theirs", false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), theirs);
  // Kept as this node's copy of n2's part (its own part untouched), so the next read is local.
  Result<MemoryTier*> copy = n1.replica_tiers->Get("n2", false);
  ASSERT_TRUE(copy.ok());
  Result<Manifest> part = (*copy)->GetManifest("job", 11);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  ASSERT_EQ(part->objects.size(), 1u);
  EXPECT_EQ(part->objects[0].name, "theirs");
  EXPECT_EQ(part->node, "n2");
  Result<Manifest> own = n1.h.tier->GetManifest("job", 11);
  ASSERT_TRUE(own.ok());
  ASSERT_EQ(own->objects.size(), 1u);
  EXPECT_EQ(own->objects[0].name, "own");
  got = path.Open("job", 11, "theirs", false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), theirs);
  // A corrupt copy of that part is dropped and restored from the durable tier again.
  Corrupt(Layout(n1.h.options.root + "/replicas/n2").StepDir("job", 11), "theirs");
  got = path.Open("job", 11, "theirs", true);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(ReadFd(got->object.fd.get()), theirs);
  EXPECT_TRUE(Contains(got->repaired, "from the durable tier")) << got->repaired;
  // An object in no part and not in the durable copy either is still kNotFound, naming both.
  Result<ServedObject> none = path.Open("job", 11, "nowhere", false);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kNotFound) << none.status().ToString();
  EXPECT_TRUE(Contains(none.status().message(), "nor from the durable tier")) << none.status().ToString();
}

TEST_F(ReadPathSpanTest, ADurableCopyOfAnotherSaveOfTheStepNumberIsNotReadForAPart) {
  CommitDurableSpan(12);
  // The durable step 12 is rewritten by another save (n1's object differs): it is not this save's.
  Result<Manifest> m = store.ReadManifest("job", 12);
  ASSERT_TRUE(m.ok());
  const std::string other = Bytes(kData.size(), 'o');
  for (ObjectEntry& e : m->objects) {
    if (e.name == "own") e.checksum = ChecksumOf(other);
  }
  ASSERT_TRUE(store.DeleteStep("job", 12).ok());
  for (const ObjectEntry& e : m->objects) {
    const std::string& data = e.name == "own" ? other : theirs;
    ASSERT_TRUE(store.PutObject("job", 12, e.name, data.data(), data.size()).ok());
  }
  ASSERT_TRUE(store.CommitStep(*m).ok());
  nodes["n2"]->service->Stop();
  nodes["n3"]->service->Stop();
  ReadPath path(DepsOf(*nodes["n1"]));
  Result<ServedObject> got = path.Open("job", 12, "theirs", false);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(Contains(got.status().message(), "another save of that step number")) << got.status().ToString();
  EXPECT_FALSE((*nodes["n1"]->replica_tiers->Get("n2", true))->HasCommitted("job", 12));
}

}  // namespace
}  // namespace tierckpt::agent
