// The XML documents, the response classification and the backoff schedule.

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "s3/s3_errors.h"
#include "s3/s3_retry.h"
#include "s3/s3_xml.h"

namespace tierckpt::s3 {
namespace {

TEST(S3XmlTest, ErrorBodiesAreRecognisedAndOthersAreNot) {
  auto e = ParseErrorBody(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
      "<Message>Please reduce your request rate.</Message><RequestId>R1</RequestId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "SlowDown");
  EXPECT_EQ(e->message, "Please reduce your request rate.");
  EXPECT_EQ(e->request_id, "R1");
  EXPECT_FALSE(ParseErrorBody("").has_value());
  EXPECT_FALSE(ParseErrorBody("not xml <<<").has_value());
  EXPECT_FALSE(ParseErrorBody("<CompleteMultipartUploadResult/>").has_value());
}

TEST(S3XmlTest, InitiateMultipartUpload) {
  auto id = ParseInitiateMultipartUpload(
      "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Bucket>b</Bucket><Key>k</Key><UploadId>abc-123</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "abc-123");
  EXPECT_EQ(ParseInitiateMultipartUpload("<InitiateMultipartUploadResult/>").status().code(),
            Code::kProtocolError);
  EXPECT_EQ(ParseInitiateMultipartUpload("garbage").status().code(), Code::kProtocolError);
}

TEST(S3XmlTest, CompleteMultipartUploadListsPartsEtagsAndChecksums) {
  std::vector<CompletedPart> parts = {{1, "\"e1\"", "AAAAAA==", 0, 0}, {2, "\"e&2\"", "", 0, 0}};
  EXPECT_EQ(BuildCompleteMultipartUpload(parts),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
            "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<Part><PartNumber>1</PartNumber><ETag>\"e1\"</ETag><ChecksumCRC32C>AAAAAA==</ChecksumCRC32C></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>\"e&amp;2\"</ETag></Part>"
            "</CompleteMultipartUpload>");
}

TEST(S3XmlTest, ListObjectsV2PagesDecodeUrlEncodedNames) {
  auto page = ParseListObjectsV2(
      "<ListBucketResult><Name>b</Name><Prefix>p%2F</Prefix><KeyCount>3</KeyCount>"
      "<IsTruncated>true</IsTruncated><EncodingType>url</EncodingType>"
      "<NextContinuationToken>tok+/=</NextContinuationToken>"
      "<Contents><Key>p/a%20b</Key><Size>12</Size><ETag>\"x\"</ETag></Contents>"
      "<Contents><Key>p/c</Key><Size>0</Size></Contents>"
      "<CommonPrefixes><Prefix>p/d%2F</Prefix></CommonPrefixes></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_continuation_token, "tok+/=");  // tokens are opaque, never decoded
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "p/a b");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"x\"");
  EXPECT_EQ(page->objects[1].size, 0u);
  EXPECT_EQ(page->common_prefixes, std::vector<std::string>{"p/d/"});

  auto plain = ParseListObjectsV2(
      "<ListBucketResult><IsTruncated>false</IsTruncated>"
      "<Contents><Key>100%</Key><Size>1</Size></Contents></ListBucketResult>");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->objects[0].key, "100%");  // not encoded: taken as is

  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
                .status().code(),
            Code::kProtocolError);
  EXPECT_EQ(ParseListObjectsV2("<ListBucketResult><Contents><Key>a</Key><Size>x</Size></Contents>"
                               "</ListBucketResult>").status().code(),
            Code::kProtocolError);
  EXPECT_EQ(ParseListObjectsV2("<Other/>").status().code(), Code::kProtocolError);
}

TEST(S3XmlTest, DeleteObjectsRequestAndResult) {
  EXPECT_EQ(BuildDeleteObjects({"a/b", "x<y"}),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
            "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
            "<Object><Key>a/b</Key></Object><Object><Key>x&lt;y</Key></Object></Delete>");
  auto errors = ParseDeleteResult(
      "<DeleteResult><Deleted><Key>ok</Key></Deleted><Error><Key>k1</Key><Code>AccessDenied</Code>"
      "<Message>no</Message></Error></DeleteResult>");
  ASSERT_TRUE(errors.ok());
  ASSERT_EQ(errors->size(), 1u);
  EXPECT_EQ((*errors)[0].key, "k1");
  EXPECT_EQ((*errors)[0].code, "AccessDenied");
  EXPECT_EQ((*errors)[0].message, "no");
  EXPECT_TRUE(ParseDeleteResult("<DeleteResult/>")->empty());
  EXPECT_EQ(ParseDeleteResult("<Error/>").status().code(), Code::kProtocolError);
}

TEST(S3XmlTest, ListMultipartUploads) {
  auto page = ParseListMultipartUploads(
      "<ListMultipartUploadsResult><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
      "<NextKeyMarker>p/k%3D</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>"
      "<Upload><Key>p/k%3D</Key><UploadId>u2</UploadId></Upload></ListMultipartUploadsResult>");
  ASSERT_TRUE(page.ok()) << page.status().ToString();
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_key_marker, "p/k=");
  EXPECT_EQ(page->next_upload_id_marker, "u2");
  ASSERT_EQ(page->uploads.size(), 1u);
  EXPECT_EQ(page->uploads[0].key, "p/k=");
  EXPECT_EQ(page->uploads[0].upload_id, "u2");
  EXPECT_EQ(UrlDecode("bad%2").status().code(), Code::kProtocolError);
}

