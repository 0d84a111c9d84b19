// s3_express_test.cc — S3 Express names, CreateSession and the session
// signer, against FakeTransport as the stub zonal endpoint. The two
// Authorization values are botocore's (tests/data/sigv4/botocore_vectors.py:
// S3SigV4Auth with service "s3express" for CreateSession, S3ExpressAuth for
// the data request; botocore 1.44.8, clock frozen at 2024-05-01T12:00:00Z).
#include "s3/s3_express.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <latch>
#include <thread>
#include <vector>

#include "testing/fake_transport.h"

namespace tierckpt::s3 {
namespace {

using std::chrono::seconds;

constexpr char kBucket[] = "mybucket--usw2-az1--x-s3";
constexpr char kEndpoint[] = "https://mybucket--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com";
const Credentials kBase{"ASIAEXAMPLETEMP", "tempSecret/Key+EXAMPLE",
                        "FwoGZXIvYXdzEXAMPLE//token==", std::nullopt, "profile test"};

Clock::time_point Start() {
  using namespace std::chrono;
  return sys_days(year(2024) / 5 / 1) + hours(12);  // 2024-05-01T12:00:00Z
}

std::string Iso(Clock::time_point t) {
  const std::time_t tt = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string SessionXml(const std::string& key, const std::string& secret, const std::string& token,
                       const std::string& expiration) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<CreateSessionResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Credentials>"
         "<SessionToken>" +
         token + "</SessionToken><SecretAccessKey>" + secret + "</SecretAccessKey><AccessKeyId>" + key +
         "</AccessKeyId><Expiration>" + expiration + "</Expiration></Credentials></CreateSessionResult>";
}

class FixedProvider final : public CredentialsProvider {
 public:
  explicit FixedProvider(Result<Credentials> c) : c_(std::move(c)) {}
  Result<Credentials> Get() override { return c_; }
  std::string Name() const override { return "fixed"; }

 private:
  Result<Credentials> c_;
};

bool IsCreateSession(const HttpRequest& r) {
  return r.method == "GET" && r.path == "/" && r.query.size() == 1 && r.query[0].first == "session";
}

// A stub zonal endpoint that hands out numbered five-minute sessions.
class ExpressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    transport_->On(IsCreateSession, [this](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
      if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
      const int n = ++sessions_created_;
      HttpResponse response;
      if (fail_status_ != 0) {
        response.status = fail_status_;
        response.body = fail_body_;
        return response;
      }
      response.status = 200;
      response.body = n == 1 ? SessionXml("ASIASESSIONEXAMPLE", "sessionSecret/EXAMPLE+key",
                                          "s3expressSessionToken==EXAMPLE", Iso(Now() + seconds(300)))
                             : SessionXml("ASIASESSION" + std::to_string(n), "secret" + std::to_string(n),
                                          "token" + std::to_string(n), Iso(Now() + seconds(300)));
      return response;
    });
    ExpressOptions options;
    options.now = [this] { return Now(); };
    signer_ = MakeExpressSigner(
        transport_, std::make_shared<FixedProvider>(kBase), "us-west-2",
        [](const std::string& bucket) { return ExpressEndpoint(bucket, "us-west-2").value_or(""); }, options);
  }

  Clock::time_point Now() const { return Start() + seconds(clock_s_.load()); }

  HttpRequest DataRequest(const std::string& bucket = kBucket) const {
    HttpRequest r;
    r.endpoint = *ExpressEndpoint(bucket, "us-west-2");
    r.path = "/ckpt/step%2042/shard.bin";
    return r;
  }

  std::string SignedToken(const std::string& bucket = kBucket) {
    HttpRequest r = DataRequest(bucket);
    const Status st = signer_->Sign(r, bucket);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return std::string(FindHeader(r.headers, "x-amz-s3session-token").value_or(""));
  }

