// One suite, every ObjectStore: the file store (temp dir), the memory store,
// the fault wrapper with an empty plan around a memory store, the S3 store on
// an in-process fake bucket (FakeS3), and — only when TIERCKPT_TEST_S3_URL
// is set, e.g. "s3://tc-test/conf?endpoint=http://127.0.0.1:5123" — the S3
// store on a real server, each test under a fresh sub-prefix of that URL.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "common/names.h"
#include "s3/s3_client_test_util.h"
#include "store/fs_store.h"
#include "store/mem_store.h"
#include "store/s3_store.h"
#include "store/store_test_util.h"
#include "testing/fake_s3.h"
#include "testing/fault_store.h"

namespace tierckpt {
namespace {

using testing_util::Contents;
using testing_util::ListFiles;
using testing_util::MakeManifest;
using testing_util::Pattern;
using testing_util::TempDir;

struct StoreFactory {
  std::string name;
  // Makes a fresh, empty store; `scratch` is an empty temp dir it may use
  // (the file store roots itself at <scratch>/base).
  std::function<std::shared_ptr<ObjectStore>(const std::string& scratch)> make;
};

// gtest prints the store's name, not its bytes, in failure messages.
void PrintTo(const StoreFactory& factory, std::ostream* os) { *os << factory.name; }

constexpr const char* kS3UrlVariable = "TIERCKPT_TEST_S3_URL";

// The S3 store on a fresh FakeS3 bucket, with small parts so that the larger
// objects go multipart and reads use parallel ranges.
std::shared_ptr<ObjectStore> MakeFakeS3Store() {
  s3::S3Config config = s3::testing_util::TestConfig();
  config.part_size = 8192;
  config.multipart_threshold = 8192;
  return std::make_shared<S3ObjectStore>(config, std::make_shared<s3::FakeS3>("bkt"),
                                         std::make_shared<s3::testing_util::MarkingSigner>(),
                                         s3::testing_util::InstantRetries());
}

// The S3 store at $TIERCKPT_TEST_S3_URL plus a sub-prefix unique to this
// test: the scratch directory's name (mkdtemp-unique).
std::shared_ptr<ObjectStore> MakeRealS3Store(const std::string& scratch) {
  std::string url = std::getenv(kS3UrlVariable);
  std::string query;
  if (size_t q = url.find('?'); q != std::string::npos) {
    query = url.substr(q);
    url.resize(q);
  }
  while (!url.empty() && url.back() == '/') url.pop_back();
  url += "/" + scratch.substr(scratch.rfind('/') + 1) + query;
  auto config = s3::ParseS3Url(url);
  EXPECT_TRUE(config.ok()) << kS3UrlVariable << ": " << config.status().ToString();
  if (!config.ok()) return nullptr;
  auto store = S3ObjectStore::Open(*config);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::shared_ptr<ObjectStore>(std::move(store).value()) : nullptr;
}

std::vector<StoreFactory> AllStores() {
  std::vector<StoreFactory> stores = {
      {"Fs",
       [](const std::string& scratch) -> std::shared_ptr<ObjectStore> {
         auto s = FsObjectStore::Open(JoinPath(scratch, "base"));
         EXPECT_TRUE(s.ok()) << s.status().ToString();
         return s.ok() ? std::shared_ptr<ObjectStore>(std::move(s).value()) : nullptr;
       }},
      {"Mem", [](const std::string&) -> std::shared_ptr<ObjectStore> {
         return std::make_shared<MemObjectStore>("conformance");
       }},
      {"FaultNoFaults", [](const std::string&) -> std::shared_ptr<ObjectStore> {
         return std::make_shared<FaultInjectingStore>(std::make_shared<MemObjectStore>("wrapped"));
       }},
      {"S3Fake", [](const std::string&) { return MakeFakeS3Store(); }},
  };
  // The real-server instantiation exists only when the variable is set.
  const char* url = std::getenv(kS3UrlVariable);
  if (url != nullptr && *url != '\0') stores.push_back({"S3", MakeRealS3Store});
  return stores;
}

class ObjectStoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make(tmp_.path());
    ASSERT_NE(store_, nullptr);
  }

