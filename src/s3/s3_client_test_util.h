// s3_client_test_util.h — helpers for the S3 client tests (test-only): a
// signer that only marks requests, and configs/clients over fakes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "s3/s3_client.h"
#include "testing/fake_s3.h"
#include "testing/fake_transport.h"

namespace tierckpt::s3::testing_util {

// Adds "authorization: test-signature" and counts calls; fails on demand.
class MarkingSigner final : public RequestSigner {
 public:
  Status Sign(HttpRequest& request, const std::string& bucket) override {
    ++calls;
    if (fail) return FailedPrecondition("no credentials (test)");
    request.headers.emplace_back("authorization", "test-signature for " + bucket);
    return Status::Ok();
  }
  std::atomic<int> calls{0};
  std::atomic<bool> fail{false};
};

inline S3Config TestConfig(Addressing addressing = Addressing::kPath) {
  S3Config c;
  c.bucket = "bkt";
  c.prefix = "pre";
  c.endpoint = "http://s3.test:9000";
  c.addressing = addressing;
  c.part_size = 1024;
  c.multipart_threshold = 1024;
  c.concurrency = 4;
  c.max_attempts = 4;
  return c;
}

// Retries without sleeping; records the delays asked for.
inline RetryOptions InstantRetries(std::vector<int64_t>* slept = nullptr) {
  RetryOptions r;
  r.sleep = [slept](std::chrono::milliseconds d) {
    if (slept != nullptr) slept->push_back(d.count());
  };
  r.random = [] { return uint64_t{7}; };
  return r;
}

inline HttpResponse Reply(int status, std::string body = "", Headers headers = {}) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  r.headers = std::move(headers);
  return r;
}

inline std::string ErrorXml(const std::string& code, const std::string& message = "msg") {
  return "<Error><Code>" + code + "</Code><Message>" + message +
         "</Message><RequestId>RID</RequestId></Error>";
}

// An S3Client (TestConfig unless given, instant retries) over a FakeS3
// bucket "bkt"; Count("PUT partNumber") counts the bucket's log entries.
class FakeS3ClientFixture : public ::testing::Test {
 protected:
  S3Client& Client(S3Config config = TestConfig()) {
    client_ = std::make_unique<S3Client>(config, s3_, signer_, InstantRetries());
    return *client_;
  }
  int Count(const std::string& entry) {
    auto log = s3_->Log();
    return static_cast<int>(std::count(log.begin(), log.end(), entry));
  }

  std::shared_ptr<FakeS3> s3_ = std::make_shared<FakeS3>("bkt");
  std::shared_ptr<MarkingSigner> signer_ = std::make_shared<MarkingSigner>();
  std::unique_ptr<S3Client> client_;
};

// Deterministic bytes.
inline std::string Bytes(size_t n, unsigned seed = 1) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 31 + seed * 17 + (i >> 9)) & 0xff);
  return s;
}

}  // namespace tierckpt::s3::testing_util
