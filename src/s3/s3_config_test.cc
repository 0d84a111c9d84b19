// ParseS3Url: the URL, the environment, their precedence, and the rules.

#include "s3/s3_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "s3/credentials_chain.h"
#include "testing/temp_dir.h"
#include "os/files.h"

namespace tierckpt::s3 {
namespace {

Environment Env(std::map<std::string, std::string, std::less<>> vars = {}) {
  return Environment::FromMap(std::move(vars), "/nonexistent-home");
}

TEST(S3ConfigTest, BucketAndPrefixWithAwsDefaults) {
  auto c = ParseS3Url("s3://my-bucket/some/prefix/", Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bucket, "my-bucket");
  EXPECT_EQ(c->prefix, "some/prefix");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->endpoint, "");
  EXPECT_EQ(c->addressing, Addressing::kVirtualHost);
  EXPECT_FALSE(c->express);
  EXPECT_EQ(c->part_size, 16u << 20);
  EXPECT_EQ(c->multipart_threshold, 16u << 20);
  EXPECT_EQ(c->concurrency, 8);
  EXPECT_EQ(c->max_attempts, 6);
  EXPECT_FALSE(c->sign_payload);
  EXPECT_EQ(c->conditional, ConditionalWrites::kAuto);
  EXPECT_EQ(DescribeS3(*c), "s3://my-bucket/some/prefix");
  EXPECT_EQ(BucketEndpoint(*c), "https://my-bucket.s3.us-east-1.amazonaws.com");

  auto bare = ParseS3Url("s3://abc", Env());
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(bare->prefix, "");
  EXPECT_EQ(DescribeS3(*bare), "s3://abc");
  EXPECT_EQ(ParseS3Url("s3://abc/", Env())->prefix, "");
}

TEST(S3ConfigTest, EveryQueryParameter) {
  auto c = ParseS3Url(
      "s3://b-1/p?region=eu-west-1&endpoint=http%3A%2F%2F127.0.0.1%3A5123/&addressing=virtual"
      "&part_size=8MiB&multipart_threshold=32M&max_part_size=256MiB&concurrency=16&max_attempts=3&payload=signed"
      "&conditional=off",
      Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "eu-west-1");
  EXPECT_EQ(c->endpoint, "http://127.0.0.1:5123");
  EXPECT_EQ(c->addressing, Addressing::kVirtualHost);
  EXPECT_EQ(c->part_size, 8u << 20);
  EXPECT_EQ(c->multipart_threshold, 32u << 20);
  EXPECT_EQ(c->max_part_size, 256u << 20);
  EXPECT_EQ(c->concurrency, 16);
  EXPECT_EQ(c->max_attempts, 3);
  EXPECT_TRUE(c->sign_payload);
  EXPECT_EQ(c->conditional, ConditionalWrites::kOff);
  EXPECT_EQ(BucketEndpoint(*c), "http://b-1.127.0.0.1:5123");
  // The threshold follows the part size unless given.
  EXPECT_EQ(ParseS3Url("s3://bkt?part_size=5242880", Env())->multipart_threshold, 5u << 20);
  // The largest request is 1 GiB unless given, and never below the part size.
  EXPECT_EQ(ParseS3Url("s3://bkt", Env())->max_part_size, 1u << 30);
  EXPECT_EQ(ParseS3Url("s3://bkt?part_size=2GiB", Env())->max_part_size, 2u << 30);
  EXPECT_EQ(ParseS3Url("s3://bkt?conditional=on", Env())->conditional, ConditionalWrites::kOn);
}

TEST(S3ConfigTest, AnEndpointMeansPathStyleUnlessToldOtherwise) {
  auto c = ParseS3Url("s3://tc-test/conf?endpoint=http://127.0.0.1:5123", Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->addressing, Addressing::kPath);
  EXPECT_EQ(BucketEndpoint(*c), "http://127.0.0.1:5123");
  // Dotted buckets too (their certificates do not cover virtual hosts).
  auto dotted = ParseS3Url("s3://my.bucket.name/x", Env());
  ASSERT_TRUE(dotted.ok());
  EXPECT_EQ(dotted->addressing, Addressing::kPath);
  EXPECT_EQ(BucketEndpoint(*dotted), "https://s3.us-east-1.amazonaws.com");
}

TEST(S3ConfigTest, EnvironmentFillsRegionAndEndpointAndTheUrlOverrides) {
  auto env = Env({{"AWS_REGION", "ap-south-1"},
                  {"AWS_DEFAULT_REGION", "us-west-2"},
                  {"AWS_ENDPOINT_URL", "http://general:1"},
                  {"AWS_ENDPOINT_URL_S3", "https://s3only:2"}});
  auto c = ParseS3Url("s3://bkt/p", env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "ap-south-1");
  EXPECT_EQ(c->endpoint, "https://s3only:2");
  EXPECT_EQ(c->addressing, Addressing::kPath);

  auto fallback = ParseS3Url("s3://bkt/p", Env({{"AWS_DEFAULT_REGION", "us-west-2"},
                                                 {"AWS_ENDPOINT_URL", "http://general:1"}}));
  EXPECT_EQ(fallback->region, "us-west-2");
  EXPECT_EQ(fallback->endpoint, "http://general:1");

  auto over = ParseS3Url("s3://bkt/p?region=eu-north-1&endpoint=http://url:3", env);
  EXPECT_EQ(over->region, "eu-north-1");
  EXPECT_EQ(over->endpoint, "http://url:3");
}

TEST(S3ConfigTest, RegionFallsBackToTheProfile) {
  ::tierckpt::testing_util::TempDir home;
  ASSERT_TRUE(MakeDirs(home.Sub(".aws")).ok());
  ASSERT_TRUE(WriteFileAtomic(home.Sub(".aws/config"),
                              "[default]\nregion = eu-central-1\n[profile other]\nregion = sa-east-1\n",
                              false)
                  .ok());
  auto c = ParseS3Url("s3://bkt", Environment::FromMap({}, home.path()));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->region, "eu-central-1");
  auto other = ParseS3Url("s3://bkt", Environment::FromMap({{"AWS_PROFILE", "other"}}, home.path()));
  EXPECT_EQ(other->region, "sa-east-1");
  auto env_wins = ParseS3Url("s3://bkt", Environment::FromMap({{"AWS_REGION", "us-east-2"}}, home.path()));
  EXPECT_EQ(env_wins->region, "us-east-2");
}

