// Regression tests for the memory-tier holes of issue 37: a file recycled
// under a writer's live mapping, an unsealed object replaced under another
// connection, a read without holding its step, a verification time never
// cleared on a mismatch.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "os/files.h"
#include "os/mapping.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::TierHarness;
using testing::WriteObject;

constexpr uint64_t kBig = 2u << 20;  // pool-sized (>= 1 MiB)

// A writer's read-write mapping of an object it created and has not sealed.
struct LiveWrite {
  CreatedObject obj;
  Mapping map;
};

LiveWrite StartWriting(MemoryTier& tier, const std::string& ns, uint64_t step, const std::string& name,
                       uint64_t size, uint64_t conn) {
  Result<CreatedObject> c = tier.CreateObject(ns, step, name, size, conn);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  Result<Mapping> m = Mapping::Map(c->fd.get(), size, Mapping::Access::kReadWrite, false, "test");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  std::memset(m->data(), 'a', size / 2);  // half of it written, like a body still streaming in
  return LiveWrite{std::move(c).value(), std::move(m).value()};
}

// Step B commits b_data as "rank_0"; then A's writer, still holding its
// mapping, writes bytes [from, kBig). Returns B's committed bytes, read back.
std::string CommitBThenWriteLate(MemoryTier& tier, LiveWrite& a, const std::string& b_data, uint64_t from) {
  EXPECT_TRUE(testing::WriteStep(tier, "B", 1, {{"rank_0", b_data}}).ok());
  std::memset(a.map.data() + from, 'a', kBig - from);  // SIGBUS here on the old code when B is smaller
  Result<OpenedObject> b = tier.OpenObject("B", 1, "rank_0");
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? testing::ReadFd(b->fd.get()) : std::string();
}

// Issue 37 item 1: namespace A's upload is dropped (DELETE of its namespace,
// a reset, an abort) while its writer still writes through its mapping; B's
// next object of the same size must not receive A's remaining bytes.
TEST(MemoryTierHolesTest, AnUnsealedObjectDroppedUnderItsWriterNeverBecomesAnotherStepsObject) {
  TierHarness h(64u << 20);
  LiveWrite a = StartWriting(*h.tier, "A", 1, "rank_0", kBig, /*conn=*/0);
  ASSERT_TRUE(h.tier->AbortStep("A", 1).ok());
  const std::string b_data(kBig, 'b');
  // The rest of A's body arrives after B's commit.
  EXPECT_TRUE(CommitBThenWriteLate(*h.tier, a, b_data, kBig / 2) == b_data)
      << "B's committed object received A's late bytes";
  Result<MemoryVerifyResult> v = h.tier->VerifyStep("B", 1);
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->errors.empty());
}

// The same at a smaller size: the old code gave B the segment truncated to
// its size, and the writer's next copy past the new end raised SIGBUS (the
// whole agent died).
TEST(MemoryTierHolesTest, AWriterOfADroppedObjectNeverFaultsWhenTheNextObjectIsSmaller) {
  TierHarness h(64u << 20);
  LiveWrite a = StartWriting(*h.tier, "A", 1, "rank_0", kBig, /*conn=*/0);
  ASSERT_TRUE(h.tier->AbortStep("A", 1).ok());
  const std::string b_data(kBig / 2 + 4096, 'b');
  EXPECT_TRUE(CommitBThenWriteLate(*h.tier, a, b_data, 0) == b_data);
}

// The dropped file does not count against the budget once unlinked, and the
// step's name can be written again at once.
TEST(MemoryTierHolesTest, ADroppedUnsealedObjectIsUnlinkedNotPooled) {
  TierHarness h(64u << 20);
  LiveWrite a = StartWriting(*h.tier, "A", 1, "rank_0", kBig, /*conn=*/7);
  const uint64_t pool_before = h.tier->Stats().pool_bytes;
  h.tier->ReleaseWriter(7);  // the writer's connection closed
  TierStats st = h.tier->Stats();
  EXPECT_EQ(st.pool_bytes, pool_before);
  EXPECT_EQ(st.object_bytes, 0u);
  EXPECT_EQ(st.writing_steps, 0u);
  // A sealed object of a dropped step still goes to the pool.
  ASSERT_TRUE(WriteObject(*h.tier, "A", 2, "rank_0", std::string(kBig, 'c'), 8).ok());
  h.tier->ReleaseWriter(8);
  EXPECT_EQ(h.tier->Stats().pool_bytes, pool_before + kBig);
}

// The same across an agent restart: a writer that outlived the agent keeps
// its mapping of a .partial step's file; recovery must not pool that file.
TEST(MemoryTierHolesTest, RecoveryNeverPoolsAPartialStepsFiles) {
  TierHarness h(64u << 20);
  LiveWrite a = StartWriting(*h.tier, "A", 1, "rank_0", kBig, /*conn=*/1);
  ASSERT_TRUE(h.Reopen().ok());  // the agent restarted on the same root
  EXPECT_EQ(h.tier->Stats().pool_bytes, 0u);
  const std::string b_data(kBig, 'b');
  EXPECT_TRUE(CommitBThenWriteLate(*h.tier, a, b_data, 0) == b_data);
}

