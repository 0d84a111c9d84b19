// SyncOnce over a filesystem remote (real directories); the S3 remote is
// exercised against a real moto server in tests/integration/test_sync.py.
#include "sync/sync.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <thread>

#include "os/files.h"
#include "os/fs_stat.h"
#include "s3/s3_client_test_util.h"
#include "store/s3_blob_store.h"
#include "sync/remote_index.h"
#include "sync/sync_loop.h"
#include "testing/fake_s3.h"
#include "testing/temp_dir.h"

namespace tierckpt::sync {
namespace {

using testing_util::TempDir;

void Write(const std::string& path, const std::string& data) {
  ASSERT_TRUE(MakeDirs(DirName(path), 0755).ok());
  ASSERT_TRUE(WriteFileAtomic(path, data, false).ok());
}

std::string Read(const std::string& path) {
  auto s = ReadFileToString(path, 1 << 20);
  return s.ok() ? *s : "<missing>";
}

constexpr int64_t kSecond = 1000000000;
constexpr int64_t kT0 = 1600000000 * kSecond;  // 2020: long before any test runs

void SetMtime(const std::string& path, int64_t ns) { ASSERT_TRUE(SetMtimePath(path, ns, path).ok()) << path; }

int64_t Mtime(const std::string& path) {
  auto st = StatFile(path, Follow::kNo, IfMissing::kOk);
  return st.ok() && st->type != EntryType::kMissing ? st->mtime_ns : -1;
}

bool Exists(const std::string& path) { return Mtime(path) != -1; }

int64_t NowNs() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(since_epoch).count();
}

TEST(ValidateRelativePathTest, AcceptsCheckpointNamesAndRejectsEscapes) {
  for (const char* ok : {"a", "checkpoint-100/model-00001-of-00002.safetensors", "x y/+z.pt", "a/b/c"}) {
    EXPECT_TRUE(ValidateRelativePath(ok).ok()) << ok;
  }
  for (const char* bad : {"", "/abs", "a//b", "a/", "../x", "a/./b", "a\\b", "tab\there", "caf\xc3\xa9"}) {
    Status s = ValidateRelativePath(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ValidateRelativePath(std::string(1025, 'a')).code(), Code::kInvalidArgument);
}

TEST(SyncOnceTest, PullsWhatIsMissingPushesWhatIsNewAndNeverDeletes) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  Write(d.Sub("remote/checkpoint-1/model.bin"), "remote-model");
  Write(d.Sub("remote/checkpoint-1/state.json"), "{}");
  Write(d.Sub("local/checkpoint-2/model.bin"), "new-model");
  Write(d.Sub("local/checkpoint-1/state.json"), "{\"x\":1}");   // another size: local wins
  Write(d.Sub("local/skip.bin.tierckpt-partial.123"), "half");  // our temporary: never pushed

  SyncOptions o;
  o.local = d.Sub("local");
  std::vector<std::string> events;
  auto r = SyncOnce(**remote, o, [&](std::string_view what, const std::string& path, uint64_t) {
    events.push_back(std::string(what) + " " + path);
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pulled, 1u);
  EXPECT_EQ(r->pushed, 2u);  // checkpoint-1/state.json (replaced) and checkpoint-2/model.bin
  EXPECT_EQ(r->conflicts, std::vector<std::string>{"checkpoint-1/state.json"});
  EXPECT_EQ(Read(d.Sub("local/checkpoint-1/model.bin")), "remote-model");
  EXPECT_EQ(Read(d.Sub("remote/checkpoint-2/model.bin")), "new-model");
  EXPECT_EQ(Read(d.Sub("remote/checkpoint-1/state.json")), "{\"x\":1}");
  EXPECT_EQ(Read(d.Sub("remote/skip.bin.tierckpt-partial.123")), "<missing>");
  EXPECT_EQ(events.front(), "pull checkpoint-1/model.bin");

  // A second pass moves nothing; an empty local directory deletes nothing.
  auto again = SyncOnce(**remote, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pulled + again->pushed, 0u);
  EXPECT_EQ(again->unchanged, 3u);
  SyncOptions empty;
  empty.local = d.Sub("fresh");
  empty.push = false;
  auto pulled = SyncOnce(**remote, empty);
  ASSERT_TRUE(pulled.ok());
  EXPECT_EQ(pulled->pulled, 3u);
  EXPECT_EQ(Read(d.Sub("remote/checkpoint-2/model.bin")), "new-model");
}

TEST(SyncOnceTest, TheJournalCatchesAFileRewrittenWithTheSameSize) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok());
  Write(d.Sub("local/last.ckpt"), "version-1");
  SyncOptions o;
  o.local = d.Sub("local");
  ASSERT_EQ(SyncOnce(**remote, o)->pushed, 1u);
  EXPECT_EQ(Read(d.Sub("remote/last.ckpt")), "version-1");
  EXPECT_EQ(Read(d.Sub("remote/.tierckpt-sync/journal-_")), "<missing>");  // sync's state is not mirrored
  Write(d.Sub("local/last.ckpt"), "version-2");                            // same size, new content
  struct timespec times[2] = {{0, UTIME_OMIT}, {1700000000, 5}};  // a different mtime, whatever the clock
  ASSERT_EQ(::utimensat(AT_FDCWD, d.Sub("local/last.ckpt").c_str(), times, 0), 0);
  auto r = SyncOnce(**remote, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pushed, 1u);
  EXPECT_EQ(Read(d.Sub("remote/last.ckpt")), "version-2");
  EXPECT_EQ(SyncOnce(**remote, o)->unchanged, 1u);
  // Without the journal (a wiped state directory) the same size counts as the same file.
  ASSERT_TRUE(RemoveTree(d.Sub("local/.tierckpt-sync")).ok());
  Write(d.Sub("local/last.ckpt"), "version-3");
  EXPECT_EQ(SyncOnce(**remote, o)->unchanged, 1u);
  EXPECT_EQ(Read(d.Sub("remote/last.ckpt")), "version-2");
}

