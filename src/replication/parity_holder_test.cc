// ParityHolder alone, over a real directory (decisions 127, 131, 132): what it
// writes under <root>/parity and what it does with what it finds there.
#include "replication/parity_holder.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "common/names.h"
#include "ec/ec_test_parts.h"
#include "os/files.h"
#include "testing/temp_dir.h"

namespace tierckpt::agent {
namespace {

using ec::testing::kNs;
using ec::testing::kStep;
namespace fs = std::filesystem;

// rs:2+1, two members, this holder keeping piece 0 of `group`.
ParityFoldTarget TargetOf(uint32_t group, uint32_t index, uint64_t step = kStep) {
  return ParityFoldTarget{kNs, step, group, 2, 1, 2, index, {0}};
}

class ParityHolderFilesTest : public ::testing::Test {
 protected:
  ParityHolderOptions Options() const { return {dir.Sub("root/parity"), 64u << 20, 4096}; }
  // Folds both parts of `group` of `step`; the group seals.
  void Seal(ParityHolder& holder, uint32_t group, uint64_t step = kStep) {
    std::vector<ec::testing::TestPart> parts = ec::testing::MakeParts(2, 7 + group);
    for (uint32_t i = 0; i < 2; ++i) {
      parts[i].manifest.step = step;
      Result<ParityFoldState> s = holder.Fold(TargetOf(group, i, step), parts[i].manifest, parts[i].source);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_EQ(s->sealed, i == 1);
    }
  }
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(dir.Sub("root")).ok());
    ASSERT_TRUE(MakeDirs(dir.Sub("outside")).ok());
    ASSERT_TRUE(WriteFileAtomic(dir.Sub("outside/keep"), "mine", false).ok());
  }
  // The directory a link pointed at holds what it held.
  void ExpectOutsideUntouched() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.Sub("outside"))) names.push_back(e.path().filename());
    EXPECT_EQ(names, std::vector<std::string>{"keep"});
  }

  testing_util::TempDir dir;
};

TEST_F(ParityHolderFilesTest, ALinkPlantedAsTheParityRootIsRemovedAsALinkAndNeverWrittenThrough) {
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), dir.Sub("root/parity").c_str()), 0);
  ParityHolder holder(Options());
  Seal(holder, 3);
  ExpectOutsideUntouched();
  EXPECT_FALSE(fs::is_symlink(dir.Sub("root/parity")));
  EXPECT_TRUE(fs::is_directory(dir.Sub("root/parity")));
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());
}

TEST_F(ParityHolderFilesTest, LinksPlantedAsANamespaceStepOrGroupDirectoryAreRemovedAndNeverWrittenThrough) {
  ASSERT_TRUE(MakeDirs(dir.Sub("root/parity/other")).ok());
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), dir.Sub("root/parity/job").c_str()), 0);
  ParityHolder holder(Options());
  Seal(holder, 3);
  ExpectOutsideUntouched();
  EXPECT_FALSE(fs::is_symlink(dir.Sub("root/parity/job")));
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());

  const std::string step_dir = dir.Sub("root/parity/job/" + StepDirName(kStep + 1));
  ASSERT_TRUE(MakeDirs(step_dir).ok());
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), JoinPath(step_dir, "group_4").c_str()), 0);
  Seal(holder, 4, kStep + 1);
  ExpectOutsideUntouched();
  EXPECT_FALSE(fs::is_symlink(JoinPath(step_dir, "group_4")));
  EXPECT_TRUE(holder.Record(kNs, kStep + 1, 4).ok());

  // A drop removes a link in place of the step directory as a link.
  ASSERT_TRUE(RemoveTree(step_dir).ok());
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), step_dir.c_str()), 0);
  Result<bool> dropped = holder.Drop(kNs, kStep + 1);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_TRUE(*dropped);
  EXPECT_FALSE(fs::exists(fs::symlink_status(step_dir)));
  ExpectOutsideUntouched();
}

