#include "tier/memory_tier.h"

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "common/names.h"
#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::InodeOf;
using testing::ReadFd;
using testing::TierHarness;
using testing::WriteObject;
using testing::WriteStep;

std::string Bytes(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
  return s;
}

std::string ReadObject(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name) {
  Result<OpenedObject> o = tier.OpenObject(ns, step, name);
  if (!o.ok()) {
    // Built with append: GCC 12 at -O3 warns (-Wrestrict) on "literal" + std::string&&.
    std::string err = "<";
    err.append(o.status().ToString()).append(">");
    return err;
  }
  return ReadFd(o->fd.get());
}

TEST(MemoryTierTest, CreateSealCommitRead) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  const std::string a = Bytes(100000, 'a'), b = Bytes(10, 'b');
  ASSERT_TRUE(t.BeginStep("job", 7, 1).ok());
  ASSERT_TRUE(WriteObject(t, "job", 7, "dir/b.bin", b).ok());
  ASSERT_TRUE(WriteObject(t, "job", 7, "a.distcp", a).ok());
  ASSERT_TRUE(WriteObject(t, "job", 7, "empty", "").ok());
  Result<Manifest> m = t.CommitStep("job", 7, 4, false, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->ns, "job");
  EXPECT_EQ(m->step, 7u);
  EXPECT_EQ(m->world_size, 4u);
  EXPECT_EQ(m->node, "node-t");
  ASSERT_EQ(m->objects.size(), 3u);
  EXPECT_EQ(m->objects[0].name, "a.distcp");  // sorted
  EXPECT_EQ(m->objects[1].name, "dir/b.bin");
  EXPECT_EQ(m->objects[0].checksum, ChecksumOf(a));
  EXPECT_EQ(m->objects[0].node, "node-t");
  EXPECT_EQ(m->TotalBytes(), a.size() + b.size());

  EXPECT_TRUE(StatPath(Layout::ManifestPath(h.StepDir("job", 7)))->exists);
  EXPECT_FALSE(StatPath(h.PartialDir("job", 7))->exists);
  EXPECT_EQ(ReadObject(t, "job", 7, "a.distcp"), a);
  EXPECT_EQ(ReadObject(t, "job", 7, "dir/b.bin"), b);
  EXPECT_EQ(ReadObject(t, "job", 7, "empty"), "");
  Result<OpenedObject> o = t.OpenObject("job", 7, "a.distcp");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->size, a.size());
  EXPECT_EQ(o->checksum, ChecksumOf(a));
  struct stat st;
  ASSERT_EQ(::stat(Layout::ObjectPath(h.StepDir("job", 7), "a.distcp").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(t.OpenObject("job", 7, "missing").status().code(), Code::kNotFound);
  EXPECT_EQ(t.OpenObject("job", 8, "a.distcp").status().code(), Code::kNotFound);
  EXPECT_EQ(t.Stats().object_bytes, a.size() + b.size());
}

TEST(MemoryTierTest, NothingIsVisibleBeforeCommitAndUnsealedObjectsBlockIt) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", "aaaa").ok());
  Result<CreatedObject> b = t.CreateObject("job", 1, "b", 4, 1);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(StatPath(h.StepDir("job", 1))->exists);
  EXPECT_FALSE(StatPath(Layout::ManifestPath(h.PartialDir("job", 1)))->exists);
  EXPECT_FALSE(t.HasCommitted("job", 1));
  EXPECT_EQ(t.OpenObject("job", 1, "a").status().code(), Code::kNotFound);

  Result<Manifest> m = t.CommitStep("job", 1, 1, false, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("\"b\""), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(StatPath(h.StepDir("job", 1))->exists);
  EXPECT_FALSE(StatPath(Layout::ManifestPath(h.PartialDir("job", 1)))->exists);

  ASSERT_TRUE(t.SealObject("job", 1, "b", 4, "").ok());  // the agent computes the checksum
  m = t.CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Find("b")->checksum, ChecksumOf(std::string(4, '\0')));
}

TEST(MemoryTierTest, ChecksumMismatchIsReportedByCommit) {
  TierHarness h;
  h.options.verify_on_seal = true;
  ASSERT_TRUE(h.Reopen().ok());
  MemoryTier& t = *h.tier;
  const std::string data = "payload";
  const std::string wrong = ChecksumOf("other");
  ASSERT_TRUE(WriteObject(t, "job", 2, "x", data, 1, wrong).ok());  // seal replies at once
  Result<Manifest> m = t.CommitStep("job", 2, 1, false, {});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kCorruption);
  EXPECT_NE(m.status().message().find("job/2/x"), std::string::npos);
  EXPECT_NE(m.status().message().find(wrong), std::string::npos);
  EXPECT_NE(m.status().message().find(ChecksumOf(data)), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(t.HasCommitted("job", 2));
  // Writing the object again (a re-create replaces a mismatched one) fixes it.
  ASSERT_TRUE(WriteObject(t, "job", 2, "x", data).ok());
  EXPECT_TRUE(t.CommitStep("job", 2, 1, false, {}).ok());
}

