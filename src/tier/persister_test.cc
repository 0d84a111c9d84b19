#include "tier/persister.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "common/names.h"
#include "os/files.h"
#include "store/mem_store.h"
#include "testing/fault_store.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::TierHarness;
using testing::WriteStep;

struct PersistHarness {
  explicit PersistHarness(uint32_t durable_keep = 0, uint32_t keep_last = 3, PersisterOptions o = {})
      : h(64u << 20, keep_last, /*has_durable=*/true) {
    mem = std::make_shared<MemObjectStore>("persist-test");
    store = std::make_unique<FaultInjectingStore>(mem);
    o.threads = 2;
    o.durable_keep = durable_keep;
    o.first_backoff = std::chrono::milliseconds(1);
    o.metrics = &h.metrics;
    persister = std::make_unique<Persister>(o, h.tier.get(), store.get(), &errors);
    Persister* p = persister.get();
    h.tier->SetPersistHook([p](const std::string& ns, uint64_t step) { p->Enqueue(ns, step); });
  }
  ~PersistHarness() { persister->Stop(std::chrono::milliseconds(0)); }

  PersistStatus Wait(const std::string& ns, uint64_t step) {
    Result<PersistStatus> w = h.tier->WaitPersist(ns, step, std::chrono::seconds(20));
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? *w : PersistStatus{};
  }

  TierHarness h;
  RecentErrors errors{&h.metrics};
  std::shared_ptr<MemObjectStore> mem;
  std::unique_ptr<FaultInjectingStore> store;
  std::unique_ptr<Persister> persister;
};

TEST(PersisterTest, PersistsACommittedStep) {
  PersistHarness p;
  Result<Manifest> m = WriteStep(*p.h.tier, "job", 3, {{"a", std::string(100000, 'a')}, {"d/b", "b"}}, true);
  ASSERT_TRUE(m.ok());
  PersistStatus s = p.Wait("job", 3);
  EXPECT_EQ(s.state, PersistState::kDurable);
  Result<Manifest> durable = p.mem->ReadManifest("job", 3);
  ASSERT_TRUE(durable.ok()) << durable.status().ToString();
  EXPECT_EQ(durable->objects.size(), 2u);
  EXPECT_EQ(durable->objects[0].checksum, m->objects[0].checksum);
  std::string back(100000, '\0');
  ASSERT_TRUE(p.mem->ReadObject("job", 3, "a", 0, back.data(), back.size()).ok());
  EXPECT_EQ(back, std::string(100000, 'a'));
  EXPECT_FALSE(StatPath(Layout::MarkerPath(p.h.StepDir("job", 3)))->exists);
  EXPECT_TRUE(p.errors.Snapshot().empty());
  // Counted in the metrics the harness passed in (PersisterOptions::metrics).
  EXPECT_EQ(p.h.metrics.persist.ok.load(), 1u);
  EXPECT_EQ(p.h.metrics.persist.bytes.load(), 100001u);
  EXPECT_EQ(p.h.metrics.commit.ok.load(), 1u);
}

TEST(PersisterTest, AStepGoesToTheStoreInOnePutObjectsCall) {
  PersistHarness p;
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "1"}, {"b", "2"}, {"c/d", "3"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  EXPECT_EQ(p.store->PutObjectsBatches(), std::vector<size_t>{3});
}

TEST(PersisterTest, AStepOfManyObjectsGoesInBoundedBatches) {
  PersisterOptions o;
  o.batch_objects = 2;
  o.batch_copied_bytes = 1000;  // every object here is read into a heap copy
  PersistHarness p(0, 3, o);
  const std::map<std::string, std::string> objects = {{"a", "1"}, {"b", "2"}, {"c", std::string(1500, 'c')}, {"d", "4"}, {"e", "5"}};
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, objects, true).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  // a b | c (1500 copied bytes) | d e
  EXPECT_EQ(p.store->PutObjectsBatches(), (std::vector<size_t>{2, 1, 2}));
  for (const auto& [name, data] : objects) {
    std::string back(data.size(), '\0');
    ASSERT_TRUE(p.mem->ReadObject("job", 1, name, 0, back.data(), back.size()).ok()) << name;
    EXPECT_EQ(back, data) << name;
  }
}

