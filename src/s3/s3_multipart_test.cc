// S3Client against FakeS3: multipart uploads and their plan, parallel
// downloads, batched deletes, listings, sweeps and conditional writes.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

#include "s3/s3_client.h"
#include "s3/s3_client_test_util.h"

namespace tierckpt::s3 {
namespace {

using testing_util::Bytes;
using testing_util::ErrorXml;
using testing_util::InstantRetries;
using testing_util::MarkingSigner;
using testing_util::Reply;
using testing_util::TestConfig;

constexpr uint64_t kMiB = 1ULL << 20;

TEST(PlanPartsTest, SmallObjectsKeepThePartSize) {
  auto p = PlanParts(100 * kMiB, 16 * kMiB);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->part_size, 16 * kMiB);
  EXPECT_EQ(p->part_count, 7u);
  EXPECT_EQ(PlanParts(32 * kMiB, 16 * kMiB)->part_count, 2u);
  EXPECT_EQ(PlanParts(32 * kMiB + 1, 16 * kMiB)->part_count, 3u);
  EXPECT_EQ(PlanParts(10000 * 16 * kMiB, 16 * kMiB)->part_size, 16 * kMiB);  // exactly 10,000
  EXPECT_EQ(PlanParts(10000 * 16 * kMiB, 16 * kMiB)->part_count, 10000u);
}

TEST(PlanPartsTest, HugeObjectsGrowThePartSizeToStayWithin10000Parts) {
  for (uint64_t size : std::vector<uint64_t>{10000 * 16 * kMiB + 1, 1ULL << 40, 5ULL << 40, 48ULL << 40,
                        10000 * kMaxPartSize}) {
    auto p = PlanParts(size, 16 * kMiB);
    ASSERT_TRUE(p.ok()) << size << ": " << p.status().ToString();
    EXPECT_LE(p->part_count, kMaxParts) << size;
    EXPECT_GE(p->part_size * p->part_count, size) << size;
    EXPECT_LT(p->part_size * (p->part_count - 1), size) << size;
    EXPECT_EQ(p->part_size % kMiB, 0u) << size;
    EXPECT_LE(p->part_size, kMaxPartSize) << size;
  }
  EXPECT_EQ(PlanParts(1ULL << 40, 16 * kMiB)->part_size, 105 * kMiB);  // ceil(1 TiB / 10000) → MiB
  auto too_big = PlanParts(10000 * kMaxPartSize + 1, 16 * kMiB);
  EXPECT_EQ(too_big.status().code(), Code::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("5 GiB"), std::string::npos);
  EXPECT_EQ(PlanParts(10, 0).status().code(), Code::kInvalidArgument);
}

using FakeS3ClientTest = testing_util::FakeS3ClientFixture;

TEST_F(FakeS3ClientTest, UploadAboveTheThresholdIsParallelMultipartWithChecksums) {
  const std::string data = Bytes(10 * 1024 + 17);  // parts of 1 KiB: 11 parts
  ASSERT_TRUE(Client().Upload("pre/big", data.data(), data.size()).ok());
  EXPECT_EQ(s3_->Object("pre/big").value_or(""), data);
  EXPECT_EQ(Count("POST uploads"), 1);
  EXPECT_EQ(Count("PUT partNumber"), 11);
  EXPECT_EQ(Count("POST uploadId"), 1);
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);
  // At or below the threshold: one PUT.
  ASSERT_TRUE(client_->Upload("pre/small", data.data(), 1024).ok());
  EXPECT_EQ(Count("PUT object"), 1);
  EXPECT_EQ(s3_->Object("pre/small").value_or(""), data.substr(0, 1024));
}

TEST_F(FakeS3ClientTest, AFailedPartAbortsTheUploadAndNamesThePart) {
  s3_->SetInterceptor([](const HttpRequest& r, std::string_view) -> std::optional<Result<HttpResponse>> {
    for (const auto& [n, v] : r.query) {
      if (n == "partNumber" && v == "3") return Result<HttpResponse>(Reply(403, ErrorXml("AccessDenied")));
    }
    return std::nullopt;
  });
  const std::string data = Bytes(5000);
  Status s = Client().Upload("pre/big", data.data(), data.size());
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("UploadPart s3://bkt/pre/big"), std::string::npos) << s.message();
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);
  EXPECT_EQ(Count("DELETE uploadId"), 1);
  EXPECT_FALSE(s3_->Object("pre/big").has_value());
}

