// S3Client against FakeTransport: the exact requests, retries, and errors.

#include "s3/s3_client.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "s3/crc32c.h"
#include "s3/s3_client_test_util.h"
#include "s3/sigv4.h"

namespace tierckpt::s3 {
namespace {

using testing_util::Bytes;
using testing_util::ErrorXml;
using testing_util::InstantRetries;
using testing_util::MarkingSigner;
using testing_util::Reply;
using testing_util::TestConfig;

class S3ClientTest : public ::testing::Test {
 protected:
  S3Client& Client(S3Config config = TestConfig()) {
    client_ = std::make_unique<S3Client>(config, transport_, signer_, InstantRetries(&slept_));
    return *client_;
  }
  std::string Query(const RecordedRequest& r, const std::string& name) {
    for (const auto& [n, v] : r.request.query) {
      if (n == name) return v;
    }
    return "<absent>";
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  std::shared_ptr<MarkingSigner> signer_ = std::make_shared<MarkingSigner>();
  std::vector<int64_t> slept_;
  std::unique_ptr<S3Client> client_;
};

TEST_F(S3ClientTest, PutObjectSendsChecksumUnsignedPayloadAndEncodedPathStyleKey) {
  transport_->OnPath("PUT", "/bkt/pre/a%20b/c~d.bin", Reply(200));
  const std::string data = Bytes(300);
  ASSERT_TRUE(Client().PutObject("pre/a b/c~d.bin", data.data(), data.size()).ok());
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 1u);
  const HttpRequest& r = reqs[0].request;
  EXPECT_EQ(r.endpoint, "http://s3.test:9000");
  EXPECT_EQ(reqs[0].body, data);
  EXPECT_EQ(FindHeader(r.headers, "x-amz-checksum-crc32c").value_or(""),
            Crc32cBase64(Crc32c(data.data(), data.size())));
  EXPECT_EQ(FindHeader(r.headers, "x-amz-content-sha256").value_or(""), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(FindHeader(r.headers, "authorization").value_or(""), "test-signature for bkt");
  EXPECT_FALSE(FindHeader(r.headers, "if-none-match").has_value());
  EXPECT_TRUE(r.query.empty());
}

TEST_F(S3ClientTest, VirtualHostAddressingPutsTheBucketInTheHost) {
  transport_->OnPath("PUT", "/pre/k", Reply(200));
  transport_->OnPath("GET", "/", Reply(200, "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"));
  S3Client& c = Client(TestConfig(Addressing::kVirtualHost));
  ASSERT_TRUE(c.PutObject("pre/k", "x", 1).ok());
  ASSERT_TRUE(c.ListObjects("pre/").ok());
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].request.endpoint, "http://bkt.s3.test:9000");
  EXPECT_EQ(reqs[1].request.path, "/");
}

TEST_F(S3ClientTest, SignedPayloadSendsTheBodyHash) {
  transport_->OnPath("PUT", "/bkt/k", Reply(200));
  S3Config config = TestConfig();
  config.sign_payload = true;
  ASSERT_TRUE(Client(config).PutObject("k", "hello", 5).ok());
  EXPECT_EQ(FindHeader(transport_->Requests()[0].request.headers, "x-amz-content-sha256").value_or(""),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
}

TEST_F(S3ClientTest, SlowDownAndResetsAreRetriedOnFreshConnectionsWithBackoff) {
  int calls = 0;
  transport_->On([](const HttpRequest& r) { return r.method == "PUT"; },
                 [&](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   ++calls;
                   if (calls == 1) return Reply(503, ErrorXml("SlowDown"));
                   if (calls == 2) return Unavailable("PUT http://s3.test:9000/bkt/k: Connection reset by peer");
                   if (calls == 3) return Reply(500, ErrorXml("InternalError"));
                   return Reply(200);
                 });
  ASSERT_TRUE(Client().PutObject("k", "abc", 3).ok());
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(transport_->resets(), 3);
  EXPECT_EQ(signer_->calls.load(), 4);  // each attempt is signed afresh
  EXPECT_EQ(slept_, (std::vector<int64_t>{7, 7, 7}));  // random 7 within each ceiling
}

TEST_F(S3ClientTest, RetryableCodesOn400AreRetriedWithoutAFreshConnection) {
  int calls = 0;
  transport_->On([](const HttpRequest&) { return true; },
                 [&](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   return ++calls == 1 ? Reply(400, ErrorXml("RequestTimeout")) : Reply(200);
                 });
  ASSERT_TRUE(Client().PutObject("k", "abc", 3).ok());
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(transport_->resets(), 0);
}

TEST_F(S3ClientTest, ExhaustedRetriesNameOpBucketKeyStatusCodeAndAttempts) {
  transport_->On([](const HttpRequest&) { return true; },
                 [](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   return Reply(503, ErrorXml("SlowDown", "Please reduce your request rate."));
                 });
  Status s = Client().PutObject("pre/ns/step_0000000001/a", "abc", 3);
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_EQ(transport_->Requests().size(), 4u);
  EXPECT_NE(s.message().find("PutObject s3://bkt/pre/ns/step_0000000001/a at http://s3.test:9000: "
                             "HTTP 503 SlowDown: Please reduce your request rate. (request id RID) "
                             "after 4 attempts"),
            std::string::npos) << s.message();
}

TEST_F(S3ClientTest, ForbiddenIsFinalAndSaysWhatToCheck) {
  transport_->OnPath("HEAD", "/bkt/k", Reply(403, "", {{"x-amz-request-id", "R403"}}));
  auto r = Client().HeadObject("k");
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_EQ(transport_->Requests().size(), 1u);
  EXPECT_NE(r.status().message().find("HeadObject s3://bkt/k"), std::string::npos);
  EXPECT_NE(r.status().message().find("R403"), std::string::npos);
  EXPECT_NE(r.status().message().find("credentials"), std::string::npos);
  EXPECT_NE(r.status().message().find("clock"), std::string::npos);
}

TEST_F(S3ClientTest, ConditionalPutSendsIfNoneMatchAnd412IsAlreadyExists) {
  transport_->OnPath("PUT", "/bkt/m", Reply(412, ErrorXml("PreconditionFailed")));
  S3Config config = TestConfig();
  config.conditional = ConditionalWrites::kOn;
  Status s = Client(config).PutObject("m", "{}", 2, PutOptions{true});
  EXPECT_EQ(s.code(), Code::kAlreadyExists);
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 1u);  // not retried
  EXPECT_EQ(FindHeader(reqs[0].request.headers, "if-none-match").value_or(""), "*");
  EXPECT_NE(s.message().find("already committed"), std::string::npos) << s.message();
}

TEST_F(S3ClientTest, A412AfterAnAmbiguousRetryIsOursWhenTheBytesMatch) {
  int puts = 0;
  transport_->On([](const HttpRequest& r) { return r.method == "PUT"; },
                 [&](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   return ++puts == 1 ? Result<HttpResponse>(Timeout("PUT: timed out"))
                                      : Reply(412, ErrorXml("PreconditionFailed"));
                 });
  transport_->OnPath("GET", "/bkt/m", Reply(200, "manifest"));
  S3Config config = TestConfig();
  config.conditional = ConditionalWrites::kOn;
  EXPECT_TRUE(Client(config).PutObject("m", "manifest", 8, PutOptions{true}).ok());
  // Someone else's bytes: still AlreadyExists.
  puts = 0;
  EXPECT_EQ(client_->PutObject("m", "mine!!!!", 8, PutOptions{true}).code(), Code::kAlreadyExists);
}

TEST_F(S3ClientTest, GetRangeAsksForExactBytesIntoTheCallersBuffer) {
  const std::string data = Bytes(100);
  transport_->On([](const HttpRequest& r) { return r.method == "GET"; },
                 [&](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
                   const std::string range(FindHeader(r.headers, "range").value_or(""));
                   if (range == "bytes=10-19") {
                     return Reply(206, data.substr(10, 10), {{"content-range", "bytes 10-19/100"}});
                   }
                   if (range == "bytes=95-104") {
                     return Reply(206, data.substr(95), {{"content-range", "bytes 95-99/100"}});
                   }
                   return Reply(404, ErrorXml("NoSuchKey"));
                 });
  S3Client& c = Client();
  std::string buf(10, '\0');
  ASSERT_TRUE(c.GetRange("k", 10, buf.data(), 10).ok());
  EXPECT_EQ(buf, data.substr(10, 10));
  Status shortread = c.GetRange("k", 95, buf.data(), 10);
  EXPECT_EQ(shortread.code(), Code::kCorruption);
  EXPECT_NE(shortread.message().find("got 5"), std::string::npos) << shortread.message();
  EXPECT_NE(shortread.message().find("object size 100"), std::string::npos) << shortread.message();
  EXPECT_EQ(c.GetRange("k", 0, buf.data(), 3).code(), Code::kNotFound);
  const size_t before = transport_->Requests().size();
  EXPECT_TRUE(c.GetRange("k", 5, nullptr, 0).ok());
  EXPECT_EQ(transport_->Requests().size(), before);  // nothing sent
}

TEST_F(S3ClientTest, HeadObjectReadsSizeAndEtag) {
  transport_->OnPath("HEAD", "/bkt/k", Reply(200, "", {{"content-length", "12345"}, {"etag", "\"e\""}}));
  transport_->OnPath("HEAD", "/bkt/absent", Reply(404));
  auto info = Client().HeadObject("k");
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->size, 12345u);
  EXPECT_EQ(info->etag, "\"e\"");
  EXPECT_EQ(client_->HeadObject("absent").status().code(), Code::kNotFound);
}