// Issue 37 item 2: a second connection creating an object another live
// connection of the same writer is writing is refused; the first writer's
// object stays, and its seal and the commit go through.
TEST(MemoryTierHolesTest, ASecondConnectionCannotReplaceAnObjectAnotherIsWriting) {
  TierHarness h(64u << 20);
  LiveWrite first = StartWriting(*h.tier, "ns", 1, "__0_0.distcp", kBig, /*conn=*/1);
  Result<CreatedObject> second = h.tier->CreateObject("ns", 1, "__0_0.distcp", kBig, /*conn=*/2);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists);
  EXPECT_NE(second.status().message().find("another connection"), std::string::npos)
      << second.status().ToString();
  std::memset(first.map.data(), 'a', kBig);
  ASSERT_TRUE(h.tier->SealObject("ns", 1, "__0_0.distcp", kBig, ChecksumOf(std::string(kBig, 'a'))).ok());
  ASSERT_TRUE(h.tier->CommitStep("ns", 1, 1, false, {"__0_0.distcp"}).ok());
  Result<OpenedObject> o = h.tier->OpenObject("ns", 1, "__0_0.distcp");
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(testing::ReadFd(o->fd.get()) == std::string(kBig, 'a'));
}

// A connection's own retry, and a create after the first connection went
// away, still replace the unsealed object.
TEST(MemoryTierHolesTest, AnUnsealedObjectIsReplacedByItsOwnConnectionOrOnceItsWriterIsGone) {
  TierHarness h(64u << 20);
  ASSERT_TRUE(h.tier->BeginStep("ns", 1, 3).ok());  // another connection keeps the step alive
  { LiveWrite w = StartWriting(*h.tier, "ns", 1, "x", 4096, /*conn=*/1); }
  ASSERT_TRUE(h.tier->CreateObject("ns", 1, "x", 4096, /*conn=*/1).ok());  // its own retry
  h.tier->ReleaseWriter(1);
  EXPECT_TRUE(h.tier->CreateObject("ns", 1, "x", 4096, /*conn=*/2).ok());
}

// Issue 37 items 3-4: an object handed out for an agent thread's read keeps
// its step's files: a drop meanwhile neither recycles the file into another
// object nor shrinks it.
TEST(MemoryTierHolesTest, AnOpenedObjectKeepsItsFileUntilReleased) {
  TierHarness h(64u << 20, /*keep_last=*/1);
  const std::string old_data(kBig, 'o');
  ASSERT_TRUE(testing::WriteStep(*h.tier, "ns", 1, {{"rank_0", old_data}}).ok());
  Result<OpenedObject> o = h.tier->OpenObject("ns", 1, "rank_0");
  ASSERT_TRUE(o.ok());
  ASSERT_TRUE(*h.tier->DeleteStep("ns", 1));
  // New saves of a smaller size would take the old file from the pool.
  ASSERT_TRUE(testing::WriteStep(*h.tier, "other", 1, {{"rank_0", std::string(kBig / 2 + 8192, 'n')}}).ok());
  Result<FileInfo> info = StatFd(o->fd.get(), "the opened object");
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->size, kBig);
  EXPECT_TRUE(testing::ReadFd(o->fd.get()) == old_data);
  *o = OpenedObject();  // released: recycled now
  EXPECT_EQ(h.tier->Stats().object_bytes, kBig / 2 + 8192);
}

// Issue 37 item 5: a hash that finds an object corrupt clears its
// verification time (attested reads then re-hash it), and a verification
// that began before that hash does not bring it back.
TEST(MemoryTierHolesTest, AMismatchClearsTheVerificationTime) {
  TierHarness h;
  const std::string data(8192, 'v');
  ASSERT_TRUE(WriteObject(*h.tier, "job", 1, "a", data, 1, /*checksum=*/"").ok());  // the agent hashes
  ASSERT_TRUE(h.tier->CommitStep("job", 1, 1, false, {}).ok());
  const auto before = std::chrono::steady_clock::now();
  Result<OpenedObject> o = h.tier->OpenObject("job", 1, "a");
  ASSERT_TRUE(o.ok());
  EXPECT_NE(o->verified_age_ms, kNeverVerified);
  const uint64_t instance = h.tier->ReadCommittedObject("job", 1, "a")->instance;
  *o = OpenedObject();
  const std::string path = Layout::ObjectPath(h.StepDir("job", 1), "a");
  Result<UniqueFd> fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok());
  ASSERT_TRUE(PwriteAll(fd->get(), "X", 1, 10, path).ok());
  Result<MemoryVerifyResult> v = h.tier->VerifyStep("job", 1);
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v->failed_objects, std::vector<std::string>{"a"});
  EXPECT_EQ(h.tier->OpenObject("job", 1, "a")->verified_age_ms, kNeverVerified);
  h.tier->MarkVerified("job", 1, instance, "a", before);  // a hash that began before the damage was found
  EXPECT_EQ(h.tier->OpenObject("job", 1, "a")->verified_age_ms, kNeverVerified);
}

}  // namespace
}  // namespace tierckpt::agent