TEST(MemoryTierTest, TrustedChecksumWithoutVerifyOnSeal) {
  TierHarness h;  // verify_on_seal is off by default
  const std::string claimed = ChecksumOf("something else");
  ASSERT_TRUE(WriteObject(*h.tier, "job", 1, "x", "data", 1, claimed).ok());
  Result<Manifest> m = h.tier->CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->objects[0].checksum, claimed);
}

TEST(MemoryTierTest, SealChecksSizes) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  Result<CreatedObject> o = t.CreateObject("job", 1, "x", 100, 1);
  ASSERT_TRUE(o.ok());
  Status s = t.SealObject("job", 1, "x", 99, "");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("100"), std::string::npos);
  ASSERT_EQ(::ftruncate(o->fd.get(), 50), 0);  // resized behind the agent
  s = t.SealObject("job", 1, "x", 100, "");
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("50"), std::string::npos) << s.ToString();
  EXPECT_EQ(t.SealObject("job", 1, "nope", 1, "").code(), Code::kNotFound);
  EXPECT_EQ(t.SealObject("job", 9, "x", 1, "").code(), Code::kNotFound);
  EXPECT_EQ(t.SealObject("job", 1, "x", 100, "crc:1").code(), Code::kInvalidArgument);
}

TEST(MemoryTierTest, ObjectsAreWriteOnceButUnsealedOnesCanBeReplaced) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(t.CreateObject("job", 1, "x", 10, 1).ok());
  ASSERT_TRUE(WriteObject(t, "job", 1, "x", "0123456789abc").ok());  // replaces the unsealed one
  EXPECT_EQ(t.CreateObject("job", 1, "x", 5, 1).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(t.Stats().object_bytes, 13u);
  Result<Manifest> m = t.CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->objects[0].size, 13u);
  EXPECT_EQ(t.BeginStep("job", 1, 1).code(), Code::kAlreadyExists);
  EXPECT_EQ(t.CreateObject("job", 1, "y", 1, 1).status().code(), Code::kAlreadyExists);
  EXPECT_EQ(t.CommitStep("job", 1, 1, false, {}).status().code(), Code::kAlreadyExists);
}

TEST(MemoryTierTest, ExpectedObjectsMustMatch) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", "1").ok());
  ASSERT_TRUE(WriteObject(t, "job", 1, "b", "2").ok());
  Result<Manifest> m = t.CommitStep("job", 1, 2, false, {"a", "b", "c", "d"});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(m.status().message().find("\"c\", \"d\""), std::string::npos) << m.status().ToString();
  m = t.CommitStep("job", 1, 2, false, {"a"});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("\"b\""), std::string::npos) << m.status().ToString();
  EXPECT_EQ(t.CommitStep("job", 1, 2, false, {"a", "a"}).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(t.CommitStep("job", 1, 2, false, {"b", "a"}).ok());
  EXPECT_EQ(t.CommitStep("job", 5, 1, false, {}).status().code(), Code::kNotFound);
  ASSERT_TRUE(t.BeginStep("job", 6, 1).ok());
  EXPECT_EQ(t.CommitStep("job", 6, 1, false, {}).status().code(), Code::kFailedPrecondition);  // no objects
}

TEST(MemoryTierTest, HostileNamesAreRejectedBeforeAnyPath) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  for (const std::string& name : {std::string("../escape"), std::string("/abs"), std::string("a//b"),
                                  std::string("a\0b", 3), std::string("_tierckpt_manifest.json"),
                                  std::string(""), std::string("a/./b"), std::string(2000, 'x')}) {
    Result<CreatedObject> o = t.CreateObject("job", 1, name, 1, 1);
    EXPECT_EQ(o.status().code(), Code::kInvalidArgument) << name;
  }
  for (const std::string& ns : {std::string(".."), std::string("a/b"), std::string(""), std::string(200, 'n')}) {
    EXPECT_EQ(t.BeginStep(ns, 1, 1).code(), Code::kInvalidArgument) << ns;
    EXPECT_EQ(t.OpenObject(ns, 1, "x").status().code(), Code::kInvalidArgument) << ns;
  }
  EXPECT_EQ(t.BeginStep("job", kMaxStep + 1, 1).code(), Code::kInvalidArgument);
  EXPECT_FALSE(StatPath(h.dir.Sub("escape"))->exists);
  EXPECT_FALSE(StatPath(h.dir.Sub("root/escape"))->exists);
}