TEST(PersisterTest, TheFirstDurableStepOfANamespaceSweepsOlderUncommittedSteps) {
  PersistHarness p;
  // What interrupted persists of steps no longer in memory left behind.
  ASSERT_TRUE(p.mem->PutObject("job", 1, "a", "x", 1).ok());
  ASSERT_TRUE(p.mem->PutObject("job", 7, "a", "y", 1).ok());   // newer: maybe being written
  ASSERT_TRUE(p.mem->PutObject("other", 1, "a", "z", 1).ok());  // another namespace
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 5, {{"a", "five"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 5).state, PersistState::kDurable);
  EXPECT_EQ(p.mem->ObjectSize("job", 1, "a").status().code(), Code::kNotFound);
  EXPECT_TRUE(p.mem->ObjectSize("job", 7, "a").ok());
  EXPECT_TRUE(p.mem->ObjectSize("other", 1, "a").ok());
  // Once per namespace: later persists do not list the namespace again.
  ASSERT_TRUE(p.mem->PutObject("job", 2, "a", "x", 1).ok());
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 6, {{"a", "six"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 6).state, PersistState::kDurable);
  EXPECT_TRUE(p.mem->ObjectSize("job", 2, "a").ok());
  EXPECT_EQ(p.store->CallCount(StoreOp::kSweepUncommitted), 1u);
  EXPECT_TRUE(p.errors.Snapshot().empty());
}

TEST(PersisterTest, PersistAndVerifyReadConcurrentlyThroughTheKeptMappings) {
  PersistHarness p;
  MemoryTier& t = *p.h.tier;
  const size_t kMiB = 1 << 20;  // the default threshold: files this large are kept mapped
  std::map<uint64_t, std::map<std::string, std::string>> steps;
  for (uint64_t step = 1; step <= 3; ++step) {
    int i = 0;
    for (const char* name : {"o0", "d/o1", "o2"}) {
      std::string data(kMiB, static_cast<char>('a' + step * 3 + static_cast<uint64_t>(i)));
      data[static_cast<size_t>(i++) * 1000] = 'Z';
      steps[step][name] = std::move(data);
    }
  }
  for (const auto& [step, objects] : steps) {
    // Sealed without a checksum: the agent hashes each object (mapping it once).
    for (const auto& [name, data] : objects) ASSERT_TRUE(testing::WriteObject(t, "job", step, name, data, 1, "").ok());
    ASSERT_TRUE(t.CommitStep("job", step, 1, false, {}).ok());
  }
  ASSERT_EQ(t.read_mappings().Stats().maps, 9u);  // the seal hashes mapped each file once

  std::atomic<bool> go{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> verifiers;
  for (int v = 0; v < 3; ++v) {
    verifiers.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int round = 0; round < 5; ++round) {
        for (uint64_t step = 1; step <= 3; ++step) {
          Result<MemoryVerifyResult> r = t.VerifyStep("job", step);
          if (!r.ok() || !r->errors.empty() || r->objects_checked != 3) ++failures;
        }
      }
    });
  }
  go = true;
  for (uint64_t step = 1; step <= 3; ++step) ASSERT_TRUE(t.RequestPersist("job", step).ok());
  for (auto& th : verifiers) th.join();
  for (uint64_t step = 1; step <= 3; ++step) EXPECT_EQ(p.Wait("job", step).state, PersistState::kDurable);
  EXPECT_EQ(failures.load(), 0);
  for (const auto& [step, objects] : steps) {
    for (const auto& [name, data] : objects) {
      std::string back(data.size(), '\0');
      ASSERT_TRUE(p.mem->ReadObject("job", step, name, 0, back.data(), back.size()).ok());
      EXPECT_TRUE(back == data) << "job/" << step << "/" << name;
    }
  }
  ReadMappingsStats s = t.read_mappings().Stats();
  EXPECT_EQ(s.maps, 9u);  // persist and Verify reused the seal's mappings
  EXPECT_EQ(s.mappings, 9u);
  EXPECT_EQ(s.hits, 9u + 3u * 5u * 9u);  // one persist pass + 3 verifiers x 5 rounds x 9 objects
}

TEST(PersisterTest, RetriesTransientErrors) {
  PersistHarness p;
  p.store->FailNthCall(StoreOp::kPutObject, 1, IoError("disk hiccup"));
  p.store->FailNthCall(StoreOp::kPutObject, 2, Unavailable("server busy"));
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  EXPECT_EQ(p.store->InjectedFaults(), 2u);
  EXPECT_EQ(p.store->CallCount(StoreOp::kPutObject), 3u);
  EXPECT_TRUE(p.mem->ReadManifest("job", 1).ok());
}