TEST_F(S3ClientTest, ListObjectsFollowsContinuationTokens) {
  transport_->On(
      [](const HttpRequest& r) { return r.method == "GET" && r.path == "/bkt"; },
      [](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
        bool second = false;
        for (const auto& [n, v] : r.query) second = second || (n == "continuation-token" && v == "T 1");
        if (!second) {
          return Reply(200, "<ListBucketResult><IsTruncated>true</IsTruncated>"
                            "<NextContinuationToken>T 1</NextContinuationToken>"
                            "<Contents><Key>p/a</Key><Size>1</Size></Contents>"
                            "<CommonPrefixes><Prefix>p/d/</Prefix></CommonPrefixes></ListBucketResult>");
        }
        return Reply(200, "<ListBucketResult><IsTruncated>false</IsTruncated>"
                          "<Contents><Key>p/b</Key><Size>2</Size></Contents></ListBucketResult>");
      });
  auto list = Client().ListObjects("p/", ListOptions{"/", 2, 0});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->objects.size(), 2u);
  EXPECT_EQ(list->objects[1].key, "p/b");
  EXPECT_EQ(list->objects[1].size, 2u);
  EXPECT_EQ(list->common_prefixes, std::vector<std::string>{"p/d/"});
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(Query(reqs[0], "list-type"), "2");
  EXPECT_EQ(Query(reqs[0], "prefix"), "p/");
  EXPECT_EQ(Query(reqs[0], "delimiter"), "/");
  EXPECT_EQ(Query(reqs[0], "max-keys"), "2");
  EXPECT_EQ(Query(reqs[0], "encoding-type"), "url");
  EXPECT_EQ(Query(reqs[0], "continuation-token"), "<absent>");
  EXPECT_EQ(Query(reqs[1], "continuation-token"), "T 1");
}

