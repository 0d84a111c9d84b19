// Scrubber (scrubber.h): a pass re-hashes every committed object and records
// its verification; a flipped byte is found, and repaired from the durable
// tier when it holds the step, or reported (recent errors, metrics) and kept
// when no other tier does; a flipped replica held for another node is found
// and dropped; the background thread finds a flip on its own.
#include "agent/scrubber.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "replication/replica_tiers.h"
#include "store/mem_store.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::ReadFd;
using testing::TierHarness;
using testing::WriteStep;

const std::string kScrubData = std::string(300000, 's') + "tail";

void Flip(const std::string& step_dir, const std::string& name, off_t offset = 777) {
  const std::string path = Layout::ObjectPath(step_dir, name);
  Result<UniqueFd> fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  char byte = 0;
  ASSERT_EQ(::pread(fd->get(), &byte, 1, offset), 1);
  byte = static_cast<char>(byte ^ 0x01);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, offset, path).ok());
}

void PutDurable(ObjectStore& store, const std::string& ns, uint64_t step,
                const std::map<std::string, std::string>& objects) {
  Manifest m;
  m.ns = ns;
  m.step = step;
  m.node = "node-t";
  for (const auto& [name, data] : objects) {
    ASSERT_TRUE(store.PutObject(ns, step, name, data.data(), data.size()).ok());
    m.objects.push_back({name, data.size(), ChecksumOf(data), "node-t"});
  }
  ASSERT_TRUE(store.CommitStep(m).ok());
}

struct ScrubHarness {
  explicit ScrubHarness(bool durable) : h(64u << 20, 3, durable) {}
  Scrubber Make(ObjectStore* store, std::chrono::milliseconds interval = std::chrono::milliseconds(0)) {
    path = std::make_unique<ReadPath>(ReadPathDeps{"node-t", h.tier.get(), store});
    ScrubberOptions o;
    o.interval = interval;
    o.priority = ThreadPriority::kNormal;
    return Scrubber(o, ScrubberDeps{h.tier.get(), path.get(), &errors, &h.metrics});
  }
  TierHarness h;
  RecentErrors errors{&h.metrics};
  std::unique_ptr<ReadPath> path;
};

uint64_t AgeOf(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name) {
  Result<OpenedObject> o = tier.OpenObject(ns, step, name);
  return o.ok() ? o->verified_age_ms : 0;
}

TEST(ScrubberTest, APassHashesEveryCommittedObjectAndRecordsItsVerification) {
  ScrubHarness s(false);
  ASSERT_TRUE(WriteStep(*s.h.tier, "job", 1, {{"a", kScrubData}, {"b", "bee"}}).ok());  // trusted: never verified
  ASSERT_TRUE(WriteStep(*s.h.tier, "other", 7, {{"c", kScrubData}}).ok());
  ASSERT_EQ(AgeOf(*s.h.tier, "job", 1, "a"), kNeverVerified);
  Scrubber scrub = s.Make(nullptr);
  ScrubReport r = scrub.ScrubOnce();
  EXPECT_EQ(r.steps, 2u);
  EXPECT_EQ(r.objects, 3u);
  EXPECT_EQ(r.corrupt, 0u);
  EXPECT_LT(AgeOf(*s.h.tier, "job", 1, "a"), 10'000u);
  EXPECT_LT(AgeOf(*s.h.tier, "other", 7, "c"), 10'000u);
  EXPECT_EQ(s.h.metrics.scrub_objects.load(), 3u);
  EXPECT_TRUE(s.errors.Snapshot().empty());
}

TEST(ScrubberTest, AFlippedByteIsRepairedFromTheDurableTier) {
  ScrubHarness s(true);
  MemObjectStore store("scrub-durable");
  const std::map<std::string, std::string> objects = {{"a", kScrubData}, {"b", std::string(5000, 'b')}};
  ASSERT_TRUE(WriteStep(*s.h.tier, "job", 2, objects).ok());
  PutDurable(store, "job", 2, objects);
  Flip(s.h.StepDir("job", 2), "a");
  Scrubber scrub = s.Make(&store);
  ScrubReport r = scrub.ScrubOnce();
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.repaired, 1u);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].find("job/2/a is corrupt"), std::string::npos) << r.findings[0];
  Result<OpenedObject> a = s.h.tier->OpenObject("job", 2, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ReadFd(a->fd.get()), kScrubData);
  EXPECT_LT(a->verified_age_ms, 10'000u);  // verified on the way in
  EXPECT_EQ(s.h.metrics.scrub_corrupt.load(), 1u);
  EXPECT_EQ(s.h.metrics.scrub_repaired.load(), 1u);
  std::vector<ErrorRecord> errs = s.errors.Snapshot();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].event, "scrub");
  EXPECT_NE(errs[0].message.find("durable tier"), std::string::npos) << errs[0].message;
  // The next pass finds nothing.
  ScrubReport again = scrub.ScrubOnce();
  EXPECT_EQ(again.corrupt, 0u);
  EXPECT_EQ(again.objects, 2u);
}

