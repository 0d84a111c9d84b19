// DurableBases and RoutedStore — canonical bases (paths, links, "..", S3
// options), the allow-list (wildcards, pattern options, refusals), bindings
// kept across a restart, a binding refused after the allow-list changed,
// the change check, the limits, and a routed store sending each namespace's
// steps to its own base.
#include "agent/durable_bases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "agent/routed_store.h"
#include "common/checksum.h"
#include "os/files.h"
#include "store/mem_store.h"
#include "testing/temp_dir.h"

namespace tierckpt::agent {
namespace {

using testing_util::TempDir;

DurableAllowList Allow(const std::vector<std::string>& patterns) {
  Result<DurableAllowList> a = DurableAllowList::Parse(patterns);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : DurableAllowList();
}

DurableBases::Opener MemOpener(int* opened = nullptr) {
  return [opened](const std::string& url) -> Result<std::unique_ptr<ObjectStore>> {
    if (opened != nullptr) ++*opened;
    return OpenObjectStore(url);
  };
}

struct Bases {
  explicit Bases(std::vector<std::string> allow, std::string file = "")
      : file_(file.empty() ? dir.Sub("durable_bases.json") : file), allow_(std::move(allow)) {
    Open();
  }
  void Open() {
    Result<std::unique_ptr<ObjectStore>> def = OpenObjectStore("mem://db-default");
    ASSERT_TRUE(def.ok());
    Result<std::unique_ptr<DurableBases>> b =
        DurableBases::Open(file_, std::shared_ptr<ObjectStore>(std::move(def).value()),
                           DurableBase{"mem://db-default", ""}, Allow(allow_), MemOpener(&opened));
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    bases = std::move(b).value();
  }
  TempDir dir{"tc_bases"};
  std::string file_;
  std::vector<std::string> allow_;
  int opened = 0;
  std::unique_ptr<DurableBases> bases;
};

TEST(CanonicalDurableBase, PathsAreAbsoluteWithLinksAndDotsResolved) {
  TempDir d("tc_canon");
  ASSERT_TRUE(MakeDirs(d.Sub("real/x"), 0700).ok());
  ASSERT_EQ(::symlink(d.Sub("real").c_str(), d.Sub("link").c_str()), 0);
  Result<DurableBase> viaLink = CanonicalDurableBase("file://" + d.Sub("link/x/"));
  ASSERT_TRUE(viaLink.ok()) << viaLink.status().ToString();
  EXPECT_EQ(viaLink->location, d.Sub("real/x"));
  Result<DurableBase> dots = CanonicalDurableBase(d.Sub("real/x/../../link/new/dir"));
  ASSERT_TRUE(dots.ok());
  EXPECT_EQ(dots->location, d.Sub("real/new/dir"));  // the missing part is kept, lexically normal
  EXPECT_EQ(CanonicalDurableBase("rel/dir").status().code(), Code::kInvalidArgument);
  Result<DurableBase> rel = CanonicalDurableBase("rel/dir", d.path());
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->location, d.Sub("rel/dir"));
}

TEST(CanonicalDurableBase, S3KeepsOptionsApartAndRefusesBadInput) {
  Result<DurableBase> s3 = CanonicalDurableBase("s3://bucket/pre/fix//?endpoint=http://127.0.0.1:9000");
  ASSERT_TRUE(s3.ok());
  EXPECT_EQ(s3->location, "s3://bucket/pre/fix");
  EXPECT_EQ(s3->options, "endpoint=http://127.0.0.1:9000");
  EXPECT_EQ(s3->url(), "s3://bucket/pre/fix?endpoint=http://127.0.0.1:9000");
  for (const std::string& bad : std::vector<std::string>{"", "s3://", "s3:///", "ftp://host/x", "/a\nb",
                                                         std::string(kMaxDurableBaseLength + 1, 'a')}) {
    Result<DurableBase> r = CanonicalDurableBase(bad);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("durable base"), std::string::npos) << r.status().ToString();
  }
}

