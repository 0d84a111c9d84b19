// File-store specifics: the on-disk layout, damaged and foreign files, and
// what a crash leaves behind.

#include "store/fs_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/names.h"
#include "os/files.h"
#include "store/store_test_util.h"
#include "testing/page_cache.h"

namespace tierckpt {
namespace {

using testing_util::Contents;
using testing_util::ListFiles;
using testing_util::MakeManifest;
using testing_util::Pattern;
using testing_util::TempDir;

class FsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = tmp_.Sub("base");
    auto s = FsObjectStore::Open(base_);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(s).value();
  }

  void PutAndCommit(const std::string& ns, uint64_t step, const Contents& objects) {
    for (const auto& [name, data] : objects) {
      Status s = store_->PutObject(ns, step, name, data.data(), data.size());
      ASSERT_TRUE(s.ok()) << s.ToString();
    }
    Status s = store_->CommitStep(MakeManifest(ns, step, objects));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::string StepPath(const std::string& ns, uint64_t step) {
    return JoinPath(JoinPath(base_, ns), StepDirName(step));
  }
  void WriteRaw(const std::string& path, const std::string& data) {
    ASSERT_TRUE(MakeDirs(DirName(path)).ok());
    ASSERT_TRUE(WriteFileAtomic(path, data, false).ok()) << path;
  }

  TempDir tmp_;
  std::string base_;
  std::unique_ptr<FsObjectStore> store_;
};

TEST_F(FsStoreTest, LayoutIsTheDcpDirectoryPlusTheManifestAndNoTmpFiles) {
  const Contents objects = {{"__0_0.distcp", Pattern(5000, 1)}, {".metadata", "meta"},
                            {"sub/dir/x", "xx"}};
  PutAndCommit("job1", 123, objects);
  EXPECT_EQ(store_->Describe(), "file://" + base_);
  EXPECT_EQ(ListFiles(base_),
            (std::vector<std::string>{"job1/step_0000000123/.metadata",
                                      "job1/step_0000000123/__0_0.distcp",
                                      "job1/step_0000000123/_tierckpt_manifest.json",
                                      "job1/step_0000000123/sub/dir/x"}));
  EXPECT_EQ(*ReadFileToString(JoinPath(StepPath("job1", 123), "__0_0.distcp"), 1 << 20),
            objects.at("__0_0.distcp"));
  auto text = ReadFileToString(JoinPath(StepPath("job1", 123), kManifestName), 1 << 20);
  ASSERT_TRUE(text.ok());
  auto parsed = Manifest::Parse(*text, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->ToJson(), MakeManifest("job1", 123, objects).ToJson());
}

TEST_F(FsStoreTest, ALargeObjectGoesToItsFileWithoutThePageCache) {
  // As the persister puts it: from a page-aligned mapping (decision 172).
  const size_t size = (size_t{5} << 20) + 7;
  void* src = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(src, MAP_FAILED);
  std::string expected = Pattern(size, 7);
  std::memcpy(src, expected.data(), size);
  ASSERT_TRUE(store_->PutObject("ns", 1, "__0_0.distcp", src, size).ok());
  ::munmap(src, size);
  const std::string path = JoinPath(StepPath("ns", 1), "__0_0.distcp");
  if (testing_util::HasSeparatePageCache(base_)) {  // before anything reads it: a buffered write caches every page
    Result<UniqueFd> fd = OpenFile(path, O_RDONLY);
    ASSERT_TRUE(fd.ok());
    EXPECT_EQ(testing_util::CachedPagesBeforeTheLast(fd->get(), size), 0) << "pages of " << path << " in the page cache";
  }
  Result<std::string> back = ReadFileToString(path, size + 1);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(*back == expected) << "the file differs from what was put";
}

TEST_F(FsStoreTest, ANewStoreOnTheSameBaseSeesCommittedSteps) {
  PutAndCommit("job", 4, {{"a", "persisted"}});
  auto again = FsObjectStore::Open(base_ + "/");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->base(), base_);
  EXPECT_EQ(*(*again)->ListCommittedSteps("job"), std::vector<uint64_t>{4});
  char buf[9];
  ASSERT_TRUE((*again)->ReadObject("job", 4, "a", 0, buf, 9).ok());
  EXPECT_EQ(std::string(buf, 9), "persisted");
}

TEST_F(FsStoreTest, WorksWithoutFsync) {
  auto s = FsObjectStore::Open(tmp_.Sub("nosync"), FsStoreOptions{.fsync = false});
  ASSERT_TRUE(s.ok());
  const std::string data = Pattern(3000, 5);
  ASSERT_TRUE((*s)->PutObject("job", 1, "a", data.data(), data.size()).ok());
  ASSERT_TRUE((*s)->CommitStep(MakeManifest("job", 1, {{"a", data}})).ok());
  EXPECT_EQ(*(*s)->ListCommittedSteps("job"), std::vector<uint64_t>{1});
}