HttpResponse Response(int status, std::string body = "") {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

TEST(S3ErrorsTest, RetryableAndFinalClassification) {
  for (int status : {500, 502, 503, 504, 429}) {
    EXPECT_TRUE(IsRetryable(ErrorFromResponse(Response(status)))) << status;
    EXPECT_EQ(WantsFreshConnection(ErrorFromResponse(Response(status))), status >= 500) << status;
  }
  for (int status : {400, 403, 404, 409, 412, 416, 501}) {
    EXPECT_FALSE(IsRetryable(ErrorFromResponse(Response(status)))) << status;
  }
  auto body = [](std::string code) { return "<Error><Code>" + code + "</Code></Error>"; };
  EXPECT_TRUE(IsRetryable(ErrorFromResponse(Response(400, body("RequestTimeout")))));
  EXPECT_TRUE(IsRetryable(ErrorFromResponse(Response(403, body("RequestTimeTooSkewed")))));
  EXPECT_TRUE(IsRetryable(ErrorFromResponse(Response(409, body("ConditionalRequestConflict")))));
  EXPECT_TRUE(IsRetryable(ErrorFromResponse(Response(200, body("InternalError")))));
  EXPECT_FALSE(IsRetryable(ErrorFromResponse(Response(400, body("EntityTooSmall")))));
  EXPECT_TRUE(IsRetryable(ErrorFromTransport(Unavailable("reset"))));
  EXPECT_TRUE(IsRetryable(ErrorFromTransport(Timeout("slow"))));
  EXPECT_FALSE(IsRetryable(ErrorFromTransport(Corruption("too long"))));
  EXPECT_TRUE(WantsFreshConnection(ErrorFromTransport(Unavailable("reset"))));
}

TEST(S3ErrorsTest, FinalErrorsCarryStatusCodeIdAttemptsAndAdvice) {
  HttpResponse denied = Response(403, "<Error><Code>AccessDenied</Code><Message>Access Denied</Message>"
                                      "<RequestId>REQ9</RequestId></Error>");
  Status s = FinalError(ErrorFromResponse(denied), "PutObject s3://b/k", "http://h:1", 1);
  EXPECT_EQ(s.code(), Code::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "PutObject s3://b/k at http://h:1: HTTP 403 AccessDenied: Access Denied (request id REQ9) "
            "after 1 attempt; check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
            "AWS_PROFILE, the role), that they may access this bucket and key, the region, and that "
            "this machine's clock is correct");
  HttpResponse head404 = Response(404);
  head404.headers.emplace_back("x-amz-request-id", "HDR1");
  Status nf = FinalError(ErrorFromResponse(head404), "HeadObject s3://b/k", "e", 1);
  EXPECT_EQ(nf.code(), Code::kNotFound);
  EXPECT_NE(nf.message().find("request id HDR1"), std::string::npos) << nf.message();
  Status bucket = FinalError(ErrorFromResponse(Response(404, "<Error><Code>NoSuchBucket</Code></Error>")),
                             "GetObject s3://b/k", "e", 1);
  EXPECT_NE(bucket.message().find("create it"), std::string::npos) << bucket.message();
  Status pre = FinalError(ErrorFromResponse(Response(412)), "PutObject s3://b/m", "e", 1);
  EXPECT_EQ(pre.code(), Code::kAlreadyExists);
  EXPECT_NE(pre.message().find("already committed"), std::string::npos);
  Status slow = FinalError(ErrorFromResponse(Response(503, "<Error><Code>SlowDown</Code></Error>")),
                           "UploadPart s3://b/k", "e", 6);
  EXPECT_EQ(slow.code(), Code::kUnavailable);
  EXPECT_NE(slow.message().find("HTTP 503 SlowDown"), std::string::npos);
  EXPECT_NE(slow.message().find("after 6 attempts"), std::string::npos);
  Status net = FinalError(ErrorFromTransport(Unavailable("PUT http://h/k: Connection refused")),
                          "PutObject s3://b/k", "http://h", 2);
  EXPECT_EQ(net.code(), Code::kUnavailable);
  EXPECT_NE(net.message().find("Connection refused after 2 attempts; check that the endpoint"),
            std::string::npos) << net.message();
  EXPECT_EQ(FinalError(ErrorFromResponse(Response(416)), "w", "e", 1).code(), Code::kCorruption);
  EXPECT_EQ(FinalError(ErrorFromResponse(Response(501)), "w", "e", 1).code(), Code::kUnimplemented);
}

TEST(S3RetryTest, CappedExponentialCeilingAndFullJitter) {
  RetryOptions o;
  o.base = std::chrono::milliseconds(100);
  o.cap = std::chrono::milliseconds(5000);
  RetryPolicy p(o);
  EXPECT_EQ(p.Ceiling(1).count(), 100);
  EXPECT_EQ(p.Ceiling(2).count(), 200);
  EXPECT_EQ(p.Ceiling(3).count(), 400);
  EXPECT_EQ(p.Ceiling(6).count(), 3200);
  EXPECT_EQ(p.Ceiling(7).count(), 5000);
  EXPECT_EQ(p.Ceiling(60).count(), 5000);  // no overflow

  uint64_t next = 0;
  o.random = [&] { return next; };
  std::vector<int64_t> slept;
  o.sleep = [&](std::chrono::milliseconds d) { slept.push_back(d.count()); };
  RetryPolicy fixed(o);
  next = 0;
  EXPECT_EQ(fixed.Delay(3).count(), 0);
  next = 400;
  EXPECT_EQ(fixed.Delay(3).count(), 400);  // the ceiling itself is reachable
  next = 401;
  EXPECT_EQ(fixed.Delay(3).count(), 0);
  next = 250;
  fixed.Backoff(2);
  EXPECT_EQ(slept, std::vector<int64_t>{49});  // 250 mod (200 + 1)

  // The default random source spreads delays over the whole range.
  RetryPolicy jitter(RetryOptions{});
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) {
    const int64_t d = jitter.Delay(4).count();
    EXPECT_GE(d, 0);
    EXPECT_LE(d, 800);
    seen.insert(d / 100);
  }
  EXPECT_GE(seen.size(), 6u);
}

}  // namespace
}  // namespace tierckpt::s3