  void Put(const std::string& ns, uint64_t step, const std::string& name, const std::string& data) {
    Status s = store_->PutObject(ns, step, name, data.data(), data.size());
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void PutAll(const std::string& ns, uint64_t step, const Contents& objects) {
    for (const auto& [name, data] : objects) Put(ns, step, name, data);
  }
  void PutAndCommit(const std::string& ns, uint64_t step, const Contents& objects) {
    PutAll(ns, step, objects);
    Status s = store_->CommitStep(MakeManifest(ns, step, objects));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // The whole object, via ObjectSize + ReadObject.
  Result<std::string> ReadAll(const std::string& ns, uint64_t step, const std::string& name) {
    TC_ASSIGN_OR_RETURN(uint64_t size, store_->ObjectSize(ns, step, name));
    std::string out(size, '\0');
    TC_RETURN_IF_ERROR(store_->ReadObject(ns, step, name, 0, out.data(), out.size()));
    return out;
  }
  std::vector<uint64_t> Committed(const std::string& ns) {
    auto r = store_->ListCommittedSteps(ns);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<uint64_t>{};
  }
  std::vector<std::string> Namespaces() {
    auto r = store_->ListNamespaces();
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<std::string>{};
  }

  TempDir tmp_;
  std::shared_ptr<ObjectStore> store_;
};

TEST_P(ObjectStoreConformance, PutReadSizeRoundTripIncludingEmptyAndSubdirNames) {
  const Contents objects = {{"__0_0.distcp", Pattern(100000, 1)},
                            {".metadata", Pattern(517, 2)},
                            {"empty", ""},
                            {"dir/sub/leaf.bin", Pattern(4096, 3)},
                            {"dir/other", Pattern(1, 4)}};
  PutAll("job", 7, objects);
  for (const auto& [name, data] : objects) {
    auto size = store_->ObjectSize("job", 7, name);
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, data.size()) << name;
    auto got = ReadAll("job", 7, name);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, data) << name;
  }
  // A zero-byte read of an empty object at offset 0 is in range.
  EXPECT_TRUE(store_->ReadObject("job", 7, "empty", 0, nullptr, 0).ok());
}

TEST_P(ObjectStoreConformance, PutReplacesAnEarlierPut) {
  Put("job", 1, "a", Pattern(1000, 1));
  Put("job", 1, "a", "short");
  EXPECT_EQ(*store_->ObjectSize("job", 1, "a"), 5u);
  EXPECT_EQ(*ReadAll("job", 1, "a"), "short");
}

TEST_P(ObjectStoreConformance, RangedReads) {
  const std::string data = Pattern(10000, 9);
  Put("job", 1, "obj", data);
  const std::vector<std::pair<size_t, size_t>> ranges = {
      {0, 1}, {1, 999}, {4095, 2}, {9990, 10}, {10000, 0}};
  for (auto [off, len] : ranges) {
    std::string got(len, '\0');
    Status s = store_->ReadObject("job", 1, "obj", off, got.data(), len);
    ASSERT_TRUE(s.ok()) << off << "+" << len << ": " << s.ToString();
    EXPECT_EQ(got, data.substr(off, len)) << off << "+" << len;
  }
}

TEST_P(ObjectStoreConformance, ReadingPastTheEndIsCorruptionNamingTheObject) {
  Put("job", 3, "obj", Pattern(100, 1));
  std::string buf(200, '\0');
  Status s = store_->ReadObject("job", 3, "obj", 0, buf.data(), 101);
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("obj"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(store_->Describe()), std::string::npos) << s.message();
  EXPECT_EQ(store_->ReadObject("job", 3, "obj", 90, buf.data(), 11).code(), Code::kCorruption);
  EXPECT_EQ(store_->ReadObject("job", 3, "obj", 101, buf.data(), 0).code(), Code::kCorruption);
  EXPECT_EQ(store_->ReadObject("job", 3, "obj", ~0ULL, buf.data(), 2).code(), Code::kCorruption);
}