// Regression (decision 136): a retry was told from a new fold by the member's
// node id alone, so a member that deleted a step while the holder kept its
// old parity (the drop did not reach it) and committed the step again with
// other bytes was answered "sealed": redundant, with parity of the old part.
TEST_F(ParityHolderFilesTest, AnotherVersionOfAFoldedMembersPartIsRefusedNeverAnsweredWithTheOldState) {
  ParityHolder holder(Options());
  Seal(holder, 3);
  std::vector<ec::testing::TestPart> again = ec::testing::MakeParts(2, 7 + 3);  // Seal's parts
  std::vector<ec::testing::TestPart> other = ec::testing::MakeParts(2, 1000);   // same nodes, other bytes
  ASSERT_EQ(other[0].manifest.node, again[0].manifest.node);
  Result<ParityFoldState> retry = holder.Fold(TargetOf(3, 0), again[0].manifest, again[0].source);
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_TRUE(retry->sealed);
  Result<ParityFoldState> changed = holder.Fold(TargetOf(3, 0), other[0].manifest, other[0].source);
  ASSERT_FALSE(changed.ok());
  EXPECT_EQ(changed.status().code(), Code::kFailedPrecondition) << changed.status().ToString();
  EXPECT_NE(changed.status().message().find("another version of node node-0's part"), std::string::npos)
      << changed.status().ToString();
  // The same after a restart: the identity comes back from the record.
  ParityHolder restarted(Options());
  ASSERT_TRUE(restarted.Recover().ok());
  EXPECT_TRUE(restarted.Fold(TargetOf(3, 0), again[0].manifest, again[0].source)->sealed);
  EXPECT_EQ(restarted.Fold(TargetOf(3, 0), other[0].manifest, other[0].source).status().code(),
            Code::kFailedPrecondition);
}

TEST_F(ParityHolderFilesTest, DropGroupForgetsThatGroupOnlyAndGivesItsBudgetBack) {
  ParityHolder holder(Options());
  Seal(holder, 3);
  const uint64_t one = holder.used_bytes();
  Seal(holder, 4);
  ASSERT_GT(holder.used_bytes(), one);
  Result<bool> dropped = holder.DropGroup(kNs, kStep, 4);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_TRUE(*dropped);
  EXPECT_EQ(holder.Record(kNs, kStep, 4).status().code(), Code::kNotFound);
  EXPECT_FALSE(fs::exists(holder.PiecePath(kNs, kStep, 4, 0)));
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());
  EXPECT_TRUE(fs::exists(holder.PiecePath(kNs, kStep, 3, 0)));
  EXPECT_EQ(holder.used_bytes(), one);
  EXPECT_FALSE(*holder.DropGroup(kNs, kStep, 4));
}

// Decision 163: a group's pieces are folded in pool files and renamed into
// its directory; a drop gives them back to the pool, and the next group is
// folded into the same files, zeroed first (folding the same parts into the
// old bytes would cancel them to zeros).
TEST_F(ParityHolderFilesTest, ADroppedGroupsPiecesAreTheNextGroupsFilesZeroedFirst) {
  ParityHolder holder(Options());
  Seal(holder, 3);
  const std::string first = holder.PiecePath(kNs, kStep, 3, 0);
  struct stat st {};
  ASSERT_EQ(::stat(first.c_str(), &st), 0);
  const ino_t inode = st.st_ino;
  Result<std::string> bytes = ReadFileToString(first, 1 << 20);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  ASSERT_NE(bytes->find_first_not_of('\0'), std::string::npos) << "a parity of zeros proves nothing";
  EXPECT_EQ(holder.pool_bytes(), 0u);

  ASSERT_TRUE(*holder.Drop(kNs, kStep));
  EXPECT_EQ(holder.pool_bytes(), bytes->size());
  EXPECT_EQ(holder.used_bytes(), 0u);

  Seal(holder, 3, kStep + 1);  // the same parts at the next step
  EXPECT_EQ(holder.pool_bytes(), 0u);
  const std::string second = holder.PiecePath(kNs, kStep + 1, 3, 0);
  ASSERT_EQ(::stat(second.c_str(), &st), 0);
  EXPECT_EQ(st.st_ino, inode) << "the dropped group's file";
  Result<std::string> again = ReadFileToString(second, 1 << 20);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, *bytes);
  Result<ec::ParityRecord> record = holder.Record(kNs, kStep + 1, 3);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->parity[0].checksum, ComputeChecksum(again->data(), again->size()).ToString());
  // A restart holds it again (the pool's files are not the group's).
  ParityHolder restarted(Options());
  Result<ParityRecoveryReport> report = restarted.Recover();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->groups, 1u);
  EXPECT_TRUE(report->removed.empty());
}