TEST(S3ConfigTest, ExpressBucketsUseTheZonalVirtualHostEndpoint) {
  auto c = ParseS3Url("s3://ckpt--usw2-az1--x-s3/run?region=us-west-2", Env());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->express);
  EXPECT_EQ(c->addressing, Addressing::kVirtualHost);
  EXPECT_EQ(BucketEndpoint(*c), "https://ckpt--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com");
  EXPECT_EQ(ParseS3Url("s3://ckpt--usw2-az1--x-s3?addressing=path", Env()).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(ParseS3Url("s3://ckpt--x-s3", Env()).status().code(), Code::kInvalidArgument);
}

TEST(S3ConfigTest, BadBucketNamesAreRejectedWithTheRule) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"ab", "3 to 63"},
      {std::string(64, 'a'), "3 to 63"},
      {"Upper", "lower-case"},
      {"under_score", "lower-case"},
      {"-start", "start and end"},
      {"end-", "start and end"},
      {"a..b", "\"..\""},
      {"192.168.1.1", "IP address"},
  };
  for (const auto& [bucket, rule] : bad) {
    auto c = ParseS3Url("s3://" + bucket + "/p", Env());
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bucket;
    EXPECT_NE(c.status().message().find(rule), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("s3://<bucket>"), std::string::npos) << c.status().message();
  }
  EXPECT_TRUE(ValidateBucketName("a.b-c.123").ok());
  EXPECT_TRUE(ValidateBucketName(std::string(63, 'z')).ok());
}

TEST(S3ConfigTest, BadUrlsNameTheBadPart) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"http://bkt/p", "does not start with s3://"},
      {"s3:///p", "bucket name is missing"},
      {"s3://bkt/a//b", "empty"},
      {"s3://bkt/a/../b", "\"..\""},
      {"s3://bkt/a b", "A-Z a-z 0-9"},
      {"s3://bkt/" + std::string(513, 'p'), "longer than 512"},
      {"s3://bkt/p#frag", "fragments"},
      {"s3://bkt?colour=blue", "unknown parameter \"colour\""},
      {"s3://bkt?part_size=1KiB", "part_size"},
      {"s3://bkt?part_size=6GiB", "part_size"},
      {"s3://bkt?part_size=lots", "part_size"},
      {"s3://bkt?max_part_size=6GiB", "max_part_size"},
      {"s3://bkt?part_size=64MiB&max_part_size=32MiB", "smaller than part_size"},
      {"s3://bkt?concurrency=0", "concurrency"},
      {"s3://bkt?max_attempts=99", "max_attempts"},
      {"s3://bkt?payload=maybe", "payload"},
      {"s3://bkt?conditional=sometimes", "conditional"},
      {"s3://bkt?addressing=dns", "addressing"},
      {"s3://bkt?endpoint=ftp://x", "not an http:// or https://"},
      {"s3://bkt?endpoint=http://", "no host"},
      {"s3://bkt?endpoint=http://h/path", "scheme://host[:port]"},
      {"s3://bkt?region=", "empty region"},
      {"s3://bkt?region=%zz", "%-escape"},
  };
  for (const auto& [url, part] : bad) {
    auto c = ParseS3Url(url, Env());
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << url;
    EXPECT_NE(c.status().message().find(part), std::string::npos) << url << ": " << c.status().message();
  }
  // An endpoint from the environment is checked the same way, naming the variable.
  auto env = ParseS3Url("s3://bkt", Env({{"AWS_ENDPOINT_URL_S3", "localhost:9000"}}));
  EXPECT_EQ(env.status().code(), Code::kInvalidArgument);
  EXPECT_NE(env.status().message().find("AWS_ENDPOINT_URL_S3"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::s3