TEST_P(ObjectStoreConformance, ReadObjectToFileWritesTheWholeObjectIntoTheFile) {
  const std::string data = Pattern(300000, 5);  // several S3 ranges at the fakes' part size
  Put("job", 4, "obj", data);
  Put("job", 4, "empty", "");
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  const int fd = ::fileno(file);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(data.size())), 0);
  Status s = store_->ReadObjectToFile("job", 4, "obj", fd, data.size());
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string got(data.size(), '\0');
  ASSERT_EQ(::pread(fd, got.data(), got.size(), 0), static_cast<ssize_t>(got.size()));
  EXPECT_EQ(got, data);
  EXPECT_TRUE(store_->ReadObjectToFile("job", 4, "empty", fd, 0).ok());
  s = store_->ReadObjectToFile("job", 4, "obj", fd, data.size() + 1);  // the object is shorter
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find(store_->Describe()), std::string::npos) << s.message();
  s = store_->ReadObjectToFile("job", 4, "absent", fd, 1);
  EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("\"absent\""), std::string::npos) << s.message();
  EXPECT_EQ(store_->ReadObjectToFile("job", 4, "../x", fd, 1).code(), Code::kInvalidArgument);
  std::fclose(file);
}

TEST_P(ObjectStoreConformance, MissingObjectsAreNotFoundNamingStoreStepAndObject) {
  Put("job", 1, "present", "x");
  char c = 0;
  Status s = store_->ReadObject("job", 1, "absent", 0, &c, 1);
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find(store_->Describe()), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\"absent\""), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("step 1"), std::string::npos) << s.message();
  EXPECT_EQ(store_->ObjectSize("job", 1, "absent").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job", 2, "present").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("other", 1, "present").status().code(), Code::kNotFound);
}

TEST_P(ObjectStoreConformance, CommitMakesTheStepVisibleInNumericOrder) {
  for (uint64_t step : std::vector<uint64_t>{10, 9, 2, 100, 1000000000, kMaxStep}) {
    PutAndCommit("job", step, {{"a", Pattern(10, static_cast<unsigned>(step))}});
  }
  EXPECT_EQ(Committed("job"),
            (std::vector<uint64_t>{2, 9, 10, 100, 1000000000ULL, kMaxStep}));
  const Contents objects = {{"x/y", Pattern(33, 1)}, {"z", ""}};
  PutAndCommit("job", 11, objects);
  auto m = store_->ReadManifest("job", 11);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const Manifest want = MakeManifest("job", 11, objects);
  EXPECT_EQ(m->ToJson(), want.ToJson());
  EXPECT_EQ(m->ns, "job");
  EXPECT_EQ(m->step, 11u);
  ASSERT_EQ(m->objects.size(), 2u);
  EXPECT_EQ(m->objects[0].name, "x/y");
  // Objects of a committed step stay readable.
  EXPECT_EQ(*ReadAll("job", 11, "x/y"), objects.at("x/y"));
}

TEST_P(ObjectStoreConformance, UncommittedStepsAreInvisibleButTheirObjectsReadable) {
  PutAndCommit("job", 1, {{"a", "1"}});
  Put("job", 2, "a", "2");
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{1});
  EXPECT_EQ(store_->ReadManifest("job", 2).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ReadManifest("job", 3).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ReadManifest("nobody", 1).status().code(), Code::kNotFound);
  EXPECT_EQ(*ReadAll("job", 2, "a"), "2");
  EXPECT_TRUE(Committed("unknown-ns").empty());
}