TEST(ScrubberTest, AFlipNoOtherTierCanReplaceIsReportedAndTheCopyKept) {
  ScrubHarness s(false);
  ASSERT_TRUE(WriteStep(*s.h.tier, "job", 3, {{"a", kScrubData}, {"b", "bee"}}).ok());
  Flip(s.h.StepDir("job", 3), "a");
  Scrubber scrub = s.Make(nullptr);
  ScrubReport r = scrub.ScrubOnce();
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.repaired, 0u);
  EXPECT_EQ(r.objects, 2u);  // the rest of the step is still scrubbed
  ASSERT_TRUE(s.h.tier->HasCommitted("job", 3));
  EXPECT_EQ(AgeOf(*s.h.tier, "job", 3, "a"), kNeverVerified);  // not marked: attested reads hash it
  EXPECT_LT(AgeOf(*s.h.tier, "job", 3, "b"), 10'000u);
  std::vector<ErrorRecord> errs = s.errors.Snapshot();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].event, "scrub");
  EXPECT_EQ(errs[0].code, "corruption");
  EXPECT_NE(errs[0].message.find("no other tier holds job/3"), std::string::npos) << errs[0].message;
  EXPECT_EQ(s.h.metrics.scrub_corrupt.load(), 1u);
  EXPECT_EQ(s.h.metrics.scrub_repaired.load(), 0u);
}

TEST(ScrubberTest, AFlippedReplicaHeldForAnotherNodeIsFoundAndDropped) {
  ScrubHarness s(false);
  ASSERT_TRUE(WriteStep(*s.h.tier, "job", 1, {{"own", kScrubData}}).ok());
  ReplicaTiers replicas(s.h.options, s.h.verifier.get());
  Result<MemoryTier*> origin = replicas.Get("node-o", /*create=*/true);
  ASSERT_TRUE(origin.ok()) << origin.status().ToString();
  ASSERT_TRUE(WriteStep(**origin, "job", 5, {{"a", kScrubData}, {"b", "bee"}}).ok());
  ASSERT_TRUE(WriteStep(**origin, "job", 6, {{"a", kScrubData}}).ok());
  Flip(Layout(JoinPath(replicas.dir(), "node-o")).StepDir("job", 5), "a");
  s.path = std::make_unique<ReadPath>(ReadPathDeps{"node-t", s.h.tier.get(), nullptr});
  ScrubberOptions o;
  o.interval = std::chrono::milliseconds(0);
  Scrubber scrub(o, ScrubberDeps{s.h.tier.get(), s.path.get(), &s.errors, &s.h.metrics, &replicas});
  ScrubReport r = scrub.ScrubOnce();
  EXPECT_EQ(r.steps, 3u);
  EXPECT_EQ(r.corrupt, 1u);
  EXPECT_EQ(r.repaired, 0u);
  EXPECT_EQ(r.replicas_dropped, 1u);
  ASSERT_EQ(r.findings.size(), 1u);
  EXPECT_NE(r.findings[0].find("replica of job/5/a held for node node-o"), std::string::npos)
      << r.findings[0];
  EXPECT_FALSE((*origin)->HasCommitted("job", 5));  // dropped
  EXPECT_TRUE((*origin)->HasCommitted("job", 6));   // the sound replica stays, verified
  Result<OpenedObject> six = (*origin)->OpenObject("job", 6, "a");
  ASSERT_TRUE(six.ok());
  EXPECT_LT(six->verified_age_ms, 10'000u);
  EXPECT_TRUE(s.h.tier->HasCommitted("job", 1));  // this node's own step is untouched
  EXPECT_EQ(s.h.metrics.scrub_corrupt.load(), 1u);
  std::vector<ErrorRecord> errs = s.errors.Snapshot();
  ASSERT_EQ(errs.size(), 1u);
  EXPECT_EQ(errs[0].event, "scrub_replica");
  EXPECT_EQ(errs[0].code, "corruption");
  EXPECT_NE(errs[0].message.find("was dropped"), std::string::npos) << errs[0].message;
  // The next pass finds nothing.
  ScrubReport again = scrub.ScrubOnce();
  EXPECT_EQ(again.corrupt, 0u);
  EXPECT_EQ(again.steps, 2u);
  replicas.Shutdown();
}

TEST(ScrubberTest, TheBackgroundThreadFindsAFlipWithinItsInterval) {
  ScrubHarness s(true);
  MemObjectStore store("scrub-thread");
  ASSERT_TRUE(WriteStep(*s.h.tier, "job", 4, {{"a", kScrubData}}).ok());
  PutDurable(store, "job", 4, {{"a", kScrubData}});
  Flip(s.h.StepDir("job", 4), "a");
  Scrubber scrub = s.Make(&store, std::chrono::milliseconds(100));
  scrub.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (s.h.metrics.scrub_repaired.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  scrub.Stop();
  EXPECT_EQ(s.h.metrics.scrub_repaired.load(), 1u);
  Result<OpenedObject> a = s.h.tier->OpenObject("job", 4, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(ReadFd(a->fd.get()), kScrubData);
}

}  // namespace
}  // namespace tierckpt::agent