// The pool's recycled files count against the budget and are released
// before a fold is refused for want of room.
TEST_F(ParityHolderFilesTest, ThePoolsFilesCountAgainstTheBudgetAndMakeRoomBeforeAFoldIsRefused) {
  // Seal's parts of groups 3 and 4: the budget holds the longer group's
  // piece, not both.
  uint64_t piece = 0;
  for (uint32_t seed : {7u + 3, 7u + 4}) {
    for (const ec::testing::TestPart& p : ec::testing::MakeParts(2, seed)) piece = std::max(piece, p.manifest.TotalBytes());
  }
  ParityHolderOptions o = Options();
  o.budget_bytes = piece;
  ParityHolder holder(o);
  Seal(holder, 3);
  ASSERT_TRUE(*holder.Drop(kNs, kStep));
  ASSERT_GT(holder.pool_bytes(), 0u);
  Seal(holder, 4, kStep + 1);  // fits only once the pool's file is given back
  EXPECT_TRUE(holder.Record(kNs, kStep + 1, 4).ok());
  EXPECT_LE(holder.used_bytes() + holder.pool_bytes(), o.budget_bytes);
}

// A drop leaves the tree a restart would (decision 131): the step's
// directory goes with its last group, the namespace's with its last step,
// and a later seal makes them again.
TEST_F(ParityHolderFilesTest, ADropRemovesTheStepAndNamespaceDirectoriesItEmpties) {
  ParityHolder holder(Options());
  const fs::path ns_dir = fs::path(dir.Sub("root/parity")) / kNs;
  const fs::path step_dir = fs::path(holder.PiecePath(kNs, kStep, 3, 0)).parent_path().parent_path();
  Seal(holder, 3);
  Seal(holder, 4);
  Seal(holder, 1, kStep + 1);
  ASSERT_TRUE(*holder.DropGroup(kNs, kStep, 4));
  EXPECT_TRUE(fs::is_directory(step_dir)) << "group 3 is still there";
  ASSERT_TRUE(*holder.DropGroup(kNs, kStep, 3));
  EXPECT_FALSE(fs::exists(step_dir)) << "the step's last group was dropped";
  EXPECT_TRUE(fs::is_directory(ns_dir)) << "another step is still there";
  ASSERT_TRUE(*holder.Drop(kNs, kStep + 1));
  EXPECT_FALSE(fs::exists(ns_dir)) << "the namespace's last step was dropped";
  EXPECT_TRUE(fs::is_directory(dir.Sub("root/parity")));
  Seal(holder, 3);
  EXPECT_TRUE(fs::exists(holder.PiecePath(kNs, kStep, 3, 0)));
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());
}

