// OpenObjectStore: every accepted URL form, and clear errors for the rest.

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/names.h"
#include "os/files.h"
#include "store/mem_store.h"
#include "store/object_store.h"
#include "store/s3_store.h"
#include "store/store_test_util.h"

namespace tierckpt {
namespace {

using testing_util::TempDir;

constexpr const char* kFormsHint =
    "file:///abs/path, /abs/path, relative/path, mem://name and s3://bucket/prefix";

TEST(StoreUrlTest, FileUrlAndAbsolutePathOpenTheSameFsStore) {
  TempDir tmp;
  const std::string base = tmp.Sub("durable");
  auto a = OpenObjectStore("file://" + base);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->Describe(), "file://" + base);
  EXPECT_TRUE(StatPath(base)->is_dir);  // created
  ASSERT_TRUE((*a)->PutObject("job", 1, "x", "hello", 5).ok());

  auto b = OpenObjectStore(base + "/");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->Describe(), "file://" + base);
  EXPECT_EQ(*(*b)->ObjectSize("job", 1, "x"), 5u);
}

TEST(StoreUrlTest, RelativePathsAreMadeAbsoluteAgainstTheCurrentDirectory) {
  TempDir tmp;
  std::string old_cwd(4096, '\0');
  ASSERT_NE(::getcwd(old_cwd.data(), old_cwd.size()), nullptr);
  old_cwd.resize(old_cwd.find('\0'));
  ASSERT_EQ(::chdir(tmp.path().c_str()), 0);
  auto s = OpenObjectStore("rel/ckpt");
  ASSERT_EQ(::chdir(old_cwd.c_str()), 0);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Describe(), "file://" + tmp.Sub("rel/ckpt"));
  EXPECT_TRUE(StatPath(tmp.Sub("rel/ckpt"))->is_dir);
}

TEST(StoreUrlTest, MemUrlsShareOneStorePerName) {
  ForgetNamedMemStore("url_test_a");
  ForgetNamedMemStore("url_test_b");
  auto a1 = OpenObjectStore("mem://url_test_a");
  auto a2 = OpenObjectStore("mem://url_test_a");
  auto b = OpenObjectStore("mem://url_test_b");
  ASSERT_TRUE(a1.ok() && a2.ok() && b.ok());
  EXPECT_EQ((*a1)->Describe(), "mem://url_test_a");
  ASSERT_TRUE((*a1)->PutObject("job", 1, "x", "abc", 3).ok());
  EXPECT_EQ(*(*a2)->ObjectSize("job", 1, "x"), 3u);
  EXPECT_EQ((*b)->ObjectSize("job", 1, "x").status().code(), Code::kNotFound);
  auto direct = NamedMemStore("url_test_a");
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(*(*direct)->ObjectSize("job", 1, "x"), 3u);
  // The instance outlives the handle that created it.
  a1 = Result<std::unique_ptr<ObjectStore>>(Internal("dropped"));
  a2 = Result<std::unique_ptr<ObjectStore>>(Internal("dropped"));
  EXPECT_EQ(*(*OpenObjectStore("mem://url_test_a"))->ObjectSize("job", 1, "x"), 3u);
  // Forgetting starts the name afresh.
  ForgetNamedMemStore("url_test_a");
  EXPECT_EQ((*OpenObjectStore("mem://url_test_a"))->ObjectSize("job", 1, "x").status().code(),
            Code::kNotFound);
  EXPECT_EQ(*(*direct)->ObjectSize("job", 1, "x"), 3u);  // old holders keep theirs
}

TEST(StoreUrlTest, S3UrlsOpenTheS3StoreWithoutSendingAnything) {
  // Port 1 on loopback: nothing listens, and Open must not need it.
  auto s = OpenObjectStore("s3://bucket/some/prefix/?endpoint=http://127.0.0.1:1&max_attempts=1");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->Describe(), "s3://bucket/some/prefix");
  EXPECT_NE(dynamic_cast<S3ObjectStore*>(s->get()), nullptr);
  auto root = OpenObjectStore("s3://bucket");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ((*root)->Describe(), "s3://bucket");
}

TEST(StoreUrlTest, BadS3UrlsAreInvalidArgumentNamingTheRule) {
  auto bucket = OpenObjectStore("s3://Bad_Bucket/p");
  EXPECT_EQ(bucket.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bucket.status().message().find("lower-case"), std::string::npos)
      << bucket.status().message();
  auto param = OpenObjectStore("s3://bucket/p?part_size=huge");
  EXPECT_EQ(param.status().code(), Code::kInvalidArgument);
  EXPECT_NE(param.status().message().find("part_size"), std::string::npos) << param.status().message();
}

TEST(StoreUrlTest, OtherFormsAreInvalidArgumentListingTheAcceptedOnes) {
  const std::vector<std::string> urls = {"ftp://host/x", "file://relative", "file://host/abs",
                                         "",           "mem://",          "mem://bad/name",
                                         "mem://../x", "http://x",        std::string("/tmp/a\0b", 8)};
  for (const std::string& url : urls) {
    auto s = OpenObjectStore(url);
    EXPECT_EQ(s.status().code(), Code::kInvalidArgument) << QuoteForMessage(url);
    EXPECT_NE(s.status().message().find(kFormsHint), std::string::npos) << s.status().message();
  }
  EXPECT_NE(OpenObjectStore("file://relative").status().message().find("three slashes"),
            std::string::npos);
}

TEST(StoreUrlTest, ABaseThatIsNotADirectoryFailsClearly) {
  TempDir tmp;
  ASSERT_TRUE(WriteFileAtomic(tmp.Sub("file"), "x", false).ok());
  auto s = OpenObjectStore("file://" + tmp.Sub("file"));
  EXPECT_EQ(s.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(s.status().message().find(tmp.Sub("file")), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("not a directory"), std::string::npos) << s.status().message();
}

}  // namespace
}  // namespace tierckpt