TEST(MemoryTierTest, FileAndDirectoryNamesCannotCollide) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", "x").ok());
  EXPECT_EQ(t.CreateObject("job", 1, "a/b", 1, 1).status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(WriteObject(t, "job", 1, "c/d", "y").ok());
  EXPECT_EQ(t.CreateObject("job", 1, "c", 1, 1).status().code(), Code::kInvalidArgument);
}

TEST(MemoryTierTest, RetentionKeepsTheLastKAndRecyclesSegments) {
  TierHarness h(64u << 20, /*keep_last=*/2);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"a", Bytes(8192, '1')}}).ok());
  const uint64_t ino = InodeOf(Layout::ObjectPath(h.StepDir("job", 1), "a"));
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"a", Bytes(8192, '2')}}).ok());
  ASSERT_TRUE(WriteStep(t, "job", 3, {{"a", Bytes(8192, '3')}}).ok());
  EXPECT_FALSE(t.HasCommitted("job", 1));
  EXPECT_TRUE(t.HasCommitted("job", 2));
  EXPECT_TRUE(t.HasCommitted("job", 3));
  EXPECT_FALSE(StatPath(h.StepDir("job", 1))->exists);
  TierStats s = t.Stats();
  EXPECT_EQ(s.pool_segments, 1u);
  EXPECT_EQ(s.pool_bytes, 8192u);
  EXPECT_EQ(s.used_bytes, 3u * 8192u);
  EXPECT_EQ(s.budget_evictions, 0u);  // retention's drops are not the budget's
  // The next object of that size reuses the evicted segment (same inode).
  Result<CreatedObject> o = t.CreateObject("job", 4, "a", 8192, 1);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(InodeOf(o->path), ino);
  EXPECT_EQ(t.Stats().pool_segments, 0u);
  EXPECT_EQ(ReadObject(t, "job", 3, "a"), Bytes(8192, '3'));
}

TEST(MemoryTierTest, EachObjectTakesTheSegmentOfItsNameFromTheLastRecycledStep) {
  // Two ranks' objects of one size: each rank's client keeps its mapping of the
  // file it wrote, so the pool hands each name its own old segment (decision 170)
  // whichever rank creates first.
  TierHarness h(64u << 20, /*keep_last=*/1);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"__0_0.distcp", Bytes(8192, '0')}, {"__1_0.distcp", Bytes(8192, '1')}}).ok());
  const uint64_t ino0 = InodeOf(Layout::ObjectPath(h.StepDir("job", 1), "__0_0.distcp"));
  const uint64_t ino1 = InodeOf(Layout::ObjectPath(h.StepDir("job", 1), "__1_0.distcp"));
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"__0_0.distcp", Bytes(8192, '2')}, {"__1_0.distcp", Bytes(8192, '3')}}).ok());
  ASSERT_EQ(t.Stats().pool_segments, 2u);  // step 1's files
  // Rank 1 first (the best fit alone would give it rank 0's, the lower id), then rank 0.
  Result<CreatedObject> r1 = t.CreateObject("job", 3, "__1_0.distcp", 8192, 1);
  ASSERT_TRUE(r1.ok());
  Result<CreatedObject> r0 = t.CreateObject("job", 3, "__0_0.distcp", 8192, 1);
  ASSERT_TRUE(r0.ok());
  EXPECT_EQ(InodeOf(r1->path), ino1);
  EXPECT_EQ(InodeOf(r0->path), ino0);
}

TEST(MemoryTierTest, DropObjectReplacesOneObjectOfAStepBeingWritten) {
  TierHarness h(64u << 20);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", Bytes(8192, '1')).ok());
  ASSERT_TRUE(WriteObject(t, "job", 1, "b", Bytes(100, 'b')).ok());
  const uint64_t used = t.Stats().object_bytes;
  ASSERT_TRUE(t.DropObject("job", 1, "a").ok());
  EXPECT_EQ(t.Stats().object_bytes, used - 8192);
  EXPECT_TRUE(t.DropObject("job", 1, "a").ok());                      // absent: nothing to do
  EXPECT_TRUE(t.DropObject("job", 9, "a").ok());                      // no such step
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", Bytes(8192, '2')).ok());  // written again under its name
  ASSERT_TRUE(t.CommitStep("job", 1, 1, false, {"a", "b"}).ok());
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), Bytes(8192, '2'));
  Status st = t.DropObject("job", 1, "a");
  EXPECT_EQ(st.code(), Code::kFailedPrecondition) << st.ToString();
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), Bytes(8192, '2'));
  ASSERT_TRUE(t.BeginStep("job", 2, 1, "w1").ok());
  EXPECT_EQ(t.DropObject("job", 2, "a", "w2").code(), Code::kAlreadyExists);
  EXPECT_EQ(t.DropObject("job", 2, "../x").code(), Code::kInvalidArgument);
}