  // Signs from `threads` threads released at once; returns their statuses.
  std::vector<Status> SignConcurrently(int threads) {
    std::latch go(threads);
    std::vector<Status> statuses(static_cast<size_t>(threads));
    std::vector<std::thread> workers;
    for (int i = 0; i < threads; ++i) {
      workers.emplace_back([&, i] {
        HttpRequest r = DataRequest();
        go.arrive_and_wait();
        statuses[static_cast<size_t>(i)] = signer_->Sign(r, kBucket);
      });
    }
    for (auto& w : workers) w.join();
    return statuses;
  }

  std::shared_ptr<FakeTransport> transport_ = std::make_shared<FakeTransport>();
  std::unique_ptr<RequestSigner> signer_;
  std::atomic<int64_t> clock_s_{0};
  std::atomic<int> sessions_created_{0};
  std::chrono::milliseconds delay_{0};
  int fail_status_ = 0;
  std::string fail_body_;
};

TEST(ExpressNames, ZoneAndEndpoint) {
  EXPECT_EQ(ExpressZone("ckpt--usw2-az1--x-s3"), "usw2-az1");
  EXPECT_EQ(ExpressZone("a--use1-az4--x-s3"), "use1-az4");
  EXPECT_EQ(ExpressZone("my-ckpt--usw2-lax1-az1--x-s3"), "usw2-lax1-az1");
  EXPECT_TRUE(IsExpressBucket("ckpt--usw2-az1--x-s3"));
  for (const char* bad :
       {"plain-bucket", "--usw2-az1--x-s3", "name--x-s3", "name----x-s3", "name--USW2-az1--x-s3",
        "name--usw2-az1--x-s3x", "name--usw2-az1-x-s3", "name---az1--x-s3", "name--usw2--x-s3",
        "name--usw2-az--x-s3", "name--usw2-azx--x-s3", "name--usw2_az1--x-s3", ""}) {
    EXPECT_FALSE(ExpressZone(bad).has_value()) << bad;
    EXPECT_FALSE(IsExpressBucket(bad)) << bad;
  }
  EXPECT_EQ(ExpressEndpoint(kBucket, "us-west-2"), kEndpoint);
  EXPECT_FALSE(ExpressEndpoint("plain", "us-west-2").has_value());
}