TEST_F(FakeS3ClientTest, CompleteReturning200WithInternalErrorIsRetried) {
  std::atomic<int> completes{0};
  s3_->SetInterceptor([&](const HttpRequest& r, std::string_view) -> std::optional<Result<HttpResponse>> {
    if (r.method == "POST" && !r.query.empty() && r.query[0].first == "uploadId" && completes++ == 0) {
      return Result<HttpResponse>(Reply(200, ErrorXml("InternalError")));
    }
    return std::nullopt;
  });
  const std::string data = Bytes(3000);
  ASSERT_TRUE(Client().Upload("pre/big", data.data(), data.size()).ok());
  EXPECT_EQ(completes.load(), 2);
  EXPECT_EQ(s3_->Object("pre/big").value_or(""), data);
}

TEST_F(FakeS3ClientTest, DownloadReadsParallelRangesAndDetectsShortObjects) {
  const std::string data = Bytes(10000);
  s3_->PutRaw("pre/obj", data);
  std::string buf(9000, '\0');
  ASSERT_TRUE(Client().Download("pre/obj", 500, buf.data(), buf.size()).ok());
  EXPECT_EQ(buf, data.substr(500, 9000));
  EXPECT_EQ(Count("GET object"), 4);  // one range per connection (4), each >= the 1 KiB part size
  Status past = client_->Download("pre/obj", 2000, buf.data(), buf.size());
  EXPECT_EQ(past.code(), Code::kCorruption) << past.ToString();
  EXPECT_EQ(client_->Download("pre/none", 0, buf.data(), 10).code(), Code::kNotFound);
}

TEST_F(FakeS3ClientTest, ListingPaginatesAndGroupsByDelimiter) {
  s3_->SetMaxKeys(2);
  for (std::string k : {"p/a", "p/b", "p/c/1", "p/c/2", "p/d", "p/e/x", "q/z"}) s3_->PutRaw(k, "v");
  auto all = Client().ListObjects("p/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->objects.size(), 6u);
  EXPECT_EQ(Count("GET list-type"), 3);
  auto level = client_->ListObjects("p/", ListOptions{"/", 1000, 0});
  ASSERT_TRUE(level.ok());
  std::vector<std::string> keys;
  for (const auto& o : level->objects) keys.push_back(o.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"p/a", "p/b", "p/d"}));
  EXPECT_EQ(level->common_prefixes, (std::vector<std::string>{"p/c/", "p/e/"}));
  auto first = client_->ListObjects("p/", ListOptions{"", 1000, 1});
  EXPECT_EQ(first->objects.size(), 2u);  // stops after the page that reached max_results
}

TEST_F(FakeS3ClientTest, DeleteObjectsBatchesByThousandAndRetriesPerKeyErrors) {
  std::vector<std::string> keys;
  for (int i = 0; i < 2500; ++i) {
    keys.push_back("pre/k" + std::to_string(i));
    s3_->PutRaw(keys.back(), "x");
  }
  s3_->PutRaw("pre/keep", "x");
  s3_->FailDeleteOnce("pre/k7", "InternalError");
  ASSERT_TRUE(Client().DeleteObjects(keys).ok());
  EXPECT_EQ(Count("POST delete"), 4);  // 3 batches + the retry of one key
  EXPECT_EQ(s3_->Keys(), std::vector<std::string>{"pre/keep"});

  s3_->PutRaw("pre/a", "x");
  s3_->PutRaw("pre/b", "x");
  s3_->FailDeleteOnce("pre/b", "AccessDenied");
  Status s = client_->DeleteObjects({"pre/a", "pre/b"});
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_NE(s.message().find("1 of 2 keys were not deleted: pre/b (AccessDenied: injected)"),
            std::string::npos) << s.message();
}

TEST_F(FakeS3ClientTest, AbandonedUploadsUnderAPrefixAreSwept) {
  S3Client& c = Client();
  ASSERT_TRUE(c.CreateMultipartUpload("pre/ns/step_1/a").ok());
  ASSERT_TRUE(c.CreateMultipartUpload("pre/ns/step_1/b").ok());
  ASSERT_TRUE(c.CreateMultipartUpload("pre/ns/step_2/a").ok());
  auto listed = c.ListMultipartUploads("pre/ns/step_1/");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
  auto swept = c.AbortMultipartUploads("pre/ns/step_1/");
  ASSERT_TRUE(swept.ok()) << swept.status().ToString();
  EXPECT_EQ(*swept, 2);
  EXPECT_EQ(s3_->UploadsInProgress(), 1u);
}