// Decision 148: the members' folds of one group run at once (each waits at
// its first read for the other; were a group's folds one at a time, the
// first would wait there in vain and fail), the group seals once, with the
// parity of both parts, counted once against the budget; and a drop waits
// for a fold in flight, which then publishes nothing.
TEST_F(ParityHolderFilesTest, FoldsOfOneGroupRunAtOnceAndTheGroupSealsOnce) {
  ParityHolder holder(Options());
  std::vector<ec::testing::TestPart> parts = ec::testing::MakeParts(2, 31, /*min_bytes=*/20000);
  ec::testing::Rendezvous meet(2, std::chrono::seconds(5));
  ec::testing::MeetingSource a(&parts[0].source, &meet);
  ec::testing::MeetingSource b(&parts[1].source, &meet);
  std::optional<Result<ParityFoldState>> got[2];
  std::thread first([&] { got[0].emplace(holder.Fold(TargetOf(3, 0), parts[0].manifest, a)); });
  got[1].emplace(holder.Fold(TargetOf(3, 1), parts[1].manifest, b));
  first.join();
  for (auto& g : got) ASSERT_TRUE(g->ok()) << g->status().ToString();
  EXPECT_TRUE((*got[0])->sealed || (*got[1])->sealed);
  Result<ParityHolder::HeldPiece> piece = holder.ReadPiece(kNs, kStep, 3, 0);
  ASSERT_TRUE(piece.ok()) << piece.status().ToString();
  const std::vector<uint8_t> want = ec::testing::EncodedParity(2, 1, parts)[0];
  EXPECT_EQ(std::vector<uint8_t>(piece->bytes.begin(), piece->bytes.end()), want);
  EXPECT_EQ(holder.used_bytes(), want.size());
  EXPECT_EQ(holder.WaitSealed(kNs, kStep, 3, std::chrono::steady_clock::now()).folded, 2u);

  // A drop while a fold is in flight: it waits for the fold, which writes nothing.
  ec::testing::Rendezvous held(2, std::chrono::seconds(20));
  ec::testing::MeetingSource c(&parts[0].source, &held);
  std::optional<Result<ParityFoldState>> late;
  std::thread folding([&] { late.emplace(holder.Fold(TargetOf(4, 0), parts[0].manifest, c)); });
  while (held.arrived() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::optional<Result<bool>> dropped;
  std::atomic<bool> drop_returned{false};
  std::thread dropping([&] {
    dropped.emplace(holder.DropGroup(kNs, kStep, 4));
    drop_returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(drop_returned);  // waiting for the fold
  ASSERT_TRUE(held.Arrive().ok());
  folding.join();
  dropping.join();
  ASSERT_TRUE(dropped->ok());
  EXPECT_TRUE(**dropped);
  // The fold itself went through; its group is gone, and the sealed one stays.
  EXPECT_TRUE(late->ok()) << late->status().ToString();
  EXPECT_EQ(holder.Fold(TargetOf(4, 1), parts[1].manifest, parts[1].source)->sealed, false);
  EXPECT_FALSE(fs::exists(holder.PiecePath(kNs, kStep, 4, 0)));
  EXPECT_EQ(holder.used_bytes(), want.size() + parts[1].piece.size());
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());
}

// ---- Recover: a restarted holder (decision 132) ----

TEST_F(ParityHolderFilesTest, ARestartedHolderHoldsItsSealedGroupsAgainCountedAgainstTheBudget) {
  uint64_t used = 0;
  {
    ParityHolder before(Options());
    Seal(before, 3);
    Seal(before, 4);
    used = before.used_bytes();
  }
  ParityHolder holder(Options());
  EXPECT_EQ(holder.used_bytes(), 0u);
  Result<ParityRecoveryReport> report = holder.Recover();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->groups, 2u);
  EXPECT_EQ(report->bytes, used);
  EXPECT_TRUE(report->removed.empty()) << report->removed[0].ToString();
  EXPECT_EQ(holder.used_bytes(), used);
  EXPECT_TRUE(holder.Record(kNs, kStep, 3).ok());
  EXPECT_TRUE(holder.WaitSealed(kNs, kStep, 4, std::chrono::steady_clock::now()).sealed);
  // A member retrying after the restart is told the group is sealed; nothing folds twice.
  std::vector<ec::testing::TestPart> parts = ec::testing::MakeParts(2, 7 + 3);
  Result<ParityFoldState> again = holder.Fold(TargetOf(3, 1), parts[1].manifest, parts[1].source);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->sealed);
  EXPECT_EQ(again->folded, 2u);
  // And the groups drop as any other, their bytes back.
  EXPECT_TRUE(*holder.Drop(kNs, kStep));
  EXPECT_EQ(holder.used_bytes(), 0u);
  EXPECT_FALSE(fs::exists(holder.PiecePath(kNs, kStep, 3, 0)));
}