// What `ls` relies on to read a manifest once per tag (agent/manifest_cache.h): the tagged listing lists
// exactly the committed steps, a manifest read carries the tag the listing shows, and a step committed
// again with other bytes shows another tag (or none, where the store keeps none).
TEST_P(ObjectStoreConformance, TaggedListingListsTheCommittedStepsAndTheTagFollowsTheManifest) {
  PutAndCommit("job", 1, {{"a", "1"}});
  PutAndCommit("job", 2, {{"a", "2"}});
  Put("job", 3, "a", "uncommitted");
  auto listed = store_->ListCommittedStepsTagged("job");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].step, 1u);
  EXPECT_EQ((*listed)[1].step, 2u);
  std::string tag = "stale";
  auto m = store_->ReadManifestTagged("job", 2, &tag);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->step, 2u);
  EXPECT_EQ(tag, (*listed)[1].manifest_tag);
  ASSERT_TRUE(store_->DeleteStep("job", 2).ok());
  PutAndCommit("job", 2, {{"a", "two, longer"}});
  auto again = store_->ListCommittedStepsTagged("job");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  ASSERT_EQ(again->size(), 2u);
  if (!tag.empty()) {
    EXPECT_NE((*again)[1].manifest_tag, tag);
  }
  EXPECT_EQ(store_->ReadManifestTagged("job", 3, &tag).status().code(), Code::kNotFound);
  EXPECT_EQ(tag, "");
  auto none = store_->ListCommittedStepsTagged("unknown-ns");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());
}

TEST_P(ObjectStoreConformance, CommitWithAMissingObjectFailsAndCommitsNothing) {
  Contents objects = {{"a", "aaa"}, {"b", "bbb"}};
  Put("job", 5, "a", "aaa");
  Status s = store_->CommitStep(MakeManifest("job", 5, objects));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("\"b\""), std::string::npos) << s.message();
  EXPECT_TRUE(Committed("job").empty());
  EXPECT_EQ(store_->ReadManifest("job", 5).status().code(), Code::kNotFound);
  // A commit of a step nothing was put into fails the same way.
  EXPECT_EQ(store_->CommitStep(MakeManifest("job", 6, objects)).code(), Code::kFailedPrecondition);
  // Once the object is there, the commit goes through.
  Put("job", 5, "b", "bbb");
  EXPECT_TRUE(store_->CommitStep(MakeManifest("job", 5, objects)).ok());
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{5});
}

TEST_P(ObjectStoreConformance, CommitRefusesAManifestWhoseChecksumsArePending) {
  const Contents objects = {{"a", "aaa"}, {"b", "bbb"}};
  Put("job", 7, "a", "aaa");
  Put("job", 7, "b", "bbb");
  Manifest m = MakeManifest("job", 7, objects);
  m.objects[1].checksum = "";
  m.checksums_pending = true;  // a memory tier's record between commit and hash
  Status s = store_->CommitStep(m);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("pending"), std::string::npos) << s.message();
  EXPECT_TRUE(Committed("job").empty());
  EXPECT_TRUE(store_->CommitStep(MakeManifest("job", 7, objects)).ok());
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{7});
}

TEST_P(ObjectStoreConformance, CommitWithAWrongSizeFailsAndCommitsNothing) {
  Put("job", 5, "a", "aaa");
  Status s = store_->CommitStep(MakeManifest("job", 5, {{"a", "aaaa"}}));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("3 bytes"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("4"), std::string::npos) << s.message();
  EXPECT_TRUE(Committed("job").empty());
  EXPECT_EQ(store_->ReadManifest("job", 5).status().code(), Code::kNotFound);
}

TEST_P(ObjectStoreConformance, CommitOfAnInvalidManifestIsInvalidArgument) {
  Put("job", 1, "a", "x");
  Put("job", 1, "b", "y");
  Manifest m = MakeManifest("job", 1, {{"a", "x"}, {"b", "y"}});
  std::swap(m.objects[0], m.objects[1]);  // unsorted
  EXPECT_EQ(store_->CommitStep(m).code(), Code::kInvalidArgument);
  Manifest bad_checksum = MakeManifest("job", 1, {{"a", "x"}});
  bad_checksum.objects[0].checksum = "md5:nope";
  EXPECT_EQ(store_->CommitStep(bad_checksum).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Committed("job").empty());
}