TEST_F(FakeS3ClientTest, ConditionalWritesAreProbedOnceAndEnforced) {
  S3Client& c = Client();
  ASSERT_TRUE(c.PutObject("pre/m", "1", 1, PutOptions{true}).ok());
  EXPECT_EQ(c.PutObject("pre/m", "2", 1, PutOptions{true}).code(), Code::kAlreadyExists);
  EXPECT_EQ(c.Upload("pre/m", Bytes(4000).data(), 4000, PutOptions{true}).code(), Code::kAlreadyExists);
  EXPECT_EQ(s3_->Object("pre/m").value_or(""), "1");
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);  // the refused multipart upload was aborted
  EXPECT_EQ(Count("PUT object"), 2 + 2);  // probe twice, then the two puts
  EXPECT_EQ(Count("HEAD object"), 0);
  EXPECT_EQ(s3_->Keys(), std::vector<std::string>{"pre/m"});  // the probe key is gone
}

TEST_F(FakeS3ClientTest, StoresIgnoringIfNoneMatchFallBackToHeadBeforePut) {
  for (auto mode : {FakeS3::ConditionalMode::kIgnore, FakeS3::ConditionalMode::kNotImplemented}) {
    s3_ = std::make_shared<FakeS3>("bkt");
    s3_->SetConditionalMode(mode);
    S3Client& c = Client();
    auto supported = c.ConditionalWritesSupported();
    ASSERT_TRUE(supported.ok()) << supported.status().ToString();
    EXPECT_FALSE(*supported);
    ASSERT_TRUE(c.PutObject("pre/m", "1", 1, PutOptions{true}).ok());
    Status again = c.PutObject("pre/m", "2", 1, PutOptions{true});
    EXPECT_EQ(again.code(), Code::kAlreadyExists);
    EXPECT_NE(again.message().find("checked with HEAD"), std::string::npos) << again.message();
    EXPECT_EQ(s3_->Object("pre/m").value_or(""), "1");
    EXPECT_EQ(s3_->Keys(), std::vector<std::string>{"pre/m"});
  }
}

TEST_F(FakeS3ClientTest, ConditionalOffNeverSendsTheHeaderAndOnNeverProbes) {
  S3Config off = TestConfig();
  off.conditional = ConditionalWrites::kOff;
  ASSERT_TRUE(Client(off).PutObject("pre/m", "1", 1, PutOptions{true}).ok());
  EXPECT_EQ(client_->PutObject("pre/m", "2", 1, PutOptions{true}).code(), Code::kAlreadyExists);
  EXPECT_EQ(Count("HEAD object"), 2);
  EXPECT_EQ(Count("PUT object"), 1);

  s3_->SetConditionalMode(FakeS3::ConditionalMode::kNotImplemented);
  S3Config on = TestConfig();
  on.conditional = ConditionalWrites::kOn;
  Status s = Client(on).PutObject("pre/n", "1", 1, PutOptions{true});
  EXPECT_EQ(s.code(), Code::kUnimplemented);
  EXPECT_NE(s.message().find("conditional=off"), std::string::npos) << s.message();
}

TEST_F(FakeS3ClientTest, CorruptedUploadsAreRejectedByTheChecksum) {
  s3_->SetInterceptor([&](const HttpRequest& r, std::string_view body) -> std::optional<Result<HttpResponse>> {
    if (r.method != "PUT") return std::nullopt;
    // The bytes arrive damaged: the fake checks them against the header.
    std::string damaged(body);
    damaged[0] ^= 1;
    HttpRequest copy = r;
    copy.body = damaged.data();
    copy.body_size = damaged.size();
    copy.method = "PUT";
    s3_->SetInterceptor(nullptr);
    return s3_->Send(copy);
  });
  Status s = Client().PutObject("pre/x", "hello", 5);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("BadDigest"), std::string::npos) << s.message();
  EXPECT_FALSE(s3_->Object("pre/x").has_value());
}

}  // namespace
}  // namespace tierckpt::s3
