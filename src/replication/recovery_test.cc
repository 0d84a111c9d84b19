// MemoryTier::Recover — what an agent restart (or kill -9) finds on tmpfs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "os/files.h"
#include "replication/replica_tiers.h"
#include "tier/memory_tier.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ReadFd;
using testing::TierHarness;
using testing::WriteObject;
using testing::WriteStep;

std::string ReadObject(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name) {
  Result<OpenedObject> o = tier.OpenObject(ns, step, name);
  if (!o.ok()) return "<" + o.status().ToString() + ">";
  return ReadFd(o->fd.get());
}

TEST(RecoveryTest, CommittedStepsSurviveAndPartialOnesAreDropped) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", std::string(5000, 'a')}, {"d/b", "bb"}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "other", 3, {{"x", "xx"}}).ok());
  ASSERT_TRUE(WriteObject(*h.tier, "job", 2, "a", std::string(8192, 'p')).ok());  // never committed
  h.verifier->Drain();

  Result<RecoveryReport> r = h.Reopen();  // the old agent is gone; a new one scans the root
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->committed_steps, 2u);
  EXPECT_EQ(r->partial_dropped, 1u);
  EXPECT_EQ(r->damaged_dropped, 0u);
  EXPECT_TRUE(r->errors.empty());
  MemoryTier& t = *h.tier;
  EXPECT_TRUE(t.HasCommitted("job", 1));
  EXPECT_TRUE(t.HasCommitted("other", 3));
  EXPECT_FALSE(StatPath(h.PartialDir("job", 2))->exists);
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), std::string(5000, 'a'));
  EXPECT_EQ(ReadObject(t, "job", 1, "d/b"), "bb");
  TierStats s = t.Stats();
  EXPECT_EQ(s.object_bytes, 5004u);
  // The partial step's file was unlinked, not pooled: recovery cannot tell a
  // sealed object from one a surviving writer still maps (decision 77).
  EXPECT_EQ(s.pool_segments, 0u);
  EXPECT_EQ(s.pool_bytes, 0u);
  // The step number is free again and the old steps are not in the way.
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"a", "new"}}).ok());
}

TEST(RecoveryTest, TruncatedObjectOrDamagedManifestDropsTheStep) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", std::string(4096, '1')}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 2, {{"a", std::string(4096, '2')}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 3, {{"a", std::string(4096, '3')}}).ok());
  ASSERT_EQ(::truncate(Layout::ObjectPath(h.StepDir("job", 2), "a").c_str(), 100), 0);
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(h.StepDir("job", 3)), "{\"format\": 1", false).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->committed_steps, 1u);
  EXPECT_EQ(r->damaged_dropped, 2u);
  ASSERT_EQ(r->errors.size(), 2u);
  EXPECT_NE(r->errors[0].message().find("truncated"), std::string::npos) << r->errors[0].ToString();
  EXPECT_EQ(r->errors[1].code(), Code::kCorruption);
  EXPECT_TRUE(h.tier->HasCommitted("job", 1));
  EXPECT_FALSE(h.tier->HasCommitted("job", 2));
  EXPECT_FALSE(h.tier->HasCommitted("job", 3));
  EXPECT_FALSE(StatPath(h.StepDir("job", 2))->exists);
  EXPECT_FALSE(StatPath(h.StepDir("job", 3))->exists);
}

TEST(RecoveryTest, MissingObjectAndMisplacedManifestDropTheStep) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", "a"}, {"b", "b"}}).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 2, {{"a", "a"}}).ok());
  ASSERT_EQ(::unlink(Layout::ObjectPath(h.StepDir("job", 1), "b").c_str()), 0);
  // Step 2's directory renamed to step 5: its manifest names another step.
  ASSERT_TRUE(RenamePath(h.StepDir("job", 2), h.StepDir("job", 5)).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->committed_steps, 0u);
  EXPECT_EQ(r->damaged_dropped, 2u);
}