TEST_F(S3ClientTest, CompleteWith200ErrorBodyIsRetriedAndFinalOnesFail) {
  int completes = 0;
  transport_->On([](const HttpRequest& r) { return r.method == "POST"; },
                 [&](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   ++completes;
                   if (completes == 1) return Reply(200, ErrorXml("InternalError", "We encountered an internal error."));
                   if (completes == 2) return Reply(200, "<CompleteMultipartUploadResult/>");
                   return Reply(200, ErrorXml("InvalidPart"));
                 });
  std::vector<CompletedPart> parts = {{1, "\"e\"", "AAAAAA==", 0, 5}};
  S3Client& c = Client();
  ASSERT_TRUE(c.CompleteMultipartUpload("k", "U1", parts).ok());
  EXPECT_EQ(completes, 2);
  auto reqs = transport_->Requests();
  EXPECT_EQ(Query(reqs[0], "uploadId"), "U1");
  EXPECT_NE(reqs[0].body.find("<PartNumber>1</PartNumber><ETag>\"e\"</ETag>"), std::string::npos);
  // COMPOSITE (the default): the parts' checksums are in the body, no whole-object header.
  EXPECT_FALSE(FindHeader(reqs[0].request.headers, "x-amz-checksum-type").has_value());
  EXPECT_FALSE(FindHeader(reqs[0].request.headers, "x-amz-checksum-crc32c").has_value());
  EXPECT_NE(reqs[0].body.find("<ChecksumCRC32C>AAAAAA==</ChecksumCRC32C>"), std::string::npos) << reqs[0].body;
  Status s = c.CompleteMultipartUpload("k", "U1", parts);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CompleteMultipartUpload s3://bkt/k"), std::string::npos);
  EXPECT_NE(s.message().find("HTTP 200 InvalidPart"), std::string::npos) << s.message();
}