TEST_F(FsStoreTest, DamagedManifestIsCorruptionNamingThePath) {
  PutAndCommit("job", 1, {{"a", "1"}});
  const std::string path = JoinPath(StepPath("job", 1), kManifestName);
  ASSERT_TRUE(RemoveTree(path).ok());
  WriteRaw(path, "{\"format\": \"tierckpt.manifest\", \"version\": 1, garbage");
  auto m = store_->ReadManifest("job", 1);
  EXPECT_EQ(m.status().code(), Code::kCorruption) << m.status().ToString();
  EXPECT_NE(m.status().message().find(path), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(store_->Describe()), std::string::npos);
  // The step still lists as committed (its manifest exists); readers find out
  // it is damaged when they read it.
  EXPECT_EQ(*store_->ListCommittedSteps("job"), std::vector<uint64_t>{1});
  // A second commit does not overwrite the damaged manifest.
  EXPECT_EQ(store_->CommitStep(MakeManifest("job", 1, {{"a", "1"}})).code(), Code::kAlreadyExists);
}

TEST_F(FsStoreTest, AManifestOfAnotherStepIsCorruption) {
  PutAndCommit("job", 1, {{"a", "1"}});
  const std::string one = JoinPath(StepPath("job", 1), kManifestName);
  WriteRaw(JoinPath(StepPath("job", 2), kManifestName), *ReadFileToString(one, 1 << 20));
  auto m = store_->ReadManifest("job", 2);
  EXPECT_EQ(m.status().code(), Code::kCorruption) << m.status().ToString();
  EXPECT_NE(m.status().message().find("step 1"), std::string::npos) << m.status().message();
}

TEST_F(FsStoreTest, AManifestThatIsADirectoryIsCorruption) {
  ASSERT_TRUE(MakeDirs(JoinPath(StepPath("job", 3), kManifestName)).ok());
  EXPECT_EQ(store_->ReadManifest("job", 3).status().code(), Code::kCorruption);
}

TEST_F(FsStoreTest, ATruncatedObjectFileIsCorruptionNamingThePath) {
  PutAndCommit("job", 1, {{"a", Pattern(1000, 1)}});
  const std::string path = JoinPath(StepPath("job", 1), "a");
  ASSERT_EQ(::truncate(path.c_str(), 600), 0);
  std::string buf(1000, '\0');
  Status s = store_->ReadObject("job", 1, "a", 0, buf.data(), buf.size());
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_TRUE(store_->ReadObject("job", 1, "a", 100, buf.data(), 500).ok());
}