TEST_P(ObjectStoreConformance, AStepWithNoObjectsCanBeCommitted) {
  ASSERT_TRUE(store_->CommitStep(MakeManifest("job", 4, {})).ok());
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{4});
  EXPECT_TRUE(store_->ReadManifest("job", 4)->objects.empty());
}

TEST_P(ObjectStoreConformance, SecondCommitIsAlreadyExistsAndKeepsTheFirst) {
  PutAndCommit("job", 8, {{"a", "first"}});
  Manifest second = MakeManifest("job", 8, {{"a", "first"}});
  second.node = "someone-else";
  Status s = store_->CommitStep(second);
  EXPECT_EQ(s.code(), Code::kAlreadyExists) << s.ToString();
  EXPECT_EQ(store_->ReadManifest("job", 8)->node, "node-a");
}

TEST_P(ObjectStoreConformance, PutAfterCommitIsFailedPreconditionAndChangesNothing) {
  PutAndCommit("job", 8, {{"a", "first"}});
  const std::string again = "second";
  Status s = store_->PutObject("job", 8, "a", again.data(), again.size());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(store_->PutObject("job", 8, "new", again.data(), again.size()).code(),
            Code::kFailedPrecondition);
  EXPECT_EQ(*ReadAll("job", 8, "a"), "first");
  EXPECT_EQ(store_->ObjectSize("job", 8, "new").status().code(), Code::kNotFound);
}