TEST_F(S3ClientTest, FullObjectChecksumsSendTheTypeAndTheWholeObjectsCrc32c) {
  transport_->On([](const HttpRequest& r) { return r.method == "POST"; },
                 [&](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
                   const bool create = !r.query.empty() && r.query[0].first == "uploads";
                   if (create) {
                     return Reply(200, "<InitiateMultipartUploadResult><UploadId>U9</UploadId></InitiateMultipartUploadResult>");
                   }
                   return Reply(200, "<CompleteMultipartUploadResult/>");
                 });
  S3Config config = TestConfig();
  config.full_object_checksum = true;
  S3Client& c = Client(config);
  ASSERT_TRUE(c.CreateMultipartUpload("k").ok());
  // Two parts "abc" + "de": the whole object's CRC32C is CRC32C("abcde"), combined from the parts.
  std::vector<CompletedPart> parts = {{1, "\"e1\"", Crc32cBase64(Crc32c("abc", 3)), Crc32c("abc", 3), 3},
                                      {2, "\"e2\"", Crc32cBase64(Crc32c("de", 2)), Crc32c("de", 2), 2}};
  ASSERT_TRUE(c.CompleteMultipartUpload("k", "U9", parts).ok());
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(FindHeader(reqs[0].request.headers, "x-amz-checksum-type").value_or(""), "FULL_OBJECT");
  EXPECT_EQ(FindHeader(reqs[1].request.headers, "x-amz-checksum-type").value_or(""), "FULL_OBJECT");
  EXPECT_EQ(FindHeader(reqs[1].request.headers, "x-amz-checksum-crc32c").value_or(""), Crc32cBase64(Crc32c("abcde", 5)));
  EXPECT_EQ(ParseS3Url("s3://bkt?multipart_checksum=full_object")->full_object_checksum, true);
  EXPECT_EQ(ParseS3Url("s3://bkt")->full_object_checksum, false);
  EXPECT_EQ(ParseS3Url("s3://base--usw2-az1--x-s3?region=us-west-2")->full_object_checksum, true);
  EXPECT_EQ(ParseS3Url("s3://base--usw2-az1--x-s3?region=us-west-2&multipart_checksum=composite")
                ->full_object_checksum, false);
  EXPECT_EQ(ParseS3Url("s3://bkt?multipart_checksum=crc64").status().code(), Code::kInvalidArgument);
}

TEST_F(S3ClientTest, SigningFailuresAreFinalAndNameTheOperation) {
  signer_->fail = true;
  Status s = Client().PutObject("k", "x", 1);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("PutObject s3://bkt/k: cannot sign"), std::string::npos) << s.message();
  EXPECT_TRUE(transport_->Requests().empty());
}

TEST_F(S3ClientTest, DeleteObjectsSendsContentMd5AndQuietXml) {
  transport_->On([](const HttpRequest& r) { return r.method == "POST"; },
                 [](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                   return Reply(200, "<DeleteResult/>");
                 });
  ASSERT_TRUE(Client().DeleteObjects({"a", "b"}).ok());
  auto reqs = transport_->Requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].request.path, "/bkt");
  EXPECT_EQ(Query(reqs[0], "delete"), "");
  // MD5 of exactly the body sent, base64.
  EXPECT_EQ(reqs[0].body,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Delete xmlns=\"http://s3.amazonaws.com/doc/"
            "2006-03-01/\"><Quiet>true</Quiet><Object><Key>a</Key></Object><Object><Key>b</Key>"
            "</Object></Delete>");
  EXPECT_EQ(FindHeader(reqs[0].request.headers, "content-md5").value_or(""), "SkvHQBLd4FdCzZjHI/GeQg==");
  EXPECT_TRUE(Client().DeleteObjects({}).ok());
}

}  // namespace
}  // namespace tierckpt::s3