TEST(MemoryTierTest, DropObjectWaitsForTheHashOfAnObjectSealedWithoutAChecksum) {
  TierHarness h(64u << 20);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", Bytes(4 << 20, 'x'), 1, "").ok());  // hashed by the verifier
  ASSERT_TRUE(t.DropObject("job", 1, "a").ok());
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", Bytes(4 << 20, 'y'), 1, "").ok());
  Result<Manifest> m = t.CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), Bytes(4 << 20, 'y'));
}

TEST(MemoryTierTest, ANamespaceKeepOverridesKeepLast) {
  TierHarness h(64u << 20, /*keep_last=*/1);
  MemoryTier& t = *h.tier;
  t.SetNamespaceKeep("many", 3);
  for (uint64_t step = 1; step <= 4; ++step) {
    ASSERT_TRUE(WriteStep(t, "many", step, {{"a", Bytes(100, 'a')}}).ok());
    ASSERT_TRUE(WriteStep(t, "one", step, {{"a", Bytes(100, 'a')}}).ok());
  }
  EXPECT_FALSE(t.HasCommitted("many", 1));
  EXPECT_TRUE(t.HasCommitted("many", 2) && t.HasCommitted("many", 3) && t.HasCommitted("many", 4));
  EXPECT_FALSE(t.HasCommitted("one", 3));
  EXPECT_TRUE(t.HasCommitted("one", 4));
  t.SetNamespaceKeep("many", 1);  // applied at once
  EXPECT_FALSE(t.HasCommitted("many", 3));
  EXPECT_TRUE(t.HasCommitted("many", 4));
}

TEST(MemoryTierTest, RetentionKeepsAStepCommittedOutOfOrderOnce) {
  TierHarness h(64u << 20, /*keep_last=*/1);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "job", 5, {{"a", "5"}}).ok());
  ASSERT_TRUE(WriteStep(t, "job", 3, {{"a", "3"}}).ok());
  EXPECT_TRUE(t.HasCommitted("job", 5));  // the newest is never evicted
  EXPECT_TRUE(t.HasCommitted("job", 3));  // just committed: kept this time
  ASSERT_TRUE(WriteStep(t, "job", 6, {{"a", "6"}}).ok());
  EXPECT_FALSE(t.HasCommitted("job", 3));
  EXPECT_FALSE(t.HasCommitted("job", 5));
  EXPECT_TRUE(t.HasCommitted("job", 6));
}

TEST(MemoryTierTest, BudgetPressureEvictsOldestFirstButNeverTheNewest) {
  const size_t kObj = 256 << 10;
  TierHarness h(/*budget=*/1u << 20, /*keep_last=*/10);
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteStep(t, "a", 1, {{"x", Bytes(kObj, 1)}}).ok());
  ASSERT_TRUE(WriteStep(t, "b", 1, {{"x", Bytes(kObj, 2)}}).ok());
  ASSERT_TRUE(WriteStep(t, "a", 2, {{"x", Bytes(kObj, 3)}}).ok());
  ASSERT_TRUE(WriteStep(t, "b", 2, {{"x", Bytes(kObj, 4)}}).ok());
  EXPECT_EQ(t.Stats().used_bytes, 4u * kObj);
  // Full: the oldest commit (a/1) goes first, into the pool, and is reused (decision 129).
  ASSERT_TRUE(WriteStep(t, "c", 1, {{"x", Bytes(kObj, 5)}}).ok());
  EXPECT_FALSE(t.HasCommitted("a", 1));
  EXPECT_TRUE(t.HasCommitted("b", 1));
  ASSERT_TRUE(WriteStep(t, "c", 2, {{"x", Bytes(kObj, 6)}}).ok());
  EXPECT_FALSE(t.HasCommitted("b", 1));
  // Now every namespace holds only its newest step, except c: c/1 goes next.
  ASSERT_TRUE(WriteStep(t, "d", 1, {{"x", Bytes(kObj, 7)}}).ok());
  EXPECT_FALSE(t.HasCommitted("c", 1));
  EXPECT_TRUE(t.HasCommitted("a", 2));
  EXPECT_TRUE(t.HasCommitted("b", 2));
  EXPECT_TRUE(t.HasCommitted("c", 2));
  EXPECT_TRUE(t.HasCommitted("d", 1));
  EXPECT_LE(t.Stats().used_bytes, 1u << 20);
}

