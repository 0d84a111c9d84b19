// PlanUpload (pure) and S3Client::UploadMany against FakeS3: a step's
// requests sized to its bytes / concurrency, whole PUTs where they fit,
// failures abort what was created, cancellation stops before the next request.

#include "s3/upload_plan.h"

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
using testing_util::InstantRetries;
using testing_util::MarkingSigner;
using testing_util::Reply;
using testing_util::TestConfig;

constexpr uint64_t kPlanMiB = 1ULL << 20;

UploadPlanOptions Options(int concurrency = 8) {
  UploadPlanOptions o;
  o.part_size = 16 * kPlanMiB;
  o.max_part_size = 1024 * kPlanMiB;
  o.multipart_threshold = 16 * kPlanMiB;
  o.concurrency = concurrency;
  return o;
}

// Every byte of every object is in exactly one request, parts numbered 1..N.
void ExpectCovers(const UploadPlan& plan, const std::vector<uint64_t>& sizes) {
  ASSERT_EQ(plan.part_count.size(), sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<UploadRequest> mine;
    for (const UploadRequest& r : plan.requests) {
      if (r.object == i) mine.push_back(r);
    }
    std::sort(mine.begin(), mine.end(), [](auto& a, auto& b) { return a.offset < b.offset; });
    if (plan.part_count[i] == 0) {
      ASSERT_EQ(mine.size(), 1u) << i;
      EXPECT_EQ(mine[0].part, 0);
      EXPECT_EQ(mine[0].size, sizes[i]);
      continue;
    }
    ASSERT_EQ(mine.size(), static_cast<size_t>(plan.part_count[i])) << i;
    uint64_t at = 0;
    for (size_t p = 0; p < mine.size(); ++p) {
      EXPECT_EQ(mine[p].part, static_cast<int>(p + 1)) << i;
      EXPECT_EQ(mine[p].offset, at) << i;
      at += mine[p].size;
    }
    EXPECT_EQ(at, sizes[i]) << i;
  }
  for (size_t r = 1; r < plan.requests.size(); ++r) {
    EXPECT_GE(plan.requests[r - 1].size, plan.requests[r].size) << "largest first";
  }
}

TEST(PlanUploadTest, EqualObjectsOnePerConnectionAreWholePuts) {
  const std::vector<uint64_t> sizes(8, 256 * kPlanMiB);
  auto plan = PlanUpload(sizes, Options());
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ExpectCovers(*plan, sizes);
  EXPECT_EQ(plan->requests.size(), 8u);
  EXPECT_EQ(plan->share, 256 * kPlanMiB);
  EXPECT_EQ(plan->makespan, 256 * kPlanMiB);
}

TEST(PlanUploadTest, OneLargeObjectIsCutIntoOnePartPerConnection) {
  const std::vector<uint64_t> sizes{2048 * kPlanMiB};
  auto plan = PlanUpload(sizes, Options());
  ASSERT_TRUE(plan.ok());
  ExpectCovers(*plan, sizes);
  EXPECT_EQ(plan->part_count[0], 8);
  EXPECT_EQ(plan->makespan, 256 * kPlanMiB);
}

TEST(PlanUploadTest, SmallFilesRideAlongAsPuts) {
  const std::vector<uint64_t> sizes{4096, 256 * kPlanMiB, 256 * kPlanMiB, 256 * kPlanMiB, 256 * kPlanMiB, 0};
  auto plan = PlanUpload(sizes, Options(4));
  ASSERT_TRUE(plan.ok());
  ExpectCovers(*plan, sizes);
  EXPECT_EQ(plan->requests.size(), 6u);
  EXPECT_EQ(plan->requests.back().size, 0u);
}

TEST(PlanUploadTest, OneObjectMoreThanConnectionsIsCutSoNoneRunsAlone) {
  // Nine whole PUTs on eight connections: the ninth would double the time.
  const std::vector<uint64_t> sizes(9, 256 * kPlanMiB);
  auto plan = PlanUpload(sizes, Options());
  ASSERT_TRUE(plan.ok());
  ExpectCovers(*plan, sizes);
  const uint64_t ideal = 9 * 256 * kPlanMiB / 8;
  EXPECT_LE(plan->makespan * 4, ideal * 5);
  EXPECT_GT(plan->requests.size(), 9u);
  EXPECT_LT(plan->requests.size(), 9u * 16);  // far fewer than 16 MiB parts
}

TEST(PlanUploadTest, TheShareStaysWithinPartSizeAndMaxPartSize) {
  // 64 GiB on 8 connections: 8 GiB shares are capped at 1 GiB.
  const std::vector<uint64_t> big(8, 8192 * kPlanMiB);
  auto plan = PlanUpload(big, Options());
  ASSERT_TRUE(plan.ok());
  ExpectCovers(*plan, big);
  for (const UploadRequest& r : plan->requests) EXPECT_LE(r.size, 1024 * kPlanMiB);
  // 40 MiB on 8 connections: 5 MiB shares are raised to the 16 MiB part size.
  const std::vector<uint64_t> small{40 * kPlanMiB};
  plan = PlanUpload(small, Options());
  ASSERT_TRUE(plan.ok());
  ExpectCovers(*plan, small);
  EXPECT_EQ(plan->part_count[0], 3);
  EXPECT_EQ(plan->requests[0].size, 16 * kPlanMiB);
}