TEST(PersisterTest, GivesUpAfterRetriesWithAClearError) {
  PersistHarness p;
  p.store->FailEveryCall(StoreOp::kPutObject, IoError("disk on fire"));
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  PersistStatus s = p.Wait("job", 1);
  EXPECT_EQ(s.state, PersistState::kFailed);
  EXPECT_EQ(s.error.code(), Code::kIoError);
  EXPECT_NE(s.error.message().find("after 4 attempts"), std::string::npos) << s.error.ToString();
  EXPECT_NE(s.error.message().find("disk on fire"), std::string::npos);
  EXPECT_NE(s.error.message().find("job/1"), std::string::npos);
  EXPECT_EQ(p.store->CallCount(StoreOp::kPutObject), 4u);  // first try + 3 retries
  ASSERT_EQ(p.errors.Snapshot().size(), 1u);
  EXPECT_EQ(p.errors.Snapshot()[0].event, "persist");
  EXPECT_TRUE(StatPath(Layout::MarkerPath(p.h.StepDir("job", 1)))->exists);  // retried at next start
  EXPECT_FALSE(p.mem->ReadManifest("job", 1).ok());
  // Asking again after the medium recovered works.
  p.store->ClearFaults();
  ASSERT_TRUE(p.h.tier->RequestPersist("job", 1).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
}

// Issue 42 item 2: a durable filesystem that filled up got the failed steps
// only at the agent's next start; now they persist once space returns.
TEST(PersisterTest, AStepThatFailedOnAFullMediumPersistsOnceSpaceReturns) {
  PersisterOptions o;
  o.retry_later = std::chrono::milliseconds(50);
  PersistHarness p(0, 3, o);
  p.store->FailEveryCall(StoreOp::kPutObject, ResourceExhausted("write /d/x: No space left on device (errno 28)"));
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  PersistStatus s = p.Wait("job", 1);
  ASSERT_EQ(s.state, PersistState::kFailed);
  EXPECT_NE(s.error.message().find("No space left on device"), std::string::npos) << s.error.ToString();
  // Still full: tried again, still failed, still in memory.
  const uint64_t first = p.store->CallCount(StoreOp::kPutObject);
  for (int i = 0; i < 200 && p.store->CallCount(StoreOp::kPutObject) < first + 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(p.store->CallCount(StoreOp::kPutObject), first + 4);
  EXPECT_FALSE(p.mem->ReadManifest("job", 1).ok());
  p.store->ClearFaults();  // space returns
  PersistState state = PersistState::kFailed;
  for (int i = 0; i < 500 && state != PersistState::kDurable; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    Result<PersistStatus> now = p.h.tier->WaitPersist("job", 1, std::chrono::milliseconds(0));
    ASSERT_TRUE(now.ok());
    state = now->state;
  }
  EXPECT_EQ(state, PersistState::kDurable);
  EXPECT_TRUE(p.mem->ReadManifest("job", 1).ok());
}

TEST(PersisterTest, ANonRetriableFailureIsNotTriedAgainLater) {
  PersisterOptions o;
  o.retry_later = std::chrono::milliseconds(20);
  PersistHarness p(0, 3, o);
  p.store->FailEveryCall(StoreOp::kPutObject, PermissionDenied("the bucket refuses writes"));
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kFailed);
  const uint64_t calls = p.store->CallCount(StoreOp::kPutObject);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(p.store->CallCount(StoreOp::kPutObject), calls);
}

TEST(PersisterTest, ADifferentDurableCopyIsNotOverwritten) {
  PersistHarness p;
  Manifest other;
  other.ns = "job";
  other.step = 1;
  other.node = "elsewhere";
  std::string data = "zz";
  ASSERT_TRUE(p.mem->PutObject("job", 1, "a", data.data(), data.size()).ok());
  other.objects.push_back({"a", 2, testing::ChecksumOf(data), "elsewhere"});
  ASSERT_TRUE(p.mem->CommitStep(other).ok());
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  PersistStatus s = p.Wait("job", 1);
  EXPECT_EQ(s.state, PersistState::kFailed);
  EXPECT_EQ(s.error.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.error.message().find("different"), std::string::npos) << s.error.ToString();
  EXPECT_EQ(p.store->CallCount(StoreOp::kPutObject), 0u);  // not retried, nothing written
}

TEST(PersisterTest, AnIdenticalDurableCopyCountsAsSuccess) {
  PersistHarness p;
  Result<Manifest> m = WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  const uint64_t puts = p.store->CallCount(StoreOp::kPutObject);
  ASSERT_TRUE(p.h.tier->DeleteStep("job", 1).ok());
  // Same bytes committed again (e.g. restored and re-persisted): nothing to copy.
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  EXPECT_EQ(p.store->CallCount(StoreOp::kPutObject), puts);
}

// Regression (issue 42 item 3, tests/integration/test_takeover_under_fire.py):
// a merger SIGSTOPped in the middle of its part's upload, past its takeover,
// while a follower merged the step with the part a replica holder uploaded.
// Once continued, the store refused the rest of its upload into the committed
// step, and the merger failed its persist (an error logged, kFailed, `persist
// --wait` failing) although the step was durable with its part.
TEST(PersisterTest, AMemberWhoseStepWasMergedWithoutItDuringItsUploadFindsItDurable) {
  PersistHarness p;
  ASSERT_TRUE(testing::WriteObject(*p.h.tier, "job", 5, "a", "aaaa").ok());
  Manifest whole;  // what the follower committed, this node's part from its holder
  whole.ns = "job";
  whole.step = 5;
  whole.node = "other";
  whole.members = {"node-t", "other"};
  ASSERT_TRUE(p.mem->PutObject("job", 5, "a", "aaaa", 4).ok());
  ASSERT_TRUE(p.mem->PutObject("job", 5, "b", "bb", 2).ok());
  whole.objects.push_back({"a", 4, testing::ChecksumOf("aaaa"), "node-t"});
  whole.objects.push_back({"b", 2, testing::ChecksumOf("bb"), "other"});
  ASSERT_TRUE(p.mem->CommitStep(whole).ok());
  // The member's first look misses the manifest: the follower commits it during the upload.
  p.store->FailNthCall(StoreOp::kReadManifest, 1, NotFound("not committed yet"));
  ASSERT_TRUE(p.h.tier->CommitStep("job", 5, 2, /*persist=*/true, {}, StepSpan{{"node-t", "other"}, ""}).ok());
  PersistStatus s = p.Wait("job", 5);
  EXPECT_EQ(s.state, PersistState::kDurable) << s.error.ToString();
  EXPECT_TRUE(p.errors.Snapshot().empty());
  Result<Manifest> durable = p.mem->ReadManifest("job", 5);
  ASSERT_TRUE(durable.ok());
  EXPECT_EQ(durable->node, "other");  // not rewritten
  EXPECT_EQ(durable->objects.size(), 2u);
}

// Issue 21 item 2, decision 113: a member's part record, as uploaded, names
// the members by count and digest, so it does not grow with them (it carried
// the whole list: the id and 8 bytes per member).
TEST(PersisterTest, APartRecordAsUploadedDoesNotGrowWithTheMembers) {
  PersistHarness p;
  std::vector<uint64_t> sizes;
  for (int n = 2; n <= 64; n *= 2) {
    const uint64_t step = static_cast<uint64_t>(n);
    ASSERT_TRUE(testing::WriteObject(*p.h.tier, "job", step, "a", "aaaa").ok());
    std::vector<std::string> members{"node-t"};
    for (int i = 1; i < n; ++i) members.push_back("peer-" + std::to_string(1000 + i));
    std::sort(members.begin(), members.end());
    // A non-coordinator's part (decision 116); the coordinator's record lists the members.
    ASSERT_TRUE(
        p.h.tier->CommitStep("job", step, 2, /*persist=*/false, {}, StepSpan{members, "", "peer-1001"}).ok());
    ASSERT_TRUE(p.persister->UploadPart(p.h.tier.get(), "job", step).ok());
    Result<uint64_t> size = p.mem->ObjectSize("job", step, PartRecordName("node-t"));
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    std::printf("[part-record] N=%d %llu B\n", n, static_cast<unsigned long long>(*size));
    sizes.push_back(*size);
  }
  // 2 bytes: the digits of the members' count and of the step number.
  EXPECT_LE(sizes.back(), sizes.front() + 2) << "a part record of 64 members is " << sizes.back()
                                             << " B, of 2 members " << sizes.front() << " B";
}

// Decision 116: what a non-coordinator member keeps in its memory tier (and
// sends with each replica) names the members by count and digest and has no
// placement, so it does not grow with N; the coordinator's part lists both.
TEST(PersisterTest, ANonCoordinatorPartAsStoredDoesNotGrowWithTheMembers) {
  PersistHarness p;
  std::vector<uint64_t> part_sizes, coordinator_sizes;
  for (int n = 2; n <= 64; n *= 2) {
    std::vector<std::string> members{"node-t"};
    for (int i = 1; i < n; ++i) members.push_back("peer-" + std::to_string(1000 + i));
    std::sort(members.begin(), members.end());
    std::string ring;  // a placement names the whole ring, as the agents' does
    for (const std::string& id : members) ring += (ring.empty() ? "\"" : ",\"") + id + "\"";
    const std::string placement = "{\"format\":\"tierckpt.placement\",\"ring\":[" + ring + "]}";
    for (const std::string coordinator : {"peer-1001", ""}) {
      const uint64_t step = static_cast<uint64_t>(n) * 2 + (coordinator.empty() ? 1 : 0);
      ASSERT_TRUE(testing::WriteObject(*p.h.tier, "job", step, "a", "aaaa").ok());
      ASSERT_TRUE(p.h.tier->CommitStep("job", step, 2, false, {}, StepSpan{members, placement, coordinator}).ok());
      Result<Manifest> stored = p.h.tier->GetManifest("job", step);
      ASSERT_TRUE(stored.ok()) << stored.status().ToString();
      (coordinator.empty() ? coordinator_sizes : part_sizes).push_back(stored->ToJson().size());
      EXPECT_EQ(stored->SpansNodes(), true);
      EXPECT_EQ(stored->MemberCount(), static_cast<size_t>(n));
    }
    std::printf("[part-manifest] N=%d non-coordinator %llu B, coordinator %llu B\n", n,
                static_cast<unsigned long long>(part_sizes.back()),
                static_cast<unsigned long long>(coordinator_sizes.back()));
  }
  // 3 bytes: the digits of the members' count and of the step number.
  EXPECT_LE(part_sizes.back(), part_sizes.front() + 3) << "a non-coordinator part of 64 members is "
                                                       << part_sizes.back() << " B, of 2 members "
                                                       << part_sizes.front() << " B";
  EXPECT_GT(coordinator_sizes.back(), coordinator_sizes.front() + 62 * 10);  // the list and the ring
}

TEST(PersisterTest, DamagedMemoryCopyIsNotPersisted) {
  PersistHarness p;
  p.h.tier->SetPersistHook([](const std::string&, uint64_t) {});  // hold the job back
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  {
    Result<UniqueFd> fd = OpenFile(Layout::ObjectPath(p.h.StepDir("job", 1), "a"), O_RDWR);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(PwriteAll(fd->get(), "X", 1, 0, "a").ok());
  }
  p.persister->Enqueue("job", 1);
  PersistStatus s = p.Wait("job", 1);
  EXPECT_EQ(s.state, PersistState::kFailed);
  EXPECT_EQ(s.error.code(), Code::kCorruption);
  EXPECT_FALSE(p.mem->ReadManifest("job", 1).ok());
}

TEST(PersisterTest, LeftoversOfAnInterruptedPersistAreCleared) {
  PersistHarness p;
  // An earlier agent died after putting a stray object of step 1.
  ASSERT_TRUE(p.mem->PutObject("job", 1, "stray.tmp", "x", 1).ok());
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "aaaa"}}, true).ok());
  EXPECT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  EXPECT_EQ(p.mem->ObjectSize("job", 1, "stray.tmp").status().code(), Code::kNotFound);
  EXPECT_TRUE(p.mem->ObjectSize("job", 1, "a").ok());
}