TEST(DurableAllowList, WildcardsAndPatternOptions) {
  TempDir d("tc_allow");
  DurableAllowList a =
      Allow({"s3://team-bucket/*?endpoint=http://127.0.0.1:9", d.Sub("fsx") + "/*", "mem://job-*"});
  Result<DurableBase> s3 = a.Resolve(DurableBase{"s3://team-bucket/runs/a", ""});
  ASSERT_TRUE(s3.ok()) << s3.status().ToString();
  EXPECT_EQ(s3->options, "endpoint=http://127.0.0.1:9");             // the operator's endpoint, not the job's
  EXPECT_TRUE(a.Resolve(DurableBase{"s3://team-bucket", ""}).ok());  // "X/*" allows X
  EXPECT_TRUE(a.Resolve(DurableBase{"s3://team-bucket/x", "endpoint=http://127.0.0.1:9"}).ok());
  Result<DurableBase> evil = a.Resolve(DurableBase{"s3://team-bucket/x", "endpoint=http://evil"});
  EXPECT_EQ(evil.status().code(), Code::kPermissionDenied);
  EXPECT_NE(evil.status().message().find("--durable-allow"), std::string::npos);
  EXPECT_EQ(a.Resolve(DurableBase{"s3://team-bucket-2/x", ""}).status().code(), Code::kPermissionDenied);
  EXPECT_EQ(a.Resolve(DurableBase{"s3://other/x", ""}).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(a.Resolve(DurableBase{d.Sub("fsx/deep/er"), ""}).ok());
  EXPECT_EQ(a.Resolve(DurableBase{d.Sub("fsx2"), ""}).status().code(), Code::kPermissionDenied);
  EXPECT_TRUE(a.Resolve(DurableBase{"mem://job-7", ""}).ok());
  EXPECT_EQ(DurableAllowList::Parse({"relative/*"}).status().code(), Code::kInvalidArgument);
}

TEST(DurableAllowList, ALinkCannotLeadOutOfAnAllowedDirectory) {
  TempDir d("tc_allow_link");
  ASSERT_TRUE(MakeDirs(d.Sub("fsx"), 0700).ok());
  ASSERT_TRUE(MakeDirs(d.Sub("secret"), 0700).ok());
  ASSERT_EQ(::symlink(d.Sub("secret").c_str(), d.Sub("fsx/out").c_str()), 0);
  DurableAllowList a = Allow({d.Sub("fsx") + "/*"});
  Result<DurableBase> escaped = CanonicalDurableBase(d.Sub("fsx/out/x"));
  ASSERT_TRUE(escaped.ok());
  EXPECT_EQ(a.Resolve(*escaped).status().code(), Code::kPermissionDenied);
  Result<DurableBase> dots = CanonicalDurableBase(d.Sub("fsx/../secret"));
  ASSERT_TRUE(dots.ok());
  EXPECT_EQ(a.Resolve(*dots).status().code(), Code::kPermissionDenied);
}

TEST(DurableBases, BindsRoutesAndKeepsBindingsAcrossARestart) {
  Bases b({"mem://db-job-*"});
  EXPECT_EQ(b.bases->DescribeFor("a"), "mem://db-default");
  Result<std::string> bound = b.bases->Bind("a", "mem://db-job-a");
  ASSERT_TRUE(bound.ok()) << bound.status().ToString();
  EXPECT_EQ(*bound, "mem://db-job-a");
  ASSERT_TRUE(b.bases->Bind("b", "mem://db-job-a").ok());  // shares the open store
  EXPECT_EQ(b.opened, 1);
  Result<std::shared_ptr<ObjectStore>> a = b.bases->For("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->Describe(), "mem://db-job-a");
  EXPECT_EQ((*b.bases->For("other"))->Describe(), "mem://db-default");
  Result<std::string> refused = b.bases->Bind("c", "mem://elsewhere");
  EXPECT_EQ(refused.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(b.bases->Bindings().count("c"), 0u);

  b.Open();  // a restart on the same root
  EXPECT_EQ(b.bases->Bindings(),
            (std::map<std::string, std::string>{{"a", "mem://db-job-a"}, {"b", "mem://db-job-a"}}));
  EXPECT_EQ(b.bases->DescribeFor("b"), "mem://db-job-a");
  // The default base unbinds.
  ASSERT_TRUE(b.bases->Bind("a", "mem://db-default").ok());
  EXPECT_EQ(b.bases->Bindings().count("a"), 0u);
  b.Open();
  EXPECT_EQ(b.bases->Bindings().count("a"), 0u);
}

TEST(DurableBases, ABindingTheNewAllowListRefusesFailsInsteadOfFallingBack) {
  Bases b({"mem://db-job-*"});
  ASSERT_TRUE(b.bases->Bind("a", "mem://db-job-r").ok());
  b.allow_ = {"mem://db-other-*"};
  b.Open();
  Result<std::shared_ptr<ObjectStore>> a = b.bases->For("a");
  EXPECT_EQ(a.status().code(), Code::kPermissionDenied);
  EXPECT_NE(a.status().message().find("mem://db-job-r"), std::string::npos) << a.status().ToString();
  RoutedStore routed(b.bases.get());
  EXPECT_EQ(routed.ListCommittedSteps("a").status().code(), Code::kPermissionDenied);
  ASSERT_TRUE(b.bases->Bind("a", "mem://db-other-1").ok());  // the job binds an allowed base again
  EXPECT_TRUE(b.bases->For("a").ok());
}

TEST(DurableBases, TheChangeCheckCanRefuseAndIsAskedOnlyOnAChange) {
  Bases b({"mem://db-job-*"});
  int asked = 0;
  auto busy = [&](const std::string& from) {
    ++asked;
    EXPECT_EQ(from, "mem://db-default");
    return FailedPrecondition("busy");
  };
  EXPECT_EQ(b.bases->Bind("a", "mem://db-job-c", busy).status().code(), Code::kFailedPrecondition);
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(b.bases->DescribeFor("a"), "mem://db-default");
  EXPECT_TRUE(b.bases->Bind("a", "mem://db-default", busy).ok());  // no change: not asked
  EXPECT_EQ(asked, 1);
}

TEST(DurableBases, ABadFileIsAnErrorNamingIt) {
  TempDir d("tc_bases_bad");
  const std::string file = d.Sub("durable_bases.json");
  for (const std::string& text : std::vector<std::string>{"not json", "{\"namespaces\": 3}",
                                                          "{\"namespaces\": {\"bad name!\": \"/x\"}}",
                                                          "{\"namespaces\": {\"a\": \"ftp://x\"}}"}) {
    ASSERT_TRUE(WriteFileAtomic(file, text, false).ok());
    Result<std::unique_ptr<DurableBases>> b = DurableBases::Open(
        file, std::shared_ptr<ObjectStore>(std::move(OpenObjectStore("mem://db-d")).value()),
        DurableBase{"mem://db-d", ""}, DurableAllowList(), MemOpener());
    EXPECT_EQ(b.status().code(), Code::kCorruption) << text;
    EXPECT_NE(b.status().message().find(file), std::string::npos) << b.status().ToString();
    Result<std::string> kept = ReadFileToString(file, 1 << 20);
    EXPECT_EQ(*kept, text);  // nothing overwritten
  }
}

TEST(DurableBases, AtMostSoManyBasesOpen) {
  Bases b({"mem://db-many-*"});
  for (size_t i = 0; i < kMaxDurableBases; ++i) {
    ASSERT_TRUE(b.bases->Bind("ns" + std::to_string(i), "mem://db-many-" + std::to_string(i)).ok()) << i;
  }
  Result<std::string> over = b.bases->Bind("one-more", "mem://db-many-x");
  EXPECT_EQ(over.status().code(), Code::kResourceExhausted);
  EXPECT_NE(over.status().message().find("at most"), std::string::npos);
  EXPECT_TRUE(b.bases->Bind("one-more", "mem://db-many-3").ok());  // an open one is shared
}

TEST(RoutedStore, EachNamespacePersistsToItsOwnBase) {
  Bases b({"mem://db-route-*"});
  ASSERT_TRUE(b.bases->Bind("job-b", "mem://db-route-b").ok());
  RoutedStore routed(b.bases.get());
  const std::string data = "payload";
  for (const std::string& ns : std::vector<std::string>{"job-a", "job-b"}) {
    ASSERT_TRUE(routed.PutObject(ns, 5, "o", data.data(), data.size()).ok());
    Manifest m;
    m.ns = ns;
    m.step = 5;
    m.objects.push_back(ObjectEntry{"o", data.size(), ComputeChecksum(data.data(), data.size()).ToString()});
    ASSERT_TRUE(routed.CommitStep(m).ok()) << ns;
  }
  std::shared_ptr<MemObjectStore> def = *NamedMemStore("db-default");
  std::shared_ptr<MemObjectStore> own = *NamedMemStore("db-route-b");
  EXPECT_EQ(*def->ListCommittedSteps("job-a"), std::vector<uint64_t>{5});
  EXPECT_TRUE(def->ListCommittedSteps("job-b")->empty());
  EXPECT_EQ(*own->ListCommittedSteps("job-b"), std::vector<uint64_t>{5});
  EXPECT_EQ(*routed.ListCommittedSteps("job-b"), std::vector<uint64_t>{5});
  EXPECT_EQ(routed.DescribeNamespace("job-b"), "mem://db-route-b");
  EXPECT_EQ(routed.Describe(), "mem://db-default");
  Result<std::vector<std::string>> names = routed.ListNamespaces();
  ASSERT_TRUE(names.ok());
  EXPECT_NE(std::find(names->begin(), names->end(), "job-b"), names->end());
  EXPECT_NE(std::find(names->begin(), names->end(), "job-a"), names->end());
  ASSERT_TRUE(routed.DeleteStep("job-b", 5).ok());
  EXPECT_TRUE(own->ListCommittedSteps("job-b")->empty());
}

}  // namespace
}  // namespace tierckpt::agent