TEST(ExpressParse, CreateSessionResult) {
  auto c = ParseCreateSessionResult(SessionXml("AK", "SK", "TOK", "2024-05-01T12:05:00.123Z"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AK");
  EXPECT_EQ(c->secret_access_key, "SK");
  EXPECT_EQ(c->session_token, "TOK");
  EXPECT_EQ(c->expiration, Start() + seconds(300));

  auto missing = ParseCreateSessionResult(
      "<CreateSessionResult><Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
      "<Expiration>2024-05-01T12:05:00Z</Expiration></Credentials></CreateSessionResult>");
  EXPECT_EQ(missing.status().code(), Code::kProtocolError);
  EXPECT_NE(missing.status().message().find("SessionToken"), std::string::npos) << missing.status().message();
  auto bad_time = ParseCreateSessionResult(SessionXml("A", "S", "T", "tomorrow"));
  EXPECT_EQ(bad_time.status().code(), Code::kProtocolError);
  EXPECT_NE(bad_time.status().message().find("tomorrow"), std::string::npos);
  EXPECT_EQ(ParseCreateSessionResult("<Other/>").status().code(), Code::kProtocolError);
  EXPECT_EQ(ParseCreateSessionResult("not xml <").status().code(), Code::kProtocolError);
}

TEST_F(ExpressTest, ExactCreateSessionAndDataRequestMatchBotocore) {
  HttpRequest data = DataRequest();
  data.headers = {{"x-amz-security-token", "must-not-be-sent"}};
  ASSERT_TRUE(signer_->Sign(data, kBucket).ok());

  const auto sent = transport_->Requests();
  ASSERT_EQ(sent.size(), 1u);
  const HttpRequest& cs = sent[0].request;
  EXPECT_EQ(cs.method, "GET");
  EXPECT_EQ(cs.endpoint, kEndpoint);
  EXPECT_EQ(cs.path, "/");
  ASSERT_EQ(cs.query.size(), 1u);
  EXPECT_EQ(cs.query[0], (std::pair<std::string, std::string>("session", "")));
  EXPECT_EQ(RequestUrl(cs), std::string(kEndpoint) + "/?session=");
  EXPECT_TRUE(sent[0].body.empty());
  EXPECT_EQ(FindHeader(cs.headers, "x-amz-create-session-mode").value_or(""), "ReadWrite");
  EXPECT_EQ(FindHeader(cs.headers, "host").value_or(""),
            "mybucket--usw2-az1--x-s3.s3express-usw2-az1.us-west-2.amazonaws.com");
  EXPECT_EQ(FindHeader(cs.headers, "x-amz-date").value_or(""), "20240501T120000Z");
  EXPECT_EQ(FindHeader(cs.headers, "x-amz-security-token").value_or(""), kBase.session_token);
  EXPECT_FALSE(FindHeader(cs.headers, "x-amz-s3session-token").has_value());
  // Base key, scope .../s3express/...: botocore's value.
  EXPECT_EQ(
      FindHeader(cs.headers, "authorization").value_or(""),
      "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLETEMP/20240501/us-west-2/s3express/aws4_request, "
      "SignedHeaders=host;x-amz-content-sha256;x-amz-create-session-mode;x-amz-date;x-amz-security-token, "
      "Signature=5091f524d61d9feec1d2208c9840112008a1cde83691bae2f9624036e8761179");

  // The data request: session key, x-amz-s3session-token, no security token.
  EXPECT_EQ(FindHeader(data.headers, "x-amz-s3session-token").value_or(""), "s3expressSessionToken==EXAMPLE");
  EXPECT_FALSE(FindHeader(data.headers, "x-amz-security-token").has_value());
  EXPECT_EQ(FindHeader(data.headers, "x-amz-content-sha256").value_or(""), "UNSIGNED-PAYLOAD");
  EXPECT_EQ(FindHeader(data.headers, "authorization").value_or(""),
            "AWS4-HMAC-SHA256 Credential=ASIASESSIONEXAMPLE/20240501/us-west-2/s3express/aws4_request, "
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-s3session-token, "
            "Signature=3f665eb8fcb74f9bed59fccf82ce87da7c3116e60cb303e7bb33e97eb6bbb1bc");
}

TEST_F(ExpressTest, SessionsAreCachedPerBucketAndRefreshedBeforeExpiry) {
  EXPECT_EQ(SignedToken(), "s3expressSessionToken==EXAMPLE");
  clock_s_ = 200;  // 100 s left > 60 s margin: cached
  EXPECT_EQ(SignedToken(), "s3expressSessionToken==EXAMPLE");
  EXPECT_EQ(sessions_created_, 1);

  EXPECT_EQ(SignedToken("other--use1-az4--x-s3"), "token2");  // its own session, its own endpoint
  const auto sent = transport_->Requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[1].request.endpoint,
            "https://other--use1-az4--x-s3.s3express-use1-az4.us-west-2.amazonaws.com");

  clock_s_ = 241;  // 59 s left: inside the margin → exactly one refresh
  EXPECT_EQ(SignedToken(), "token3");
  EXPECT_EQ(SignedToken(), "token3");
  EXPECT_EQ(sessions_created_, 3);
}

TEST_F(ExpressTest, ConcurrentSignersShareOneCreateSession) {
  delay_ = std::chrono::milliseconds(100);
  for (const Status& st : SignConcurrently(8)) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sessions_created_, 1) << "first session";

  clock_s_ = 250;  // near expiry: eight threads, one refresh
  for (const Status& st : SignConcurrently(8)) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sessions_created_, 2) << "refresh";

  clock_s_ = 1000;  // long expired: same
  for (const Status& st : SignConcurrently(8)) EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(sessions_created_, 3) << "after expiry";
  EXPECT_EQ(SignedToken(), "token3");
}