TEST(PersisterTest, DurableRetentionKeepsTheNewest) {
  PersistHarness p(/*durable_keep=*/2, /*keep_last=*/5);
  for (uint64_t s = 1; s <= 4; ++s) {
    ASSERT_TRUE(WriteStep(*p.h.tier, "job", s, {{"a", std::to_string(s)}}, true).ok());
    ASSERT_EQ(p.Wait("job", s).state, PersistState::kDurable);
  }
  Result<std::vector<uint64_t>> steps = p.mem->ListCommittedSteps("job");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<uint64_t>{3, 4}));
}

TEST(PersisterTest, StopLeavesUnstartedJobsQueued) {
  PersistHarness p;
  p.h.tier->SetPersistHook([](const std::string&, uint64_t) {});
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "a"}}, true).ok());
  p.persister->Stop(std::chrono::milliseconds(100));
  p.persister->Enqueue("job", 1);  // refused after Stop
  std::vector<StepInfo> steps = p.h.tier->ListSteps("job");
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].persist, PersistState::kQueued);
  EXPECT_TRUE(StatPath(Layout::MarkerPath(p.h.StepDir("job", 1)))->exists);
}

TEST(PersisterTest, OnlyTransientCodesAreRetried) {
  EXPECT_TRUE(IsRetriable(IoError("x")));
  EXPECT_TRUE(IsRetriable(Unavailable("x")));
  EXPECT_TRUE(IsRetriable(Timeout("x")));
  EXPECT_FALSE(IsRetriable(Corruption("x")));
  EXPECT_FALSE(IsRetriable(FailedPrecondition("x")));
  EXPECT_FALSE(IsRetriable(InvalidArgument("x")));
}