TEST_F(FsStoreTest, JunkInTheBaseDoesNotBreakListingsAndIsNeverSwept) {
  PutAndCommit("job", 1, {{"a", "1"}});
  PutAndCommit("job", 10, {{"a", "10"}});
  WriteRaw(JoinPath(base_, "README.txt"), "foreign file");
  WriteRaw(JoinPath(base_, "job2"), "a file where a namespace dir is expected");
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "not a namespace/step_0000000001")).ok());
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "emptyns")).ok());
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "job/step_12")).ok());
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "job/step_abcdefghij")).ok());
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "job/step_00000000011")).ok());
  ASSERT_TRUE(MakeDirs(JoinPath(base_, "job/lost+found")).ok());
  WriteRaw(JoinPath(base_, "job/step_0000000005"), "a file where a step dir is expected");
  WriteRaw(JoinPath(base_, "job/notes"), "junk");
  WriteRaw(JoinPath(base_, "onlyjunk/step_0000000001"), "a file, not a step dir");

  auto ns = store_->ListNamespaces();
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  EXPECT_EQ(*ns, std::vector<std::string>{"job"});
  EXPECT_EQ(*store_->ListCommittedSteps("job"), (std::vector<uint64_t>{1, 10}));
  EXPECT_TRUE(store_->ListCommittedSteps("job2")->empty());
  EXPECT_TRUE(store_->ListCommittedSteps("emptyns")->empty());
  EXPECT_TRUE(store_->ListCommittedSteps("onlyjunk")->empty());
  EXPECT_EQ(store_->ReadManifest("job", 5).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ReadManifest("job2", 1).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job2", 1, "a").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->DeleteStep("job", 5).ok());

  EXPECT_EQ(*store_->SweepUncommitted("job", {}), 0);
  EXPECT_EQ(*store_->SweepUncommitted("job2", {}), 0);
  EXPECT_EQ(*store_->SweepUncommitted("onlyjunk", {}), 0);
  for (const char* p : {"README.txt", "job2", "job/step_12", "job/step_abcdefghij",
                        "job/step_0000000005", "job/notes", "job/lost+found",
                        "onlyjunk/step_0000000001"}) {
    EXPECT_TRUE(StatPath(JoinPath(base_, p))->exists) << p;
  }
  // A put or an empty commit into a namespace that is a file fails cleanly.
  EXPECT_EQ(store_->PutObject("job2", 1, "a", "x", 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(store_->CommitStep(MakeManifest("job2", 1, {})).code(), Code::kFailedPrecondition);
}

TEST_F(FsStoreTest, CrashLeftoversAreInvisibleAndSwept) {
  PutAndCommit("job", 1, {{"a", "committed"}, {"x.tmp.1.2", "an object with a tmp-like name"}});
  // A crash mid-put (tmp files) and mid-step (objects without a manifest),
  // simulated by writing what the store would have left behind.
  const std::string step1 = StepPath("job", 1);
  WriteRaw(JoinPath(step1, "a.tmp.4242.7"), "half");
  WriteRaw(JoinPath(step1, "sub/b.tmp.4242.8"), "half");
  WriteRaw(JoinPath(step1, std::string(kManifestName) + ".tmp.4242.9"), "{");
  WriteRaw(JoinPath(StepPath("job", 2), "a"), "objects but no manifest");
  WriteRaw(JoinPath(StepPath("job", 2), "dir/b.tmp.1.1"), "partial");
  WriteRaw(JoinPath(StepPath("job", 3), "a"), "being written now");
  WriteRaw(JoinPath(StepPath("job", 3), "a.tmp.9.9"), "in flight");

  EXPECT_EQ(*store_->ListCommittedSteps("job"), std::vector<uint64_t>{1});
  EXPECT_EQ(store_->ReadManifest("job", 2).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ReadManifest("job", 3).status().code(), Code::kNotFound);

  auto swept = store_->SweepUncommitted("job", {.keep = {3}});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);
  EXPECT_EQ(ListFiles(JoinPath(base_, "job")),
            (std::vector<std::string>{"step_0000000001/_tierckpt_manifest.json",
                                      "step_0000000001/a", "step_0000000001/x.tmp.1.2",
                                      "step_0000000003/a", "step_0000000003/a.tmp.9.9"}));
  char buf[9];
  ASSERT_TRUE(store_->ReadObject("job", 1, "a", 0, buf, 9).ok());
  EXPECT_EQ(std::string(buf, 9), "committed");
}

TEST_F(FsStoreTest, DeleteStepRemovesTheWholeDirectory) {
  PutAndCommit("job", 1, {{"a", "1"}, {"d/e/f", "2"}});
  ASSERT_TRUE(store_->DeleteStep("job", 1).ok());
  EXPECT_FALSE(StatPath(StepPath("job", 1))->exists);
  // Deleting a step whose manifest was already removed (a crash mid-delete).
  PutAndCommit("job", 2, {{"a", "1"}});
  ASSERT_TRUE(RemoveTree(JoinPath(StepPath("job", 2), kManifestName)).ok());
  ASSERT_TRUE(store_->DeleteStep("job", 2).ok());
  EXPECT_FALSE(StatPath(StepPath("job", 2))->exists);
}

TEST_F(FsStoreTest, OpenCreatesTheBaseAndRejectsNonDirectories) {
  auto nested = FsObjectStore::Open(tmp_.Sub("x/y/z"));
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_TRUE(StatPath(tmp_.Sub("x/y/z"))->is_dir);
  EXPECT_EQ((*FsObjectStore::Open(tmp_.Sub("x/./y/../y/z/")))->base(), tmp_.Sub("x/y/z"));

  WriteRaw(tmp_.Sub("afile"), "not a dir");
  auto file = FsObjectStore::Open(tmp_.Sub("afile"));
  EXPECT_EQ(file.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(file.status().message().find(tmp_.Sub("afile")), std::string::npos);
  EXPECT_EQ(FsObjectStore::Open(tmp_.Sub("afile/below")).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(FsObjectStore::Open("relative/path").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FsObjectStore::Open("").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(FsObjectStore::Open(std::string("/tmp/a\0b", 8)).status().code(), Code::kInvalidArgument);
  if (::geteuid() != 0) {  // root writes anywhere
    ASSERT_TRUE(MakeDirs(tmp_.Sub("ro")).ok());
    ASSERT_EQ(::chmod(tmp_.Sub("ro").c_str(), 0500), 0);
    EXPECT_EQ(FsObjectStore::Open(tmp_.Sub("ro")).status().code(), Code::kFailedPrecondition);
    ASSERT_EQ(::chmod(tmp_.Sub("ro").c_str(), 0700), 0);
  }
}

}  // namespace
}  // namespace tierckpt