// A budget that holds fewer steps than retention keeps: every save evicts the
// oldest step, whose file must become the new object (same inode: pages
// already faulted in, and mapped by the client that wrote them), not be
// unlinked while the new object faults in fresh pages (measured: 0.7 s against
// 3 ms for the object's create at 512 MiB).
TEST(MemoryTierTest, AStepEvictedForRoomHandsItsFileToTheObjectItMadeRoomFor) {
  const size_t kObj = 256 << 10;
  const uint64_t budget = 3 * kObj + 4096;
  TierHarness h(budget, /*keep_last=*/10);
  MemoryTier& t = *h.tier;
  std::vector<uint64_t> inodes;
  for (uint64_t step = 1; step <= 8; ++step) {
    ASSERT_TRUE(WriteStep(t, "job", step, {{"x", Bytes(kObj, static_cast<int>(step))}, {"m", Bytes(100, 'm')}}).ok())
        << step;
    inodes.push_back(InodeOf(Layout::ObjectPath(h.StepDir("job", step), "x")));
    if (step > 3) {
      EXPECT_FALSE(t.HasCommitted("job", step - 3)) << step;
      EXPECT_EQ(inodes[step - 1], inodes[step - 4]) << "step " << step << " did not take the evicted step's file";
    }
    EXPECT_LE(t.Stats().used_bytes, budget) << step;
  }
  for (uint64_t step = 6; step <= 8; ++step) {
    EXPECT_EQ(ReadObject(t, "job", step, "x"), Bytes(kObj, static_cast<int>(step)));
  }
  EXPECT_EQ(t.Stats().budget_evictions, 5u);  // steps 1-5, each for the next save; retention dropped none
}

TEST(MemoryTierTest, BudgetErrorWhenNothingCanBeEvictedLosesNothing) {
  TierHarness h(/*budget=*/1u << 20, /*keep_last=*/3);
  MemoryTier& t = *h.tier;
  const std::string old = Bytes(700 << 10, 'o');
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"x", old}}).ok());
  Result<CreatedObject> o = t.CreateObject("job", 2, "x", 500 << 10, 1);
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), Code::kResourceExhausted);
  EXPECT_NE(o.status().message().find("memory budget exhausted creating job/2/x (512000 bytes)"), std::string::npos)
      << o.status().ToString();
  EXPECT_NE(o.status().message().find("raise --memory-budget"), std::string::npos);
  EXPECT_EQ(ReadObject(t, "job", 1, "x"), old);
  // Larger than the whole budget: refused up front.
  EXPECT_EQ(t.CreateObject("job", 2, "y", 2u << 20, 1).status().code(), Code::kResourceExhausted);
  // Objects of the step being written are never evicted for its own siblings.
  ASSERT_TRUE(WriteObject(t, "job", 3, "a", Bytes(200 << 10, 'a')).ok());
  EXPECT_EQ(t.CreateObject("job", 3, "b", 200 << 10, 1).status().code(), Code::kResourceExhausted);
  EXPECT_TRUE(t.HasCommitted("job", 1));
}