// A remote whose uploads race a writer: each PutFile appends to the local
// file `changes` times (as a trainer still writing it would).
class RacingStore final : public BlobStore {
 public:
  RacingStore(std::string local, int changes) : local_(std::move(local)), changes_(changes) {}
  std::string Describe() const override { return "racing://"; }
  Result<BlobListing> List(std::string_view, bool) override { return BlobListing{}; }
  Status PutFile(std::string_view, int fd, uint64_t, const BlobPutOptions&) override {
    ++puts;
    if (changes_-- > 0) {
      EXPECT_GE(fd, 0);
      std::string more = *ReadFileToString(local_, 1 << 20) + "+";
      EXPECT_TRUE(WriteFileAtomic(local_, more, false).ok());
    }
    return Status::Ok();
  }
  Status Put(std::string_view, const void*, size_t, const BlobPutOptions&) override { return Status::Ok(); }
  Status Read(std::string_view, uint64_t, void*, size_t) override { return Status::Ok(); }
  Result<std::string> ReadSmall(std::string_view, size_t) override { return std::string(); }
  Result<uint64_t> Size(std::string_view) override { return uint64_t{0}; }
  Status Delete(const std::vector<std::string>&) override { return Status::Ok(); }
  Status DeleteBelow(std::string_view) override { return Status::Ok(); }
  int puts = 0;

 private:
  std::string local_;
  int changes_;
};

TEST(SyncOnceTest, AFileChangingWhileItIsUploadedIsUploadedAgainOrReported) {
  TempDir d;
  Write(d.Sub("local/x.pt"), "data");
  SyncOptions o;
  o.local = d.Sub("local");
  RacingStore once(d.Sub("local/x.pt"), 1);
  auto r = SyncOnce(once, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(once.puts, 2);  // the second upload saw a file that held still
  RacingStore always(d.Sub("local/x.pt"), 100);
  ASSERT_TRUE(RemoveTree(d.Sub("local/.tierckpt-sync")).ok());
  Status s = SyncOnce(always, o).status();
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("kept changing while it was uploaded"), std::string::npos) << s.message();
  EXPECT_EQ(always.puts, 3);
}

TEST(SyncOnceTest, InstancePrefixesKeepInstancesApartAndAreSlashSafe) {
  TempDir d;
  auto remote = OpenBlobStore("file://" + d.Sub("remote"));
  ASSERT_TRUE(remote.ok());
  Write(d.Sub("remote/run-10/x.pt"), "ten");
  Write(d.Sub("a/x.pt"), "one");
  SyncOptions o;
  o.local = d.Sub("a");
  o.instance = "run-1";
  auto r = SyncOnce(**remote, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pulled, 0u);  // run-10's file is not run-1's
  EXPECT_EQ(r->pushed, 1u);
  EXPECT_EQ(Read(d.Sub("remote/run-1/x.pt")), "one");
  EXPECT_EQ(Read(d.Sub("remote/run-10/x.pt")), "ten");
  o.instance = "../up";
  EXPECT_EQ(SyncOnce(**remote, o).status().code(), Code::kInvalidArgument);
}