// Issue 16 item 1: a step whose persistence failed (durable filesystem full)
// was evicted by ordinary retention three saves later: its only copy, gone.
TEST(PersisterTest, AStepWhosePersistFailedIsNeitherRetainedAwayNorEvicted) {
  PersistHarness p(/*durable_keep=*/0, /*keep_last=*/1);
  p.store->FailEveryCall(StoreOp::kPutObject, ResourceExhausted("No space left on device"));
  const std::string data(20u << 20, 'f');
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", data}}, true).ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kFailed);
  p.store->ClearFaults();
  for (uint64_t s = 2; s <= 4; ++s) ASSERT_TRUE(WriteStep(*p.h.tier, "job", s, {{"a", "x"}}).ok());
  EXPECT_TRUE(p.h.tier->HasCommitted("job", 1)) << "retention dropped the only copy of a step that failed to persist";
  EXPECT_FALSE(p.h.tier->HasCommitted("job", 2));
  // When the budget (64 MiB) forces it, the writer gets a clear error naming
  // the step kept, and the step stays.
  Result<CreatedObject> big = p.h.tier->CreateObject("job", 5, "a", 50u << 20, 1);
  ASSERT_EQ(big.status().code(), Code::kResourceExhausted) << big.status().ToString();
  EXPECT_NE(big.status().message().find("job/1 failed to persist"), std::string::npos) << big.status().ToString();
  EXPECT_NE(big.status().message().find("No space left"), std::string::npos) << big.status().ToString();
  EXPECT_TRUE(p.h.tier->HasCommitted("job", 1));
  ASSERT_TRUE(p.h.tier->AbortStep("job", 5).ok());
  // Persisted again once the medium has room, retention may then drop it.
  ASSERT_TRUE(p.h.tier->RequestPersist("job", 1).ok());
  for (int i = 0; i < 2000 && p.h.tier->HasCommitted("job", 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(p.h.tier->HasCommitted("job", 1));
  EXPECT_TRUE(p.mem->ReadManifest("job", 1).ok());
}

// Issue 16 item 3: a durable step whose durable manifest was deleted: persist
// answered "is durable" and wrote nothing, and retention then dropped the
// memory copy, the last one left.
TEST(PersisterTest, ADurableStepDeletedBehindTheAgentsBackIsWrittenAgainNotLost) {
  PersistHarness p(/*durable_keep=*/0, /*keep_last=*/1);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "one"}}, true).ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  ASSERT_TRUE(p.mem->DeleteStep("job", 1).ok());  // someone cleans the bucket
  // Asking to persist it finds out and writes it again.
  ASSERT_TRUE(p.h.tier->RequestPersist("job", 1).ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  ASSERT_TRUE(p.mem->ReadManifest("job", 1).ok()) << "persist answered durable and wrote nothing";
  // Deleted again; retention is about to drop the memory copy: the persister
  // checks the durable copy first and writes it again.
  ASSERT_TRUE(p.mem->DeleteStep("job", 1).ok());
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 2, {{"a", "two"}}).ok());
  for (int i = 0; i < 2000 && p.h.tier->HasCommitted("job", 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(p.h.tier->HasCommitted("job", 1));
  Result<Manifest> back = p.mem->ReadManifest("job", 1);
  ASSERT_TRUE(back.ok()) << "retention dropped the last copy: " << back.status().ToString();
  std::string bytes(3, '\0');
  ASSERT_TRUE(p.mem->ReadObject("job", 1, "a", 0, bytes.data(), bytes.size()).ok());
  EXPECT_EQ(bytes, "one");
}

// Decision 167: retention's check of a step already durable, before its
// memory copy goes, finds the copy in place and writes nothing: it is not a
// second persist of the step in the metrics (it was counted once per step
// dropped by retention, with all its bytes).
TEST(PersisterTest, RetentionsCheckOfADurableCopyInPlaceIsNotCountedAsAPersist) {
  PersistHarness p(/*durable_keep=*/0, /*keep_last=*/1);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 1, {{"a", "one"}}, true).ok());
  ASSERT_EQ(p.Wait("job", 1).state, PersistState::kDurable);
  ASSERT_EQ(p.h.metrics.persist.ok.load(), 1u);
  const uint64_t reads_before = p.store->CallCount(StoreOp::kReadManifest);
  ASSERT_TRUE(WriteStep(*p.h.tier, "job", 2, {{"a", "two!"}}, true).ok());
  ASSERT_EQ(p.Wait("job", 2).state, PersistState::kDurable);
  for (int i = 0; i < 2000 && p.h.tier->HasCommitted("job", 1); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(p.h.tier->HasCommitted("job", 1)) << "retention kept step 1";
  // Step 1's durable copy was looked at (step 2's persist reads its own manifest too).
  EXPECT_GE(p.store->CallCount(StoreOp::kReadManifest) - reads_before, 2u);
  EXPECT_EQ(p.h.metrics.persist.ok.load(), 2u) << "a check that wrote nothing was counted as a persist";
  EXPECT_EQ(p.h.metrics.persist.bytes.load(), 3u + 4u);
  EXPECT_TRUE(p.mem->ReadManifest("job", 1).ok());
}