TEST(MemoryTierTest, StepsWithPendingPersistenceAreNotEvicted) {
  TierHarness h(/*budget=*/1u << 20, /*keep_last=*/1, /*has_durable=*/true);
  MemoryTier& t = *h.tier;
  std::vector<std::pair<std::string, uint64_t>> hooked;
  t.SetPersistHook([&](const std::string& ns, uint64_t step) { hooked.emplace_back(ns, step); });
  ASSERT_TRUE(WriteStep(t, "job", 1, {{"x", Bytes(300 << 10, 1)}}, /*persist=*/true).ok());
  ASSERT_EQ(hooked.size(), 1u);
  EXPECT_TRUE(StatPath(Layout::MarkerPath(h.StepDir("job", 1)))->exists);
  ASSERT_TRUE(WriteStep(t, "job", 2, {{"x", Bytes(300 << 10, 2)}}).ok());
  ASSERT_TRUE(WriteStep(t, "job", 3, {{"x", Bytes(300 << 10, 3)}}).ok());
  EXPECT_TRUE(t.HasCommitted("job", 1));   // pending: kept by retention
  EXPECT_FALSE(t.HasCommitted("job", 2));  // evicted by retention
  // Budget pressure does not take it either.
  EXPECT_EQ(t.CreateObject("job", 4, "x", 500 << 10, 1).status().code(), Code::kResourceExhausted);
  EXPECT_TRUE(t.HasCommitted("job", 1));
  // Once durable, the persister is asked to check the durable copy before
  // the memory copy goes (it may be deleted behind the agent's back).
  Result<PersistLease> lease = t.StartPersist("job", 1);
  ASSERT_TRUE(lease.ok());
  lease->pin.Reset();
  t.FinishPersist("job", 1, Status::Ok());
  EXPECT_FALSE(StatPath(Layout::MarkerPath(h.StepDir("job", 1)))->exists);
  EXPECT_TRUE(t.HasCommitted("job", 1));
  ASSERT_EQ(hooked.size(), 2u);
  EXPECT_EQ(hooked[1], (std::pair<std::string, uint64_t>{"job", 1}));
  // Checked: it goes.
  lease = t.StartPersist("job", 1);
  ASSERT_TRUE(lease.ok());
  lease->pin.Reset();
  t.FinishPersist("job", 1, Status::Ok());
  EXPECT_FALSE(t.HasCommitted("job", 1));
  EXPECT_TRUE(t.HasCommitted("job", 3));
}

TEST(MemoryTierTest, AbortAndWriterDisconnectDropPartialSteps) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(WriteObject(t, "job", 1, "a", Bytes(4096, 'a'), /*conn=*/11).ok());
  ASSERT_TRUE(t.AbortStep("job", 1).ok());
  EXPECT_FALSE(StatPath(h.PartialDir("job", 1))->exists);
  // A hash job may still read the file: it is recycled once that is done.
  h.verifier->Drain();
  EXPECT_EQ(t.Stats().pool_segments, 1u);
  EXPECT_EQ(t.Stats().object_bytes, 0u);
  EXPECT_TRUE(ListDir(h.dir.Sub("root/trash")).ok() ? ListDir(h.dir.Sub("root/trash"))->empty() : true);
  EXPECT_TRUE(t.AbortStep("job", 1).ok());  // idempotent

  ASSERT_TRUE(WriteObject(t, "job", 2, "a", "a", /*conn=*/11).ok());
  ASSERT_TRUE(WriteObject(t, "job", 2, "b", "b", /*conn=*/12).ok());
  t.ReleaseWriter(11);  // another writer remains
  EXPECT_TRUE(StatPath(h.PartialDir("job", 2))->exists);
  t.ReleaseWriter(12);
  EXPECT_FALSE(StatPath(h.PartialDir("job", 2))->exists);
  EXPECT_EQ(t.CommitStep("job", 2, 1, false, {}).status().code(), Code::kNotFound);

  ASSERT_TRUE(WriteStep(t, "job", 3, {{"a", "a"}}).ok());
  t.ReleaseWriter(1);  // committed steps are not touched
  EXPECT_TRUE(t.HasCommitted("job", 3));
  EXPECT_EQ(t.AbortStep("job", 3).code(), Code::kFailedPrecondition);
}

TEST(MemoryTierTest, CommitWaitsForHashingOfLargeObjects) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  const std::string big = Bytes(24u << 20, 'z');
  ASSERT_TRUE(WriteObject(t, "job", 1, "big", big, 1, "").ok());
  ASSERT_TRUE(WriteObject(t, "job", 1, "big2", big, 1, ChecksumOf(big)).ok());
  Result<Manifest> m = t.CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->Find("big")->checksum, ChecksumOf(big));
}