TEST(SyncOnceTest, RemoteNamesThatWouldEscapeAreReportedNotWritten) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok());
  Write(d.Sub("remote/ok.bin"), "fine");
  Write(d.Sub("remote/bad\\name"), "no");
  SyncOptions o;
  o.local = d.Sub("local");
  auto r = SyncOnce(**remote, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->pulled, 1u);
  ASSERT_EQ(r->bad_names.size(), 1u);
  EXPECT_NE(r->bad_names[0].find("bad\\name"), std::string::npos);
  EXPECT_EQ(Read(d.Sub("local/bad\\name")), "<missing>");
}

TEST(SyncOnceTest, MirrorsThroughTheS3BottomUnderTheInstancePrefix) {
  TempDir d;
  auto fake = std::make_shared<s3::FakeS3>("bkt");
  s3::S3Config config = s3::testing_util::TestConfig();
  config.part_size = 8192;
  config.multipart_threshold = 8192;
  S3BlobStore remote(config, fake, std::make_shared<s3::testing_util::MarkingSigner>(),
                     s3::testing_util::InstantRetries());
  const std::string big(20000, 'b');  // multipart
  Write(d.Sub("a/ckpt/model.bin"), big);
  Write(d.Sub("a/ckpt/meta.json"), "{}");
  SyncOptions o;
  o.local = d.Sub("a");
  o.instance = "host-a";
  auto pushed = SyncOnce(remote, o);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  EXPECT_EQ(pushed->pushed, 2u);
  // The index (the times pushed) beside the instance's files.
  const std::vector<std::string> keys = {"pre/.tierckpt-sync/index-host-a", "pre/host-a/ckpt/meta.json",
                                         "pre/host-a/ckpt/model.bin"};
  EXPECT_EQ(fake->Keys(), keys);
  o.local = d.Sub("b");
  auto pulled = SyncOnce(remote, o);
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_EQ(pulled->pulled, 2u);
  EXPECT_EQ(Read(d.Sub("b/ckpt/model.bin")), big);
  o.local = d.Sub("c");
  o.instance = "host-b";  // another instance's files are not pulled
  EXPECT_EQ(SyncOnce(remote, o)->pulled, 0u);
}