// A durable step deleted on purpose (durable retention) is not written again
// when memory retention drops it.
TEST(PersisterTest, DurableRetentionDeletionsAreNotWrittenBackByMemoryRetention) {
  PersistHarness p(/*durable_keep=*/1, /*keep_last=*/2);
  for (uint64_t s = 1; s <= 4; ++s) {
    ASSERT_TRUE(WriteStep(*p.h.tier, "job", s, {{"a", std::to_string(s)}}, true).ok());
    ASSERT_EQ(p.Wait("job", s).state, PersistState::kDurable);
  }
  for (int i = 0; i < 2000 && p.h.tier->ListSteps("job").size() > 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  p.persister->Stop(std::chrono::seconds(5));
  Result<std::vector<uint64_t>> steps = p.mem->ListCommittedSteps("job");
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<uint64_t>{4}));
  EXPECT_EQ(p.h.tier->ListSteps("job").size(), 2u);
}


// Decision 152: a step spanning nodes waits for the other members' parts
// without holding a persist thread. The writer_stuck of the fault campaign
// (docs/reliability.md, run L): two DCP steps whose coordinator failed after
// this node committed its part held both persist threads for --parts-wait
// (an hour), and every other step of the node waited behind them.
namespace parts_wait {

// The part of node "other" of job/step: its one object in the durable tier, then its part record.
void UploadOthersPart(MemObjectStore& mem, uint64_t step) {
  Manifest part;
  part.ns = "job";
  part.step = step;
  part.node = "other";
  part.members = {"node-t", "other"};
  part.objects.push_back({"b", 2, testing::ChecksumOf("bb"), "other"});
  ASSERT_TRUE(mem.PutObject("job", step, "b", "bb", 2).ok());
  const std::string record = EncodePartRecord(part);
  ASSERT_TRUE(mem.PutObject("job", step, PartRecordName("other"), record.data(), record.size()).ok());
}

void CommitThisNodesPart(PersistHarness& p, uint64_t step) {
  ASSERT_TRUE(testing::WriteObject(*p.h.tier, "job", step, "a", "aaaa").ok());
  ASSERT_TRUE(p.h.tier->CommitStep("job", step, 2, /*persist=*/true, {}, StepSpan{{"node-t", "other"}, ""}).ok());
}

bool AwaitParked(Persister& persister, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (persister.awaiting_parts() != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

PersistState StateOf(PersistHarness& p, const std::string& ns, uint64_t step) {
  Result<PersistStatus> s = p.h.tier->WaitPersist(ns, step, std::chrono::milliseconds(0));
  return s.ok() ? s->state : PersistState::kNone;
}

}  // namespace parts_wait

TEST(PersisterTest, StepsWaitingForAnotherNodesPartHoldNoPersistThread) {
  PersistHarness p;  // two persist threads
  // Two parts whose other member never uploads its own, one more than there are threads.
  for (uint64_t step : {1, 2, 3}) parts_wait::CommitThisNodesPart(p, step);
  ASSERT_TRUE(parts_wait::AwaitParked(*p.persister, 3)) << p.persister->awaiting_parts() << " parked";
  // A step of this node alone is persisted at once beside them.
  ASSERT_TRUE(WriteStep(*p.h.tier, "solo", 1, {{"x", "xyz"}}, true).ok());
  PersistStatus solo = p.Wait("solo", 1);
  EXPECT_EQ(solo.state, PersistState::kDurable) << solo.error.ToString();
  EXPECT_TRUE(p.mem->ReadManifest("solo", 1).ok());
  for (uint64_t step : {1, 2, 3}) {
    EXPECT_EQ(parts_wait::StateOf(p, "job", step), PersistState::kRunning) << "job/" << step;
    EXPECT_FALSE(p.mem->ReadManifest("job", step).ok()) << "job/" << step << " committed with a part missing";
  }
  // Between two looks no persist thread is busy with them (a look lasts a store read or two).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (p.persister->running() != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << p.persister->running() << " persist threads stay busy";
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(PersisterTest, AParkedStepIsMergedOnceTheOtherPartIsDurable) {
  PersistHarness p;
  parts_wait::CommitThisNodesPart(p, 2);  // step 2: this node merges (MergeTurn 0)
  ASSERT_TRUE(parts_wait::AwaitParked(*p.persister, 1));
  parts_wait::UploadOthersPart(*p.mem, 2);
  PersistStatus s = p.Wait("job", 2);
  EXPECT_EQ(s.state, PersistState::kDurable) << s.error.ToString();
  Result<Manifest> durable = p.mem->ReadManifest("job", 2);
  ASSERT_TRUE(durable.ok()) << durable.status().ToString();
  EXPECT_EQ(durable->objects.size(), 2u);
  EXPECT_EQ(p.persister->awaiting_parts(), 0u);
}

TEST(PersisterTest, AParkedStepFailsAfterTheWaitLimitNamingTheMissingPart) {
  PersistHarness p;
  PartsOptions parts;
  parts.wait_limit = std::chrono::milliseconds(300);
  p.persister->SetParts(parts);
  parts_wait::CommitThisNodesPart(p, 2);
  PersistStatus s = p.Wait("job", 2);
  EXPECT_EQ(s.state, PersistState::kFailed);
  EXPECT_NE(s.error.message().find("still lacks the parts of nodes other"), std::string::npos) << s.error.ToString();
  EXPECT_EQ(p.persister->awaiting_parts(), 0u);
}

TEST(PersisterTest, StopReturnsAParkedStepToQueuedWithItsMarker) {
  PersistHarness p;
  parts_wait::CommitThisNodesPart(p, 2);
  ASSERT_TRUE(parts_wait::AwaitParked(*p.persister, 1));
  p.persister->Stop(std::chrono::milliseconds(0));
  EXPECT_EQ(p.persister->awaiting_parts(), 0u);
  EXPECT_EQ(parts_wait::StateOf(p, "job", 2), PersistState::kQueued);
  EXPECT_TRUE(StatPath(Layout::MarkerPath(p.h.StepDir("job", 2)))->exists);
}

TEST(PersisterTest, ADeleteByHandEndsTheWaitOfAParkedPart) {
  PersistHarness p;
  parts_wait::CommitThisNodesPart(p, 2);
  ASSERT_TRUE(parts_wait::AwaitParked(*p.persister, 1));
  // While it waits the tier refuses a delete: the step is being persisted.
  EXPECT_FALSE(p.h.tier->DeleteStep("job", 2).ok());
  // A look may be in flight: the wait is found parked again within a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!p.persister->CancelAwaitingParts("job", 2)) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(p.persister->awaiting_parts(), 0u);
  EXPECT_EQ(parts_wait::StateOf(p, "job", 2), PersistState::kQueued);
  Result<bool> deleted = p.h.tier->DeleteStep("job", 2);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_TRUE(*deleted);
  EXPECT_FALSE(p.persister->CancelAwaitingParts("job", 2));
}

}  // namespace
}  // namespace tierckpt::agent