TEST(MemoryTierTest, DeletePruneVerifyAndList) {
  TierHarness h(64u << 20, /*keep_last=*/5);
  MemoryTier& t = *h.tier;
  for (uint64_t s = 1; s <= 4; ++s) ASSERT_TRUE(WriteStep(t, "job", s, {{"a", Bytes(100, 'a' + s)}}).ok());
  ASSERT_TRUE(WriteObject(t, "job", 9, "w", "w").ok());
  std::vector<StepInfo> steps = t.ListSteps("job");
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_TRUE(steps[0].committed);
  EXPECT_FALSE(steps[4].committed);
  EXPECT_EQ(steps[4].step, 9u);

  Result<MemoryVerifyResult> v = t.VerifyStep("job", 4);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
  EXPECT_EQ(v->objects_checked, 1u);
  // Damage one byte behind the agent's back: Verify finds it.
  {
    Result<UniqueFd> fd = OpenFile(Layout::ObjectPath(h.StepDir("job", 4), "a"), O_RDWR);
    ASSERT_TRUE(fd.ok());
    ASSERT_TRUE(PwriteAll(fd->get(), "X", 1, 0, "a").ok());
  }
  v = t.VerifyStep("job", 4);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->errors.size(), 1u);
  EXPECT_NE(v->errors[0].find("hashes to"), std::string::npos);

  PruneResult p = t.Prune("job", 2);
  ASSERT_EQ(p.evicted.size(), 2u);
  EXPECT_EQ(p.evicted[0].second + p.evicted[1].second, 3u);  // steps 1 and 2
  EXPECT_TRUE(t.HasCommitted("job", 3));
  EXPECT_EQ(t.DeleteStep("job", 9).status().code(), Code::kFailedPrecondition);  // being written
  Result<bool> d = t.DeleteStep("job", 4);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(*d);
  d = t.DeleteStep("job", 4);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(*d);
  EXPECT_TRUE(t.HasCommitted("job", 3));
  EXPECT_EQ(t.GetManifest("job", 3)->objects.size(), 1u);
}

TEST(MemoryTierTest, PersistRequiresADurableTierAndCadenceMarksSteps) {
  {
    TierHarness h;
    ASSERT_TRUE(WriteObject(*h.tier, "job", 1, "a", "a").ok());
    EXPECT_EQ(h.tier->CommitStep("job", 1, 1, true, {}).status().code(), Code::kFailedPrecondition);
    EXPECT_TRUE(h.tier->CommitStep("job", 1, 1, false, {}).ok());
    EXPECT_EQ(h.tier->RequestPersist("job", 1).code(), Code::kFailedPrecondition);
  }
  TierHarness h(64u << 20, 10, /*has_durable=*/true, /*persist_every=*/2);
  std::vector<uint64_t> hooked;
  h.tier->SetPersistHook([&](const std::string&, uint64_t step) { hooked.push_back(step); });
  for (uint64_t s = 1; s <= 4; ++s) ASSERT_TRUE(WriteStep(*h.tier, "job", s, {{"a", "a"}}).ok());
  EXPECT_EQ(hooked, (std::vector<uint64_t>{2, 4}));
  ASSERT_TRUE(h.tier->RequestPersist("job", 3).ok());
  ASSERT_TRUE(h.tier->RequestPersist("job", 3).ok());  // already queued: no second job
  EXPECT_EQ(hooked, (std::vector<uint64_t>{2, 4, 3}));
  EXPECT_EQ(h.tier->RequestPersist("job", 99).code(), Code::kNotFound);
  Result<PersistStatus> w = h.tier->WaitPersist("job", 1, std::chrono::milliseconds(1));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->state, PersistState::kNone);
  w = h.tier->WaitPersist("job", 2, std::chrono::milliseconds(20));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->state, PersistState::kQueued);  // timed out while pending
}