TEST_F(ExpressTest, CreateSessionErrorsNameBucketEndpointAndCause) {
  fail_status_ = 403;
  fail_body_ =
      "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message>"
      "<RequestId>R1</RequestId></Error>";
  HttpRequest r = DataRequest();
  Status st = signer_->Sign(r, kBucket);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  for (const char* part : {"CreateSession", kBucket, kEndpoint, "HTTP 403", "AccessDenied: Access Denied",
                           "s3express:CreateSession", "profile test"}) {
    EXPECT_NE(st.message().find(part), std::string::npos) << part << " missing from: " << st.message();
  }
  EXPECT_FALSE(FindHeader(r.headers, "authorization").has_value());

  fail_status_ = 404;
  fail_body_ =
      "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
  st = signer_->Sign(r, kBucket);
  EXPECT_EQ(st.code(), Code::kNotFound);
  EXPECT_NE(st.message().find("NoSuchBucket"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("usw2-az1"), std::string::npos) << st.message();

  fail_status_ = 503;
  fail_body_ = "";
  EXPECT_EQ(signer_->Sign(r, kBucket).code(), Code::kUnavailable);

  fail_status_ = 200;
  fail_body_ = "<CreateSessionResult/>";
  st = signer_->Sign(r, kBucket);
  EXPECT_EQ(st.code(), Code::kProtocolError);
  EXPECT_NE(st.message().find(kBucket), std::string::npos) << st.message();
}

TEST_F(ExpressTest, ConcurrentSignersShareOneFailure) {
  delay_ = std::chrono::milliseconds(100);
  fail_status_ = 403;
  fail_body_ = "<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
  for (const Status& st : SignConcurrently(6)) EXPECT_EQ(st.code(), Code::kPermissionDenied) << st.ToString();
  EXPECT_EQ(sessions_created_, 1);
}

TEST_F(ExpressTest, FailedRefreshKeepsTheStillValidSession) {
  EXPECT_EQ(SignedToken(), "s3expressSessionToken==EXAMPLE");
  clock_s_ = 270;  // inside the margin, 30 s before expiry
  fail_status_ = 500;
  EXPECT_EQ(SignedToken(), "s3expressSessionToken==EXAMPLE");
  EXPECT_EQ(sessions_created_, 2);
  fail_status_ = 0;
  EXPECT_EQ(SignedToken(), "token3");  // the next Sign tries again
  clock_s_ = 1000;
  fail_status_ = 500;
  HttpRequest r = DataRequest();
  EXPECT_EQ(signer_->Sign(r, kBucket).code(), Code::kUnavailable) << "expired session is never used";
}

TEST(ExpressSigner, TransportAndBaseCredentialErrors) {
  auto transport = std::make_shared<FakeTransport>();
  transport->On(IsCreateSession, [](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
    return Unavailable("connection refused");
  });
  auto signer = MakeExpressSigner(transport, std::make_shared<FixedProvider>(kBase), "us-west-2", nullptr);
  HttpRequest r;
  r.endpoint = kEndpoint;
  Status st = signer->Sign(r, kBucket);
  EXPECT_EQ(st.code(), Code::kUnavailable);
  EXPECT_NE(st.message().find(kBucket), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("connection refused"), std::string::npos) << st.message();
  ASSERT_EQ(transport->Requests().size(), 1u);
  EXPECT_EQ(transport->Requests()[0].request.endpoint, kEndpoint) << "default endpoint from the bucket name";

  EXPECT_EQ(signer->Sign(r, "not-express").code(), Code::kInvalidArgument);
  EXPECT_EQ(signer->Sign(r, "").code(), Code::kInvalidArgument);

  auto no_base =
      MakeExpressSigner(transport, std::make_shared<FixedProvider>(PermissionDenied("no credentials found")),
                        "us-west-2", nullptr);
  st = no_base->Sign(r, kBucket);
  EXPECT_EQ(st.code(), Code::kPermissionDenied);
  EXPECT_NE(st.message().find("no credentials found"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(kBucket), std::string::npos) << st.message();
}

}  // namespace
}  // namespace tierckpt::s3