TEST(RecoveryTest, PersistMarkerIsReEnqueued) {
  TierHarness h(64u << 20, 5, /*has_durable=*/true);
  h.tier->SetPersistHook([](const std::string&, uint64_t) {});  // the agent "dies" before persisting
  ASSERT_TRUE(WriteStep(*h.tier, "job", 4, {{"a", "a"}}, /*persist=*/true).ok());
  ASSERT_TRUE(WriteStep(*h.tier, "job", 5, {{"a", "a"}}).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->persist_pending.size(), 1u);
  EXPECT_EQ(r->persist_pending[0], (std::pair<std::string, uint64_t>("job", 4)));
  std::vector<StepInfo> steps = h.tier->ListSteps("job");
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].persist, PersistState::kQueued);
  EXPECT_EQ(steps[1].persist, PersistState::kNone);
  EXPECT_TRUE(h.tier->StartPersist("job", 4).ok());

  // Without a durable tier the marker stays on disk but nothing is queued.
  h.options.has_durable = false;
  r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->persist_pending.empty());
  EXPECT_TRUE(StatPath(Layout::MarkerPath(h.StepDir("job", 4)))->exists);
}

TEST(RecoveryTest, LeftoversAndTrashAreCleanedUp) {
  TierHarness h(64u << 20, 5);
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", "a"}}).ok());
  const std::string step_dir = h.StepDir("job", 1);
  ASSERT_TRUE(WriteFileAtomic(JoinPath(step_dir, "_tierckpt_persist.tmp.1.0"), "", false).ok());
  ASSERT_TRUE(MakeDirs(h.dir.Sub("root/trash/7/sub")).ok());
  ASSERT_TRUE(WriteFileAtomic(h.dir.Sub("root/trash/7/sub/obj"), std::string(4096, 't'), false).ok());
  ASSERT_TRUE(WriteFileAtomic(h.dir.Sub("root/ns/job/stray.tmp"), "x", false).ok());
  ASSERT_TRUE(MakeDirs(h.dir.Sub("root/ns/bad name")).ok());
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(h.tier->HasCommitted("job", 1));
  EXPECT_FALSE(StatPath(JoinPath(step_dir, "_tierckpt_persist.tmp.1.0"))->exists);
  EXPECT_FALSE(StatPath(h.dir.Sub("root/trash"))->exists);
  EXPECT_FALSE(StatPath(h.dir.Sub("root/ns/job/stray.tmp"))->exists);
  EXPECT_TRUE(StatPath(h.dir.Sub("root/ns/bad name"))->exists);  // not ours to judge: left alone
  EXPECT_EQ(h.tier->Stats().pool_bytes, 0u);  // the trash unlinked, not pooled (decision 77)
}

TEST(RecoveryTest, LoweredBudgetEvictsByPolicy) {
  TierHarness h(64u << 20, 10);
  for (uint64_t s = 1; s <= 4; ++s) ASSERT_TRUE(WriteStep(*h.tier, "job", s, {{"a", std::string(300 << 10, 'a')}}).ok());
  h.options.budget_bytes = 1u << 20;
  Result<RecoveryReport> r = h.Reopen();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(h.tier->HasCommitted("job", 1));
  EXPECT_TRUE(h.tier->HasCommitted("job", 4));
  EXPECT_LE(h.tier->Stats().used_bytes, 1u << 20);
}

// ---- Issue 16 (8): links planted under the root are never followed ----
//
// Each test plants a symbolic link where the layout expects a directory or a
// file, pointing at a directory outside the root whose files look like what
// recovery recycles, removes or adopts; the old recovery followed the link
// and deleted (or moved into the pool) the files outside the root.

// Every entry below dir (links not followed) with its content ("<dir>" for
// directories, "-> target" for links).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string rel = std::filesystem::relative(e.path(), dir).string();
    if (e.is_symlink()) {
      out[rel] = "-> " + std::filesystem::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      out[rel] = "<dir>";
    } else {
      Result<std::string> text = ReadFileToString(e.path().string(), 1u << 20);
      out[rel] = text.ok() ? *text : "<" + text.status().ToString() + ">";
    }
  }
  return out;
}