// Issue (HF Trainer under sync): a pull gave files and directories the time of
// the pull, so the Trainer's mtime-ordered rotation could delete a newer
// checkpoint and keep an older one after a restart on a new machine.
TEST(SyncMtimeTest, APullGivesFilesAndDirectoriesTheModificationTimesTheyWerePushedWith) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok()) << remote.status().ToString();
  // checkpoint-2 is written first but is the newer one by its times.
  Write(d.Sub("a/checkpoint-2/model.bin"), "model-2");
  Write(d.Sub("a/checkpoint-2/sub/extra.bin"), "extra-2");
  Write(d.Sub("a/checkpoint-1/model.bin"), "model-1");
  Write(d.Sub("a/checkpoint-1/state.json"), "{}");
  SetMtime(d.Sub("a/checkpoint-1/model.bin"), kT0);
  SetMtime(d.Sub("a/checkpoint-1/state.json"), kT0 + 1 * kSecond + 7);
  SetMtime(d.Sub("a/checkpoint-2/model.bin"), kT0 + 100 * kSecond);
  SetMtime(d.Sub("a/checkpoint-2/sub/extra.bin"), kT0 + 50 * kSecond);
  SyncOptions o;
  o.local = d.Sub("a");
  auto pushed = SyncOnce(**remote, o);
  ASSERT_TRUE(pushed.ok()) << pushed.status().ToString();
  ASSERT_EQ(pushed->pushed, 4u);
  EXPECT_NE(Read(d.Sub("remote/.tierckpt-sync/index")), "<missing>");  // sync's state, never mirrored

  o.local = d.Sub("b");
  auto pulled = SyncOnce(**remote, o);
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_EQ(pulled->pulled, 4u);
  EXPECT_TRUE(pulled->warnings.empty());
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-1/model.bin")), kT0);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-1/state.json")), kT0 + 1 * kSecond + 7);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-2/model.bin")), kT0 + 100 * kSecond);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-2/sub/extra.bin")), kT0 + 50 * kSecond);
  // Directories: the newest of what they hold, deepest first.
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-2/sub")), kT0 + 50 * kSecond);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-2")), kT0 + 100 * kSecond);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-1")), kT0 + 1 * kSecond + 7);
  EXPECT_FALSE(Exists(d.Sub("b/index")));
  EXPECT_FALSE(Exists(d.Sub("b/.tierckpt-sync/index")));
  // A second pass over the pulled copy moves nothing (the journal holds the pulled times).
  auto again = SyncOnce(**remote, o);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pulled + again->pushed, 0u);

  // A file replaced on the remote by one of another size gets no time from a stale entry.
  Write(d.Sub("remote/checkpoint-2/model.bin"), "a longer model-2");
  const int64_t before_pull = NowNs() - kSecond;
  o.local = d.Sub("c");
  o.push = false;
  auto stale = SyncOnce(**remote, o);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_GE(Mtime(d.Sub("c/checkpoint-2/model.bin")), before_pull);
  EXPECT_EQ(Mtime(d.Sub("c/checkpoint-1/model.bin")), kT0);

  // An older remote (no index) still pulls: the time of the pull, no error.
  ASSERT_TRUE(RemoveFile(d.Sub("remote/.tierckpt-sync/index"), IfMissing::kFail).ok());
  o.local = d.Sub("old");
  auto old = SyncOnce(**remote, o);
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_EQ(old->pulled, 4u);
  EXPECT_TRUE(old->warnings.empty());
  EXPECT_GE(Mtime(d.Sub("old/checkpoint-1/model.bin")), before_pull);

  // A damaged index is a warning, not an error: its readable lines still count.
  Write(d.Sub("remote/.tierckpt-sync/index"),
        "tierckpt-sync-index 1\n7 " + std::to_string(kT0) + " checkpoint-1/model.bin\nnot a line\n");
  o.local = d.Sub("damaged");
  auto damaged = SyncOnce(**remote, o);
  ASSERT_TRUE(damaged.ok()) << damaged.status().ToString();
  ASSERT_EQ(damaged->warnings.size(), 1u);
  EXPECT_NE(damaged->warnings[0].find("1 damaged line(s) skipped"), std::string::npos)
      << damaged->warnings[0];
  EXPECT_EQ(Mtime(d.Sub("damaged/checkpoint-1/model.bin")), kT0);
  EXPECT_GE(Mtime(d.Sub("damaged/checkpoint-1/state.json")), before_pull);
  Write(d.Sub("remote/.tierckpt-sync/index"), "tierckpt-sync-index 2\n");
  o.local = d.Sub("newer");
  auto newer = SyncOnce(**remote, o);
  ASSERT_TRUE(newer.ok()) << newer.status().ToString();
  ASSERT_EQ(newer->warnings.size(), 1u);
  EXPECT_NE(newer->warnings[0].find("not a sync index of version 1"), std::string::npos)
      << newer->warnings[0];
}

TEST(SyncMtimeTest, APullThroughS3GivesTheTimesPushedUnderTheInstancePrefix) {
  TempDir d;
  auto fake = std::make_shared<s3::FakeS3>("bkt");
  S3BlobStore remote(s3::testing_util::TestConfig(), fake,
                     std::make_shared<s3::testing_util::MarkingSigner>(), s3::testing_util::InstantRetries());
  Write(d.Sub("a/checkpoint-3/model.bin"), "three");
  SetMtime(d.Sub("a/checkpoint-3/model.bin"), kT0 + 3 * kSecond);
  SyncOptions o;
  o.local = d.Sub("a");
  o.instance = "host-a";
  ASSERT_EQ(SyncOnce(remote, o)->pushed, 1u);
  EXPECT_EQ(fake->Keys(),
            (std::vector<std::string>{"pre/.tierckpt-sync/index-host-a",
                                      "pre/host-a/checkpoint-3/model.bin"}));
  o.local = d.Sub("b");
  auto pulled = SyncOnce(remote, o);
  ASSERT_TRUE(pulled.ok()) << pulled.status().ToString();
  EXPECT_EQ(pulled->pulled, 1u);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-3/model.bin")), kT0 + 3 * kSecond);
  EXPECT_EQ(Mtime(d.Sub("b/checkpoint-3")), kT0 + 3 * kSecond);
}