TEST(MemoryTierTest, ShutdownWakesWaiters) {
  TierHarness h(64u << 20, 3, /*has_durable=*/true);
  h.tier->SetPersistHook([](const std::string&, uint64_t) {});
  ASSERT_TRUE(WriteStep(*h.tier, "job", 1, {{"a", "a"}}, true).ok());
  std::thread waiter([&] {
    Result<PersistStatus> w = h.tier->WaitPersist("job", 1, std::nullopt);
    EXPECT_EQ(w.status().code(), Code::kUnavailable);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  h.tier->Shutdown();
  waiter.join();
  EXPECT_EQ(h.tier->BeginStep("job", 2, 1).code(), Code::kUnavailable);
}

// Issue 16 item 7: a tmpfs shared with other tenants that fills after the
// agent started: CreateObject handed out a sparse file and the writer died of
// SIGBUS copying into its mapping. The space is reserved at create now.
TEST(MemoryTierTest, AFullSharedTmpfsFailsTheCreateInsteadOfKillingTheWriterWithSigbus) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a 4 MiB tmpfs needs root (CI runs as root)";
  TierHarness h;
  const std::string mnt = h.dir.Sub("small_shm");
  ASSERT_TRUE(MakeDirs(mnt, 0700).ok());
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=4m") != 0) {
    GTEST_SKIP() << "mount -t tmpfs refused here: " << ErrnoStatus("mount " + mnt).ToString();
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  h.options.root = mnt + "/root";
  ASSERT_TRUE(MakeDirs(h.options.root, 0700).ok());
  ASSERT_TRUE(h.Reopen().ok());
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(testing::WriteStep(t, "job", 1, {{"a", Bytes(1u << 20, 'a')}}).ok());
  {  // another tenant fills the mount
    Result<UniqueFd> other = OpenFile(mnt + "/nccl-segment", O_RDWR | O_CREAT, 0600);
    ASSERT_TRUE(other.ok());
    const std::string junk(2u << 20, 'j');
    ASSERT_TRUE(PwriteAll(other->get(), junk.data(), junk.size(), 0, "nccl-segment").ok());
  }
  const uint64_t before = t.Stats().object_bytes;
  Result<CreatedObject> big = t.CreateObject("job", 2, "a", 3u << 20, 1);
  ASSERT_FALSE(big.ok()) << "a sparse file was handed out on a full tmpfs";
  EXPECT_EQ(big.status().code(), Code::kResourceExhausted) << big.status().ToString();
  EXPECT_NE(big.status().message().find("no room left"), std::string::npos) << big.status().ToString();
  EXPECT_NE(big.status().message().find("job/2/a"), std::string::npos) << big.status().ToString();
  EXPECT_EQ(t.Stats().object_bytes, before);
  // The committed step is untouched and the next step that fits works.
  EXPECT_EQ(ReadObject(t, "job", 1, "a"), Bytes(1u << 20, 'a'));
  ASSERT_TRUE(t.AbortStep("job", 2).ok());
  ASSERT_TRUE(testing::WriteStep(t, "job", 3, {{"a", Bytes(4096, 'c')}}).ok());
}

// Issue 16 item 4: two writers saving one namespace and step at once (two
// jobs, or a job restarted while its old incarnation still runs) committed a
// step mixing both writers' objects. The first to begin owns the step.
TEST(MemoryTierTest, ASecondWriterOfAStepGetsAConflictAndNothingOfItLands) {
  TierHarness h;
  MemoryTier& t = *h.tier;
  ASSERT_TRUE(t.BeginStep("job", 5, /*conn=*/1, "job-a").ok());
  ASSERT_TRUE(WriteObject(t, "job", 5, "__0_0.distcp", Bytes(4096, 'a'), /*conn=*/1, "auto").ok());
  // Another rank of the same job joins on its own connection.
  ASSERT_TRUE(t.BeginStep("job", 5, /*conn=*/2, "job-a").ok());
  // The other job: every write request is refused, naming the owner.
  Status begin = t.BeginStep("job", 5, /*conn=*/3, "job-b");
  ASSERT_EQ(begin.code(), Code::kAlreadyExists) << begin.ToString();
  EXPECT_NE(begin.message().find("\"job-a\""), std::string::npos) << begin.ToString();
  EXPECT_NE(begin.message().find("nothing of yours was written"), std::string::npos) << begin.ToString();
  EXPECT_EQ(t.CreateObject("job", 5, "__1_0.distcp", 4096, 3, "job-b").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(t.CreateObject("job", 5, "__0_0.distcp", 4096, 3, "job-b").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(t.SealObject("job", 5, "__0_0.distcp", 4096, "", "job-b").code(), Code::kAlreadyExists);
  EXPECT_EQ(t.CommitStep("job", 5, 2, false, {}, {}, "job-b").status().code(), Code::kAlreadyExists);
  EXPECT_EQ(t.AbortStep("job", 5, "job-b").code(), Code::kAlreadyExists);
  // An anonymous writer is another writer too.
  EXPECT_EQ(t.BeginStep("job", 5, /*conn=*/4, "").code(), Code::kAlreadyExists);
  // The owner's step is whole: its object, its commit.
  ASSERT_TRUE(WriteObject(t, "job", 5, "__1_0.distcp", Bytes(4096, 'b'), /*conn=*/2, "auto").ok());
  Result<Manifest> m = t.CommitStep("job", 5, 2, false, {}, {}, "job-a");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->objects.size(), 2u);
  EXPECT_EQ(ReadObject(t, "job", 5, "__0_0.distcp"), Bytes(4096, 'a'));
  // Once the owner is gone (its connections closed), another writer may write the step number.
  ASSERT_TRUE(t.BeginStep("job", 6, /*conn=*/1, "job-a").ok());
  t.ReleaseWriter(1);
  t.ReleaseWriter(2);
  ASSERT_TRUE(t.BeginStep("job", 6, /*conn=*/3, "job-b").ok());
  // Anonymous writers share steps with each other, as before writer ids.
  ASSERT_TRUE(t.BeginStep("job", 7, /*conn=*/4, "").ok());
  ASSERT_TRUE(t.BeginStep("job", 7, /*conn=*/5, "").ok());
}

}  // namespace
}  // namespace tierckpt::agent