bool IsLink(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

// A TierHarness with one committed step (job/1) and a directory outside the
// root holding bait for every kind of walk: loose files, a pool segment, a
// namespace, a step and a .partial dir.
class PlantedLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteStep(*h_.tier, "job", 1, {{"a", std::string(4096, 'a')}}).ok());
    outside_ = h_.dir.Sub("outside");
    for (const char* d :
         {"sub", "job/step_0000000001", "ns/job/step_0000000002.partial", "pool", "trash/3"}) {
      ASSERT_TRUE(MakeDirs(JoinPath(outside_, d)).ok());
    }
    for (const char* f :
         {"victim", "sub/victim", "seg_1", "job/victim", "job/step_0000000001/a", "ns/job/victim",
          "ns/job/step_0000000002.partial/a", "pool/victim", "pool/seg_9", "trash/3/a"}) {
      ASSERT_TRUE(WriteFileAtomic(JoinPath(outside_, f), std::string(4096, 'v'), false).ok());
    }
    before_ = Snapshot(outside_);
  }
  // Plants root/<rel> -> outside_ (or target).
  void Plant(const std::string& rel, const std::string& target = "") {
    std::string path = h_.dir.Sub("root/" + rel);
    ASSERT_TRUE(MakeDirs(DirName(path)).ok());
    ASSERT_EQ(::symlink((target.empty() ? outside_ : target).c_str(), path.c_str()), 0) << path;
  }
  // Recovery succeeded, kept job/1, removed the link and left outside alone.
  void ExpectLinkRemovedAndOutsideUntouched(const std::string& rel) {
    Result<RecoveryReport> r = h_.Reopen();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(Snapshot(outside_), before_) << "recovery changed files outside its root through " << rel;
    EXPECT_FALSE(IsLink(h_.dir.Sub("root/" + rel))) << rel << " is still a link";
    EXPECT_TRUE(h_.tier->HasCommitted("job", 1)) << "the rest of recovery went on";
    EXPECT_EQ(ReadFd(h_.tier->OpenObject("job", 1, "a")->fd.get()), std::string(4096, 'a'));
    for (const StepInfo& s : h_.tier->ListSteps(""))
      EXPECT_EQ(s.ns, "job") << "adopted " << s.ns << "/" << s.step;
    // Nothing from outside was adopted into the pool either.
    EXPECT_EQ(h_.tier->Stats().pool_bytes, 0u);
  }

  TierHarness h_{64u << 20, 5};
  std::string outside_;
  std::map<std::string, std::string> before_;
};

TEST_F(PlantedLinkTest, SymlinkedStepDirDoesNotDeleteFilesOutsideTheRoot) {
  Plant("ns/job/step_0000000007");
  ExpectLinkRemovedAndOutsideUntouched("ns/job/step_0000000007");
}

TEST_F(PlantedLinkTest, SymlinkedNamespaceDirDoesNotDeleteFilesOutsideTheRoot) {
  Plant("ns/evil");
  ExpectLinkRemovedAndOutsideUntouched("ns/evil");
  Plant("ns/evil2", JoinPath(outside_, "job"));  // a namespace with a step dir in it
  ExpectLinkRemovedAndOutsideUntouched("ns/evil2");
}

TEST_F(PlantedLinkTest, SymlinkedPartialDirDoesNotDeleteFilesOutsideTheRoot) {
  Plant("ns/job/step_0000000008.partial");
  ExpectLinkRemovedAndOutsideUntouched("ns/job/step_0000000008.partial");
}

TEST_F(PlantedLinkTest, SymlinkedTrashDoesNotDeleteFilesOutsideTheRoot) {
  Plant("trash");
  ExpectLinkRemovedAndOutsideUntouched("trash");
}

TEST_F(PlantedLinkTest, SymlinkedPoolDoesNotDeleteFilesOutsideTheRoot) {
  ASSERT_TRUE(RemoveTree(h_.dir.Sub("root/pool")).ok());
  Plant("pool", JoinPath(outside_, "pool"));
  ExpectLinkRemovedAndOutsideUntouched("pool");
  Plant("pool/seg_5", JoinPath(outside_, "seg_1"));  // a link as a segment
  ExpectLinkRemovedAndOutsideUntouched("pool/seg_5");
}

