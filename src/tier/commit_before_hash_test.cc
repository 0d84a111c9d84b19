// commit_before_hash_test.cc — MemoryTierOptions::commit_before_hash
// (decision 68): a commit answers before the agent's hash of objects sealed
// without a checksum, every reader of the step waits for the hash, the
// record is rewritten once it is in, a failed hash drops the step, and a
// restart hashes a record left pending.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>

#include "os/files.h"
#include "tier/tier_test_util.h"

namespace tierckpt::agent {
namespace {

using testing::ChecksumOf;
using testing::TierHarness;
using testing::WriteObject;

const std::string kData = std::string(300000, 'h') + "tail";

// Holds every thread of the harness's verifier (2) until Open(): the hashes
// submitted meanwhile wait behind it.
class VerifierGate {
 public:
  explicit VerifierGate(WorkQueue& q) {
    std::shared_future<void> opened = open_.get_future().share();
    for (int i = 0; i < 2; ++i) {
      EXPECT_TRUE(q.Submit([opened] { opened.wait(); }));
    }
  }
  ~VerifierGate() { Open(); }
  void Open() {
    if (!opened_) open_.set_value();
    opened_ = true;
  }

 private:
  std::promise<void> open_;
  bool opened_ = false;
};

std::unique_ptr<TierHarness> Harness(bool commit_before_hash) {
  auto h = std::make_unique<TierHarness>();
  h->options.commit_before_hash = commit_before_hash;
  EXPECT_TRUE(h->Reopen().ok());
  return h;
}

Result<Manifest> RecordOnDisk(const TierHarness& h, const std::string& ns, uint64_t step) {
  const std::string path = Layout::ManifestPath(h.StepDir(ns, step));
  TC_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, kMaxManifestBytes));
  return Manifest::Parse(text, path);
}

constexpr auto kBlocked = std::chrono::milliseconds(100);

TEST(CommitBeforeHashTest, TheCommitAnswersBeforeTheHashAndReadersWaitForIt) {
  auto h = Harness(true);
  VerifierGate gate(*h->verifier);
  ASSERT_TRUE(WriteObject(*h->tier, "job", 1, "a", kData, 1, /*checksum=*/"").ok());
  Result<Manifest> committed = h->tier->CommitStep("job", 1, 1, false, {});
  ASSERT_TRUE(committed.ok()) << committed.status().ToString();
  EXPECT_TRUE(committed->checksums_pending);
  ASSERT_EQ(committed->objects.size(), 1u);
  EXPECT_EQ(committed->objects[0].checksum, "");
  EXPECT_TRUE(h->tier->HasCommitted("job", 1));
  Result<Manifest> record = RecordOnDisk(*h, "job", 1);  // committed: it survives a restart
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_TRUE(record->checksums_pending);

  auto manifest = std::async(std::launch::async, [&] { return h->tier->GetManifest("job", 1); });
  auto opened = std::async(std::launch::async, [&] { return h->tier->OpenObject("job", 1, "a"); });
  auto pinned = std::async(std::launch::async, [&] { return h->tier->PinCommitted("job", 1); });
  EXPECT_EQ(manifest.wait_for(kBlocked), std::future_status::timeout);
  EXPECT_EQ(opened.wait_for(kBlocked), std::future_status::timeout);
  EXPECT_EQ(pinned.wait_for(kBlocked), std::future_status::timeout);
  gate.Open();

  Result<Manifest> m = manifest.get();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->checksums_pending);
  EXPECT_EQ(m->objects[0].checksum, ChecksumOf(kData));
  Result<OpenedObject> o = opened.get();
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->checksum, ChecksumOf(kData));
  EXPECT_LT(o->verified_age_ms, 10'000u);  // the hash after commit verified it
  Result<PersistLease> lease = pinned.get();
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ(lease->manifest.objects[0].checksum, ChecksumOf(kData));
  record = RecordOnDisk(*h, "job", 1);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_FALSE(record->checksums_pending);
  EXPECT_EQ(record->objects[0].checksum, ChecksumOf(kData));
}

TEST(CommitBeforeHashTest, TheNextSaveOfTheNamespaceBeginsOnceTheHashesAreIn) {
  auto h = Harness(true);
  VerifierGate gate(*h->verifier);
  ASSERT_TRUE(WriteObject(*h->tier, "job", 1, "a", kData, 1, "").ok());
  ASSERT_TRUE(h->tier->CommitStep("job", 1, 1, false, {}).ok());
  auto next = std::async(std::launch::async, [&] { return h->tier->BeginStep("job", 2, 1); });
  EXPECT_EQ(next.wait_for(kBlocked), std::future_status::timeout);
  EXPECT_TRUE(h->tier->BeginStep("other", 1, 2).ok());  // another namespace does not wait
  gate.Open();
  EXPECT_TRUE(next.get().ok());
}