// Issue (HF Trainer under sync): a directory remote kept the emptied
// checkpoint-N directories of rotated checkpoints.
TEST(SyncDeleteTest, DeletesOnADirectoryRemoteLeaveNoEmptyDirectoryAndNeverTheRoot) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok());
  Write(d.Sub("remote/checkpoint-1/sub/a.bin"), "a");
  Write(d.Sub("remote/checkpoint-1/b.bin"), "b");
  Write(d.Sub("remote/checkpoint-2/c.bin"), "c");
  ASSERT_TRUE((*remote)->Delete({"checkpoint-1/sub/a.bin"}).ok());
  EXPECT_FALSE(Exists(d.Sub("remote/checkpoint-1/sub")));
  EXPECT_EQ(Read(d.Sub("remote/checkpoint-1/b.bin")), "b");  // not empty: stays
  ASSERT_TRUE((*remote)->Delete({"checkpoint-1/b.bin", "checkpoint-2/c.bin"}).ok());
  EXPECT_FALSE(Exists(d.Sub("remote/checkpoint-1")));
  EXPECT_FALSE(Exists(d.Sub("remote/checkpoint-2")));
  EXPECT_TRUE(Exists(d.Sub("remote")));  // the root stays, empty
}

// The watching mode: uploads record their times in the index, and deleting a
// checkpoint directory locally leaves no empty directory on a directory remote.
TEST(SyncLoopTest, WatchingRecordsTimesAndARotatedCheckpointLeavesNoEmptyRemoteDirectory) {
  TempDir d;
  auto remote = OpenBlobStore(d.Sub("remote"));
  ASSERT_TRUE(remote.ok());
  WatchOptions wo;
  wo.sync.local = d.Sub("local");
  wo.settle = std::chrono::milliseconds(0);
  SyncLoop loop(remote->get(), wo);
  ASSERT_TRUE(loop.Start().ok());
  auto step_until = [&](const std::function<bool()>& done) {
    for (int i = 0; i < 100 && !done(); ++i) ASSERT_TRUE(loop.Step(-1, std::chrono::milliseconds(50)).ok());
    ASSERT_TRUE(done());
  };
  // Written aside, timed, then renamed in (as the Trainer renames tmp-checkpoint-N).
  Write(d.Sub("tmp/checkpoint-1/sub/model.bin"), "model-1");
  Write(d.Sub("tmp/checkpoint-2/model.bin"), "model-2");
  SetMtime(d.Sub("tmp/checkpoint-1/sub/model.bin"), kT0 + 10 * kSecond);
  SetMtime(d.Sub("tmp/checkpoint-2/model.bin"), kT0 + 20 * kSecond);
  Write(d.Sub("remote/checkpoint-2/foreign.txt"), "not sync's");  // keeps checkpoint-2 on the remote
  ASSERT_TRUE(RenamePath(d.Sub("tmp/checkpoint-1"), d.Sub("local/checkpoint-1")).ok());
  ASSERT_TRUE(RenamePath(d.Sub("tmp/checkpoint-2"), d.Sub("local/checkpoint-2")).ok());
  step_until([&] { return Exists(d.Sub("remote/checkpoint-1/sub/model.bin")) &&
                          Exists(d.Sub("remote/checkpoint-2/model.bin")); });
  ASSERT_TRUE(loop.Flush(std::chrono::steady_clock::now() + std::chrono::seconds(10)).ok());
  std::string warning;
  auto index = LoadIndex(**remote, "", &warning);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_EQ(index->count("checkpoint-1/sub/model.bin"), 1u);
  EXPECT_EQ(index->at("checkpoint-1/sub/model.bin").mtime_ns, kT0 + 10 * kSecond);

  ASSERT_TRUE(RemoveTree(d.Sub("local/checkpoint-1")).ok());  // save_total_limit
  ASSERT_TRUE(RemoveTree(d.Sub("local/checkpoint-2")).ok());
  step_until([&] {
    return !Exists(d.Sub("remote/checkpoint-1")) && !Exists(d.Sub("remote/checkpoint-2/model.bin"));
  });
  EXPECT_EQ(Read(d.Sub("remote/checkpoint-2/foreign.txt")), "not sync's");  // never ours to delete
  EXPECT_TRUE(Exists(d.Sub("remote")));
  ASSERT_TRUE(loop.Flush(std::chrono::steady_clock::now() + std::chrono::seconds(10)).ok());
  index = LoadIndex(**remote, "", &warning);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->size(), 0u);
  EXPECT_EQ(loop.status().deleted, 2u);
}

TEST(OpenBlobStoreTest, UnknownSchemesAndEmptyRemotesAreRefused) {
  EXPECT_EQ(OpenBlobStore("").status().code(), Code::kInvalidArgument);
  Status s = OpenBlobStore("gs://bucket/x").status();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("unknown scheme"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace tierckpt::sync