TEST_F(PlantedLinkTest, SymlinkedNamespacesDirDoesNotDeleteFilesOutsideTheRoot) {
  ASSERT_TRUE(RemoveTree(h_.dir.Sub("root/ns")).ok());
  Plant("ns", JoinPath(outside_, "ns"));
  Result<RecoveryReport> r = h_.Reopen();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Snapshot(outside_), before_);
  EXPECT_FALSE(IsLink(h_.dir.Sub("root/ns")));
  EXPECT_TRUE(h_.tier->ListSteps("").empty());
  ASSERT_TRUE(WriteStep(*h_.tier, "job", 2, {{"a", "new"}}).ok());  // a fresh ns dir works
  EXPECT_EQ(Snapshot(outside_), before_);
}

TEST_F(PlantedLinkTest, LinksInsideACommittedStepAreNeverFollowed) {
  const std::string step = h_.StepDir("job", 1);
  // A leftover link, a linked subdirectory, and (in step 2) an object reached
  // through a linked subdirectory of the right size: never trusted.
  Plant("ns/job/step_0000000001/leftover", JoinPath(outside_, "victim"));
  Plant("ns/job/step_0000000001/subdir");
  ASSERT_TRUE(WriteStep(*h_.tier, "job", 2, {{"d/a", std::string(4096, 'd')}}).ok());
  ASSERT_TRUE(RemoveTree(h_.dir.Sub("root/ns/job/step_0000000002/d")).ok());
  Plant("ns/job/step_0000000002/d", JoinPath(outside_, "job/step_0000000001"));
  before_ = Snapshot(outside_);
  Result<RecoveryReport> r = h_.Reopen();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(Snapshot(outside_), before_);
  EXPECT_TRUE(h_.tier->HasCommitted("job", 1));
  EXPECT_FALSE(Exists(JoinPath(step, "leftover")));
  EXPECT_FALSE(Exists(JoinPath(step, "subdir")));
  EXPECT_FALSE(h_.tier->HasCommitted("job", 2)) << "an object outside the root was taken for the step's own";
  EXPECT_FALSE(Exists(h_.StepDir("job", 2)));
  ASSERT_EQ(r->damaged_dropped, 1u);
}

TEST_F(PlantedLinkTest, SymlinkedRootIsRefused) {
  std::string link = h_.dir.Sub("linked-root");
  ASSERT_EQ(::symlink(outside_.c_str(), link.c_str()), 0);
  h_.options.root = link;
  Result<RecoveryReport> r = h_.Reopen();
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_NE(r.status().message().find("symbolic link"), std::string::npos) << r.status().ToString();
  EXPECT_EQ(Snapshot(outside_), before_);
}

TEST_F(PlantedLinkTest, SymlinkedReplicaRootDoesNotDeleteFilesOutsideTheRoot) {
  WorkQueue verifier("verify", 1);
  {
    Plant("replicas/node-x");
    ReplicaTiers replicas(h_.options, &verifier);
    EXPECT_TRUE(replicas.RecoverAll().ok());
    EXPECT_TRUE(replicas.Origins().empty());
    EXPECT_FALSE(IsLink(h_.dir.Sub("root/replicas/node-x")));
    EXPECT_EQ(Snapshot(outside_), before_);
    // A link planted before the first replica of a node is not followed either.
    Plant("replicas/node-y");
    Result<MemoryTier*> t = replicas.Get("node-y", /*create=*/true);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_FALSE(IsLink(h_.dir.Sub("root/replicas/node-y")));
    EXPECT_EQ(Snapshot(outside_), before_);
    replicas.Shutdown();
  }
  ASSERT_TRUE(RemoveTree(h_.dir.Sub("root/replicas")).ok());
  Plant("replicas");
  ReplicaTiers replicas(h_.options, &verifier);
  EXPECT_TRUE(replicas.RecoverAll().ok());
  EXPECT_FALSE(IsLink(h_.dir.Sub("root/replicas")));
  EXPECT_EQ(Snapshot(outside_), before_);
  replicas.Shutdown();
  verifier.Stop();
}

}  // namespace
}  // namespace tierckpt::agent