TEST(CommitBeforeHashTest, WithoutTheOptionTheCommitWaitsForTheHash) {
  auto h = Harness(false);
  VerifierGate gate(*h->verifier);
  ASSERT_TRUE(WriteObject(*h->tier, "job", 2, "a", kData, 1, "").ok());
  auto commit = std::async(std::launch::async, [&] { return h->tier->CommitStep("job", 2, 1, false, {}); });
  EXPECT_EQ(commit.wait_for(kBlocked), std::future_status::timeout);
  gate.Open();
  Result<Manifest> m = commit.get();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->checksums_pending);
  EXPECT_EQ(m->objects[0].checksum, ChecksumOf(kData));
}

TEST(CommitBeforeHashTest, AClientChecksumTheAgentReHashesStillHoldsTheCommitAndFailsIt) {
  auto h = std::make_unique<TierHarness>();
  h->options.commit_before_hash = true;
  h->options.verify_on_seal = true;
  ASSERT_TRUE(h->Reopen().ok());
  VerifierGate gate(*h->verifier);
  ASSERT_TRUE(WriteObject(*h->tier, "job", 3, "a", kData, 1, ChecksumOf("something else")).ok());
  auto commit = std::async(std::launch::async, [&] { return h->tier->CommitStep("job", 3, 1, false, {}); });
  EXPECT_EQ(commit.wait_for(kBlocked), std::future_status::timeout);
  gate.Open();
  Result<Manifest> m = commit.get();
  EXPECT_EQ(m.status().code(), Code::kCorruption) << m.status().ToString();
  EXPECT_FALSE(h->tier->HasCommitted("job", 3));
}

TEST(CommitBeforeHashTest, AHashThatFailsAfterTheCommitDropsTheStep) {
  auto h = Harness(true);
  VerifierGate gate(*h->verifier);
  ASSERT_TRUE(WriteObject(*h->tier, "job", 4, "a", kData, 1, "").ok());
  ASSERT_TRUE(h->tier->CommitStep("job", 4, 1, false, {}).ok());
  // Resized behind the agent between the commit and the hash.
  const std::string path = Layout::ObjectPath(h->StepDir("job", 4), "a");
  ASSERT_EQ(::truncate(path.c_str(), 10), 0);
  auto manifest = std::async(std::launch::async, [&] { return h->tier->GetManifest("job", 4); });
  EXPECT_EQ(manifest.wait_for(kBlocked), std::future_status::timeout);
  gate.Open();
  Result<Manifest> m = manifest.get();
  EXPECT_EQ(m.status().code(), Code::kNotFound) << m.status().ToString();
  EXPECT_FALSE(h->tier->HasCommitted("job", 4));
}

TEST(CommitBeforeHashTest, ARestartHashesARecordLeftPending) {
  auto h = Harness(false);
  ASSERT_TRUE(testing::WriteStep(*h->tier, "job", 5, {{"a", kData}, {"b", "bee"}}).ok());
  // The record an agent killed between commit and hash leaves behind.
  Result<Manifest> record = RecordOnDisk(*h, "job", 5);
  ASSERT_TRUE(record.ok());
  record->objects[0].checksum = "";
  record->checksums_pending = true;
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(h->StepDir("job", 5)), record->ToJson(), false).ok());

  Result<RecoveryReport> report = h->Reopen();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->committed_steps, 1u);
  Result<Manifest> m = h->tier->GetManifest("job", 5);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_FALSE(m->checksums_pending);
  EXPECT_EQ(m->objects[0].checksum, ChecksumOf(kData));
  EXPECT_EQ(m->objects[1].checksum, ChecksumOf("bee"));
  record = RecordOnDisk(*h, "job", 5);
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->checksums_pending);
  EXPECT_EQ(record->objects[0].checksum, ChecksumOf(kData));
}

TEST(CommitBeforeHashTest, ARestartDropsAPendingRecordWhoseObjectWasResized) {
  auto h = Harness(false);
  ASSERT_TRUE(testing::WriteStep(*h->tier, "job", 6, {{"a", kData}}).ok());
  Result<Manifest> record = RecordOnDisk(*h, "job", 6);
  ASSERT_TRUE(record.ok());
  record->objects[0].checksum = "";
  record->objects[0].size = kData.size() + 1;  // no longer the file's size
  record->checksums_pending = true;
  ASSERT_TRUE(WriteFileAtomic(Layout::ManifestPath(h->StepDir("job", 6)), record->ToJson(), false).ok());
  Result<RecoveryReport> report = h->Reopen();
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->damaged_dropped, 1u);
  EXPECT_EQ(h->tier->GetManifest("job", 6).status().code(), Code::kNotFound);
}

}  // namespace
}  // namespace tierckpt::agent