TEST(PlanUploadTest, TheThresholdKeepsObjectsWhole) {
  UploadPlanOptions o = Options();
  o.multipart_threshold = 512 * kPlanMiB;
  auto plan = PlanUpload({512 * kPlanMiB}, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->part_count[0], 0);
}

TEST(PlanUploadTest, AnObjectBeyondTenThousandFiveGiBPartsIsAnError) {
  auto plan = PlanUpload({10000 * kMaxPartSize + 1}, Options());
  EXPECT_EQ(plan.status().code(), Code::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("5 GiB"), std::string::npos);
}

TEST(PlanUploadTest, EmptyStepPlansNothing) {
  auto plan = PlanUpload({}, Options());
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->requests.empty());
}

TEST(ListScheduleTest, TheLeastLoadedConnectionTakesTheNextRequest) {
  EXPECT_EQ(ListScheduleMakespan({5, 4, 3, 3, 3}, 2), 10u);  // 5+3+... : {5,3}{4,3,3}
  EXPECT_EQ(ListScheduleMakespan({}, 4), 0u);
  EXPECT_EQ(ListScheduleMakespan({7, 1}, 1), 8u);
  EXPECT_EQ(ListScheduleMakespan({2, 2, 2}, 8), 2u);
}

using UploadManyTest = testing_util::FakeS3ClientFixture;

TEST_F(UploadManyTest, EqualObjectsGoAsOnePutEachAndALargeOneInParts) {
  // part_size 1 KiB, concurrency 4: four 8 KiB objects are one PUT each.
  std::vector<std::string> data;
  for (unsigned i = 0; i < 4; ++i) data.push_back(Bytes(8192, i + 1));
  std::vector<UploadItem> items;
  for (size_t i = 0; i < data.size(); ++i) {
    items.push_back({"pre/s/obj" + std::to_string(i), data[i].data(), data[i].size()});
  }
  ASSERT_TRUE(Client().UploadMany(items).ok());
  for (size_t i = 0; i < data.size(); ++i) EXPECT_EQ(s3_->Object(items[i].key).value_or(""), data[i]);
  EXPECT_EQ(Count("PUT object"), 4);
  EXPECT_EQ(Count("POST uploads"), 0);

  // One 32 KiB object alone: 4 parts of 8 KiB in one multipart upload.
  const std::string big = Bytes(32768, 9);
  ASSERT_TRUE(client_->UploadMany({{"pre/s/big", big.data(), big.size()}}).ok());
  EXPECT_EQ(s3_->Object("pre/s/big").value_or(""), big);
  EXPECT_EQ(Count("POST uploads"), 1);
  EXPECT_EQ(Count("PUT partNumber"), 4);
  EXPECT_EQ(Count("POST uploadId"), 1);
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);
}

TEST_F(UploadManyTest, AFailedPartAbortsEveryUploadItCreated) {
  std::vector<std::string> data{Bytes(20000, 1), Bytes(20000, 2), Bytes(100, 3)};
  std::vector<UploadItem> items;
  for (size_t i = 0; i < data.size(); ++i) {
    items.push_back({"pre/s/o" + std::to_string(i), data[i].data(), data[i].size()});
  }
  std::atomic<int> parts{0};
  s3_->SetInterceptor([&](const HttpRequest& r, std::string_view) -> std::optional<Result<HttpResponse>> {
    const bool is_part = std::any_of(r.query.begin(), r.query.end(), [](auto& q) { return q.first == "partNumber"; });
    if (!is_part || parts.fetch_add(1) != 2) return std::nullopt;
    return Reply(403, testing_util::ErrorXml("AccessDenied"));
  });
  S3Config config = TestConfig();
  config.max_part_size = 4096;  // both large objects go in parts
  Status s = Client(config).UploadMany(items);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("UploadPart"), std::string::npos) << s.ToString();
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);
  EXPECT_EQ(Count("DELETE uploadId"), 2);
  EXPECT_FALSE(s3_->Object("pre/s/o0").has_value());
  EXPECT_FALSE(s3_->Object("pre/s/o1").has_value());
}

TEST_F(UploadManyTest, CancellationStopsBeforeTheNextRequest) {
  std::vector<std::string> data{Bytes(20000, 1), Bytes(20000, 2)};
  std::vector<UploadItem> items{{"pre/s/a", data[0].data(), data[0].size()},
                                {"pre/s/b", data[1].data(), data[1].size()}};
  std::atomic<int> asked{0};
  S3Config config = TestConfig();
  config.concurrency = 1;
  config.max_part_size = 4096;
  // Cancelled once the creates and the first part have gone out.
  Status s = Client(config).UploadMany(items, [&] { return asked.fetch_add(1) >= 3; });
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ(Count("PUT partNumber"), 1);
  EXPECT_EQ(s3_->UploadsInProgress(), 0u);
  EXPECT_TRUE(s3_->Keys().empty());
}

}  // namespace
}  // namespace tierckpt::s3