TEST_F(ParityHolderFilesTest, ARestartedHolderRemovesWhatDoesNotCheckOutAndNeverTrustsIt) {
  {
    ParityHolder before(Options());
    for (uint32_t g = 1; g <= 6; ++g) Seal(before, g);
  }
  ParityHolder holder(Options());
  const std::string step_dir = dir.Sub("root/parity/job/" + StepDirName(kStep));
  auto group_dir = [&](uint32_t g) { return JoinPath(step_dir, "group_" + std::to_string(g)); };
  // 1: interrupted before its record; 2: a record that does not parse;
  // 3: a piece damaged; 4: a piece short; 5: another group's record.
  ASSERT_TRUE(RemoveFile(JoinPath(group_dir(1), "record.json"), IfMissing::kFail).ok());
  ASSERT_TRUE(WriteFileAtomic(JoinPath(group_dir(2), "record.json"), "{\"format\": ", false).ok());
  Result<std::string> piece = ReadFileToString(holder.PiecePath(kNs, kStep, 3, 0), 1u << 20);
  ASSERT_TRUE(piece.ok() && !piece->empty());
  (*piece)[piece->size() / 2] ^= 0x20;
  ASSERT_TRUE(WriteFileAtomic(holder.PiecePath(kNs, kStep, 3, 0), *piece, false).ok());
  ASSERT_EQ(::truncate(holder.PiecePath(kNs, kStep, 4, 0).c_str(), 10), 0);
  Result<std::string> six = ReadFileToString(JoinPath(group_dir(6), "record.json"), 1u << 20);
  ASSERT_TRUE(six.ok());
  ASSERT_TRUE(WriteFileAtomic(JoinPath(group_dir(5), "record.json"), *six, false).ok());
  // 6 is whole, beside a leftover temporary file.
  ASSERT_TRUE(WriteFileAtomic(JoinPath(group_dir(6), "parity_0.tmp"), "x", false).ok());
  // Names not of the layout, a link, empty directories.
  ASSERT_TRUE(MakeDirs(JoinPath(step_dir, "group_07")).ok());
  ASSERT_TRUE(WriteFileAtomic(dir.Sub("root/parity/job/notastep"), "x", false).ok());
  ASSERT_TRUE(MakeDirs(dir.Sub("root/parity/bad name")).ok());
  ASSERT_TRUE(MakeDirs(dir.Sub("root/parity/other/" + StepDirName(1))).ok());
  ASSERT_EQ(::symlink(dir.Sub("outside").c_str(), dir.Sub("root/parity/job/" + StepDirName(kStep + 1)).c_str()), 0);

  Result<ParityRecoveryReport> report = holder.Recover();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->groups, 1u);
  std::string removed;
  for (const Status& s : report->removed) removed += s.ToString() + "\n";
  EXPECT_EQ(report->removed.size(), 10u) << removed;
  for (const char* why : {"no record.json", "has checksum", "bytes, the record says", "not its directory's",
                          "not a file of the group's record", "symbolic link"}) {
    EXPECT_NE(removed.find(why), std::string::npos) << why << " in\n" << removed;
  }
  ExpectOutsideUntouched();
  Result<ec::ParityRecord> kept = holder.Record(kNs, kStep, 6);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(holder.used_bytes(), report->bytes);
  EXPECT_EQ(report->bytes, kept->PieceLength());
  for (uint32_t g = 1; g <= 5; ++g) {
    EXPECT_EQ(holder.Record(kNs, kStep, g).status().code(), Code::kNotFound) << g;
    EXPECT_FALSE(fs::exists(group_dir(g))) << g;
  }
  std::vector<std::string> left;
  for (const auto& e : fs::recursive_directory_iterator(dir.Sub("root/parity"))) {
    left.push_back(fs::relative(e.path(), dir.Sub("root/parity")).string());
  }
  std::sort(left.begin(), left.end());
  const std::string group6 = "job/" + StepDirName(kStep) + "/group_6";
  EXPECT_EQ(left, (std::vector<std::string>{"job", "job/" + StepDirName(kStep), group6, group6 + "/parity_0",
                                            group6 + "/record.json"}));
  // A second start finds nothing to remove.
  ParityHolder again(Options());
  Result<ParityRecoveryReport> second = again.Recover();
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->groups, 1u);
  EXPECT_TRUE(second->removed.empty());
}