// The persister's sequence: delete the step's remains, put, commit. (The S3
// store then checks names locally instead of with requests.)
TEST_P(ObjectStoreConformance, AStepDeletedThenRewrittenKeepsEveryRule) {
  Put("job", 3, "stale", "left by an interrupted writer");
  ASSERT_TRUE(store_->DeleteStep("job", 3).ok());
  EXPECT_EQ(store_->ObjectSize("job", 3, "stale").status().code(), Code::kNotFound);
  Put("job", 3, "a", "file");
  EXPECT_EQ(store_->PutObject("job", 3, "a/b", "x", 1).code(), Code::kFailedPrecondition);
  Put("job", 3, "d/e", "file");
  EXPECT_EQ(store_->PutObject("job", 3, "d", "x", 1).code(), Code::kFailedPrecondition);
  Put("job", 3, "a", "again");  // a re-put replaces
  Put("job", 3, "ab", "1");
  ASSERT_TRUE(store_->CommitStep(MakeManifest("job", 3, {{"a", "again"}, {"ab", "1"}, {"d/e", "file"}})).ok());
  EXPECT_EQ(store_->PutObject("job", 3, "new", "x", 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*ReadAll("job", 3, "a"), "again");
  // Deleted again after the commit, it can be written again from scratch.
  ASSERT_TRUE(store_->DeleteStep("job", 3).ok());
  Put("job", 3, "a/b", "now a directory");
  EXPECT_EQ(*ReadAll("job", 3, "a/b"), "now a directory");
  EXPECT_TRUE(Committed("job").empty());
}

TEST_P(ObjectStoreConformance, AnObjectNameCannotAlsoBeADirectory) {
  Put("job", 1, "a", "file");
  EXPECT_EQ(store_->PutObject("job", 1, "a/b", "x", 1).code(), Code::kFailedPrecondition);
  Put("job", 1, "d/e", "file");
  EXPECT_EQ(store_->PutObject("job", 1, "d", "x", 1).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*ReadAll("job", 1, "a"), "file");
  EXPECT_EQ(*ReadAll("job", 1, "d/e"), "file");
  // Names that only share a prefix are fine.
  Put("job", 1, "ab", "1");
  Put("job", 1, "d.x", "2");
}

// The persister's call: a whole step at once, on a fresh step and on one the
// store emptied itself (the S3 store checks names locally there).
TEST_P(ObjectStoreConformance, PutObjectsWritesTheWholeStep) {
  const Contents objects = {{"__0_0.distcp", Pattern(100000, 1)}, {"__1_0.distcp", Pattern(70001, 2)},
                            {".metadata", Pattern(517, 3)},      {"empty", ""},
                            {"dir/sub/leaf.bin", Pattern(4096, 4)}};
  for (bool emptied_first : {false, true}) {
    const uint64_t step = emptied_first ? 2 : 1;
    if (emptied_first) {
      ASSERT_TRUE(store_->DeleteStep("job", step).ok());
    }
    std::vector<ObjectBytes> batch;
    for (const auto& [name, data] : objects) batch.push_back({name, data.data(), data.size()});
    Status s = store_->PutObjects("job", step, batch, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (const auto& [name, data] : objects) {
      auto got = ReadAll("job", step, name);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status().ToString();
      EXPECT_EQ(*got, data) << name;
    }
    ASSERT_TRUE(store_->CommitStep(MakeManifest("job", step, objects)).ok());
  }
  EXPECT_EQ(Committed("job"), (std::vector<uint64_t>{1, 2}));
}

TEST_P(ObjectStoreConformance, PutObjectsKeepsEveryRuleOfPutObject) {
  const std::string x = "x";
  // Names clashing within the batch, on a fresh step and on an emptied one.
  for (uint64_t step : {1, 2}) {
    if (step == 2) {
      ASSERT_TRUE(store_->DeleteStep("job", step).ok());
    }
    Status s = store_->PutObjects("job", step, {{"a", x.data(), 1}, {"a/b", x.data(), 1}}, nullptr);
    EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
    EXPECT_EQ(store_->ObjectSize("job", step, "a/b").status().code(), Code::kNotFound);
  }
  // A committed step is immutable.
  PutAndCommit("job", 3, {{"a", "first"}});
  Status s = store_->PutObjects("job", 3, {{"a", x.data(), 1}, {"new", x.data(), 1}}, nullptr);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(*ReadAll("job", 3, "a"), "first");
  EXPECT_EQ(store_->ObjectSize("job", 3, "new").status().code(), Code::kNotFound);
  // Hostile names are refused.
  EXPECT_EQ(store_->PutObjects("job", 4, {{"ok", x.data(), 1}, {"../escape", x.data(), 1}}, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->ObjectSize("job", 4, "../escape").status().code(), Code::kInvalidArgument);
}

TEST_P(ObjectStoreConformance, PutObjectsCancelledBeforeItStartsWritesNothing) {
  const std::string data = Pattern(5000, 1);
  Status s = store_->PutObjects("job", 1, {{"a", data.data(), data.size()}, {"b", data.data(), data.size()}},
                                [] { return true; });
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ(store_->ObjectSize("job", 1, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job", 1, "b").status().code(), Code::kNotFound);
}

TEST_P(ObjectStoreConformance, DeleteStepMakesItInvisibleAndIsOkWhenAbsent) {
  PutAndCommit("job", 1, {{"a", "1"}, {"sub/b", "2"}});
  PutAndCommit("job", 2, {{"a", "2"}});
  ASSERT_TRUE(store_->DeleteStep("job", 1).ok());
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{2});
  EXPECT_EQ(store_->ReadManifest("job", 1).status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job", 1, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job", 1, "sub/b").status().code(), Code::kNotFound);
  EXPECT_TRUE(store_->DeleteStep("job", 1).ok());
  EXPECT_TRUE(store_->DeleteStep("job", 77).ok());
  EXPECT_TRUE(store_->DeleteStep("nobody", 1).ok());
  // Uncommitted steps can be deleted too, and a deleted step can be rewritten.
  Put("job", 3, "a", "x");
  EXPECT_TRUE(store_->DeleteStep("job", 3).ok());
  EXPECT_EQ(store_->ObjectSize("job", 3, "a").status().code(), Code::kNotFound);
  PutAndCommit("job", 1, {{"a", "again"}});
  EXPECT_EQ(Committed("job"), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(*ReadAll("job", 1, "a"), "again");
}

TEST_P(ObjectStoreConformance, SweepRemovesOnlyUncommittedStepsAndHonoursKeep) {
  PutAndCommit("job", 1, {{"a", "1"}});
  Put("job", 2, "a", "2");
  Put("job", 3, "a", "3");
  Put("job", 4, "dir/a", "4");
  Put("other", 2, "a", "other");
  auto swept = store_->SweepUncommitted("job", {.keep = {3}});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 2);
  EXPECT_EQ(store_->ObjectSize("job", 2, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(store_->ObjectSize("job", 4, "dir/a").status().code(), Code::kNotFound);
  EXPECT_EQ(*ReadAll("job", 3, "a"), "3");       // kept
  EXPECT_EQ(*ReadAll("job", 1, "a"), "1");       // committed
  EXPECT_EQ(*ReadAll("other", 2, "a"), "other");  // another namespace
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{1});
  EXPECT_EQ(*store_->SweepUncommitted("job", {}), 1);
  EXPECT_EQ(store_->ObjectSize("job", 3, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(*store_->SweepUncommitted("job", {}), 0);
  EXPECT_EQ(*store_->SweepUncommitted("nobody", {}), 0);
  // The keep step may itself be committed or absent.
  EXPECT_EQ(*store_->SweepUncommitted("job", {.keep = {1}}), 0);
  EXPECT_EQ(*store_->SweepUncommitted("job", {.keep = {99}}), 0);
  EXPECT_EQ(Committed("job"), std::vector<uint64_t>{1});
}

TEST_P(ObjectStoreConformance, SweepBelowLeavesNewerStepsAndEveryKeptStep) {
  PutAndCommit("job", 5, {{"a", "5"}});
  for (uint64_t step : {1, 2, 3, 6}) Put("job", step, "a", std::to_string(step));
  auto swept = store_->SweepUncommitted("job", {.keep = {1, 2}, .below = 5});
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 1);  // step 3 only
  EXPECT_EQ(store_->ObjectSize("job", 3, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(*ReadAll("job", 1, "a"), "1");
  EXPECT_EQ(*ReadAll("job", 2, "a"), "2");
  EXPECT_EQ(*ReadAll("job", 6, "a"), "6");  // not below 5
  EXPECT_EQ(*ReadAll("job", 5, "a"), "5");  // committed
  EXPECT_EQ(*store_->SweepUncommitted("job", {.below = 2}), 1);
  EXPECT_EQ(store_->ObjectSize("job", 1, "a").status().code(), Code::kNotFound);
  EXPECT_EQ(*ReadAll("job", 2, "a"), "2");
}

TEST_P(ObjectStoreConformance, ListNamespacesIsSortedAndCountsUncommittedSteps) {
  EXPECT_TRUE(Namespaces().empty());
  PutAndCommit("zeta", 1, {{"a", "1"}});
  Put("alpha", 5, "a", "uncommitted");
  PutAndCommit("mid.job-1_x", 2, {});
  EXPECT_EQ(Namespaces(), (std::vector<std::string>{"alpha", "mid.job-1_x", "zeta"}));
  ASSERT_TRUE(store_->DeleteStep("alpha", 5).ok());
  EXPECT_EQ(Namespaces(), (std::vector<std::string>{"mid.job-1_x", "zeta"}));
  EXPECT_EQ(*store_->SweepUncommitted("zeta", {}), 0);
  EXPECT_EQ(Namespaces(), (std::vector<std::string>{"mid.job-1_x", "zeta"}));
}

TEST_P(ObjectStoreConformance, HostileNamesAreInvalidArgumentAndWriteNothing) {
  const std::string victim = tmp_.Sub("victim");
  ASSERT_TRUE(WriteFileAtomic(victim, "untouched", false).ok());
  const std::vector<std::string> bad_ns = {
      "../x", "/abs", "a/b", "", std::string("a\0b", 3), ".", "..", std::string(129, 'n'), "sp ace"};
  const std::vector<std::string> bad_names = {"../x",
                                              "../../victim",
                                              "/abs",
                                              "a//b",
                                              std::string("a\0b", 3),
                                              "a/../../x",
                                              "",
                                              ".",
                                              "a/",
                                              "a/./b",
                                              "_tierckpt_manifest.json",
                                              "_tierckpt_marker",
                                              std::string(1025, 'o')};
  const std::string data = "payload";
  char buf[8];
  for (const std::string& ns : bad_ns) {
    SCOPED_TRACE("namespace " + QuoteForMessage(ns));
    EXPECT_EQ(store_->PutObject(ns, 1, "a", data.data(), data.size()).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->ReadObject(ns, 1, "a", 0, buf, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->ObjectSize(ns, 1, "a").status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->CommitStep(MakeManifest(ns, 1, {})).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->ReadManifest(ns, 1).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->ListCommittedSteps(ns).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->DeleteStep(ns, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->SweepUncommitted(ns, {}).status().code(), Code::kInvalidArgument);
  }
  for (const std::string& name : bad_names) {
    SCOPED_TRACE("object " + QuoteForMessage(name));
    Status s = store_->PutObject("job", 1, name, data.data(), data.size());
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("PutObject"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(store_->Describe()), std::string::npos) << s.message();
    EXPECT_EQ(store_->ReadObject("job", 1, name, 0, buf, 1).code(), Code::kInvalidArgument);
    EXPECT_EQ(store_->ObjectSize("job", 1, name).status().code(), Code::kInvalidArgument);
    Manifest m = MakeManifest("job", 1, {});
    m.objects.push_back({name, 0, "xxh3-64:2d06800538d394c2", "n"});
    EXPECT_EQ(store_->CommitStep(m).code(), Code::kInvalidArgument);
  }
  const uint64_t too_big = kMaxStep + 1;
  EXPECT_EQ(store_->PutObject("job", too_big, "a", data.data(), data.size()).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->ReadObject("job", too_big, "a", 0, buf, 1).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->ReadManifest("job", too_big).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->CommitStep(MakeManifest("job", too_big, {})).code(), Code::kInvalidArgument);
  EXPECT_EQ(store_->DeleteStep("job", too_big).code(), Code::kInvalidArgument);

  // Nothing was written anywhere: not in the store, not next to it.
  EXPECT_TRUE(Namespaces().empty());
  EXPECT_EQ(*ReadFileToString(victim, 100), "untouched");
  EXPECT_EQ(ListFiles(tmp_.path()), std::vector<std::string>{"victim"});
}

TEST_P(ObjectStoreConformance, TheManifestIsNotReachableAsAnObject) {
  PutAndCommit("job", 1, {{"a", "1"}});
  char buf[4];
  EXPECT_EQ(store_->ReadObject("job", 1, std::string(kManifestName), 0, buf, 1).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(store_->ObjectSize("job", 1, std::string(kManifestName)).status().code(),
            Code::kInvalidArgument);
}

TEST_P(ObjectStoreConformance, ConcurrentPutsFromFourThreadsToOneStep) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 40;
  Contents all;
  std::vector<Contents> per_thread(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      // Every thread also writes into the shared "common/" subdirectory.
      std::string name = (i % 2 == 0 ? "common/t" : "t" + std::to_string(t) + "/o") +
                         std::to_string(t) + "_" + std::to_string(i);
      std::string data = Pattern(static_cast<size_t>(i * 97 + t), static_cast<unsigned>(t * 1000 + i));
      per_thread[t][name] = data;
      all[name] = data;
    }
  }
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (const auto& [name, data] : per_thread[t]) {
        Status s = store_->PutObject("job", 12, name, data.data(), data.size());
        if (!s.ok()) {
          results[t] = s;
          return;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_TRUE(results[t].ok()) << results[t].ToString();
  ASSERT_TRUE(store_->CommitStep(MakeManifest("job", 12, all)).ok());
  for (const auto& [name, data] : all) EXPECT_EQ(*ReadAll("job", 12, name), data) << name;
  EXPECT_EQ(store_->ReadManifest("job", 12)->objects.size(), all.size());
}

INSTANTIATE_TEST_SUITE_P(AllStores, ObjectStoreConformance, ::testing::ValuesIn(AllStores()),
                         [](const ::testing::TestParamInfo<StoreFactory>& p) {
                           return p.param.name;
                         });

}  // namespace
}  // namespace tierckpt