// Decision 160: the scrub finds rot at rest in a running holder's pieces
// (a flipped byte, a truncated piece, a record gone) and drops those groups
// only; the sound ones are counted and kept.
TEST_F(ParityHolderFilesTest, AScrubDropsTheGroupsWhosePiecesRottedAndKeepsTheRest) {
  ParityHolder holder(Options());
  for (uint32_t g = 1; g <= 4; ++g) Seal(holder, g);
  Result<ParityScrubReport> clean = holder.Scrub();
  ASSERT_TRUE(clean.ok()) << clean.status().ToString();
  EXPECT_EQ(clean->groups, 4u);
  EXPECT_TRUE(clean->dropped.empty());
  const uint64_t before = holder.used_bytes();

  {  // 1: one byte flipped in place (the inode a reader would map)
    std::fstream f(holder.PiecePath(kNs, kStep, 1, 0), std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(5);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x01);
    f.seekp(5);
    f.write(&c, 1);
  }
  ASSERT_EQ(::truncate(holder.PiecePath(kNs, kStep, 2, 0).c_str(), 3), 0);  // 2: short
  const fs::path record3 = fs::path(holder.PiecePath(kNs, kStep, 3, 0)).parent_path() / "record.json";
  ASSERT_TRUE(fs::remove(record3));  // 3: its record gone

  Result<ParityScrubReport> report = holder.Scrub();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->groups, 1u);
  std::string dropped;
  for (const Status& st : report->dropped) dropped += st.ToString() + "\n";
  ASSERT_EQ(report->dropped.size(), 3u) << dropped;
  for (const char* why : {"has checksum", "bytes, the record says", "no record.json", "dropped, so its members"}) {
    EXPECT_NE(dropped.find(why), std::string::npos) << why << " in\n" << dropped;
  }
  for (uint32_t g = 1; g <= 3; ++g) {
    EXPECT_EQ(holder.Record(kNs, kStep, g).status().code(), Code::kNotFound) << g;
    EXPECT_FALSE(fs::exists(fs::path(holder.PiecePath(kNs, kStep, g, 0)).parent_path())) << g;
  }
  Result<ec::ParityRecord> kept = holder.Record(kNs, kStep, 4);
  ASSERT_TRUE(kept.ok()) << kept.status().ToString();
  EXPECT_EQ(holder.used_bytes(), kept->PieceLength());  // the dropped groups' budget given back
  EXPECT_LT(holder.used_bytes(), before);
  Result<ParityScrubReport> again = holder.Scrub();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->groups, 1u);
  EXPECT_TRUE(again->dropped.empty());
}

TEST_F(ParityHolderFilesTest, ARestartedHolderWithNoParityDirectoryHoldsNothing) {
  ParityHolder holder(Options());
  Result<ParityRecoveryReport> report = holder.Recover();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->groups, 0u);
  EXPECT_FALSE(fs::exists(dir.Sub("root/parity")));
}

}  // namespace
}  // namespace tierckpt::agent
