// Tests of the web identity source against a scripted STS.
#include <gtest/gtest.h>

#include <map>

#include "os/files.h"
#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"
#include "testing/fake_transport.h"
#include "testing/temp_dir.h"

namespace tierckpt::s3 {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

constexpr char kRoleArn[] = "arn:aws:iam::123456789012:role/train/ckpt";

std::string StsSuccess(const std::string& key_id) {
  return R"(<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:ml:trainer</SubjectFromWebIdentityToken>
    <Credentials>
      <AccessKeyId>)" +
         key_id + R"(</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY</SecretAccessKey>
      <SessionToken>FwoGZXIvYXdzEBAaD+session/token==</SessionToken>
      <Expiration>2024-05-01T12:34:56Z</Expiration>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>)";
}

// name → value of an application/x-www-form-urlencoded body.
std::map<std::string, std::string> DecodeForm(std::string_view body) {
  auto decode = [](std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
        i += 2;
      } else {
        out.push_back(s[i]);
      }
    }
    return out;
  };
  std::map<std::string, std::string> out;
  while (!body.empty()) {
    const size_t amp = body.find('&');
    const std::string_view item = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    const size_t eq = item.find('=');
    out[decode(item.substr(0, eq))] = eq == std::string_view::npos ? "" : decode(item.substr(eq + 1));
  }
  return out;
}

HttpResponse WebIdentityResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

class WebIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override { WriteToken("eyJhbGciOiJSUzI1NiJ9.payload+/=.sig\n"); }

  void WriteToken(std::string_view token) {
    ASSERT_TRUE(WriteFileAtomic(token_file_, token, /*durable=*/false).ok());
  }

  Vars BaseVars() const { return {{"AWS_WEB_IDENTITY_TOKEN_FILE", token_file_}, {"AWS_ROLE_ARN", kRoleArn}}; }

  Result<std::optional<Credentials>> Fetch(Vars vars, std::string region = "eu-west-1") {
    why_not_.clear();
    return MakeWebIdentitySource(Environment::FromMap(std::move(vars), dir_.path()), sts_, std::move(region))
        ->Fetch(&why_not_);
  }

  void AnswerEverything(int status, std::string body) {
    sts_->On([](const HttpRequest&) { return true; },
             [status, body](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
               return WebIdentityResponse(status, body);
             });
  }

  testing_util::TempDir dir_{"tc_cred_web"};
  std::string token_file_ = dir_.Sub("token");
  std::shared_ptr<FakeTransport> sts_ = std::make_shared<FakeTransport>();
  std::string why_not_;
};

TEST_F(WebIdentityTest, AssumesTheRoleWithAnUnsignedFormPost) {
  AnswerEverything(200, StsSuccess("ASIAEXAMPLE"));
  Vars vars = BaseVars();
  vars["AWS_ROLE_SESSION_NAME"] = "trainer-0";
  auto r = Fetch(vars);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  const Credentials& c = **r;
  EXPECT_EQ(c.access_key_id, "ASIAEXAMPLE");
  EXPECT_EQ(c.secret_access_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
  EXPECT_EQ(c.session_token, "FwoGZXIvYXdzEBAaD+session/token==");
  ASSERT_TRUE(c.expiration.has_value());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::seconds>(c.expiration->time_since_epoch()).count(),
            1714566896);
  EXPECT_NE(c.source.find(kRoleArn), std::string::npos);

  const auto requests = sts_->Requests();
  ASSERT_EQ(requests.size(), 1u);
  const HttpRequest& req = requests[0].request;
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.endpoint, "https://sts.eu-west-1.amazonaws.com");
  EXPECT_EQ(req.path, "/");
  EXPECT_EQ(FindHeader(req.headers, "content-type").value_or(""),
            "application/x-www-form-urlencoded; charset=utf-8");
  EXPECT_FALSE(FindHeader(req.headers, "authorization").has_value()) << "STS web identity calls are unsigned";
  const auto form = DecodeForm(requests[0].body);
  EXPECT_EQ(form.at("Action"), "AssumeRoleWithWebIdentity");
  EXPECT_EQ(form.at("Version"), "2011-06-15");
  EXPECT_EQ(form.at("RoleArn"), kRoleArn);
  EXPECT_EQ(form.at("RoleSessionName"), "trainer-0");
  EXPECT_EQ(form.at("WebIdentityToken"), "eyJhbGciOiJSUzI1NiJ9.payload+/=.sig");  // trimmed
  // Characters that would break a form body are escaped.
  EXPECT_EQ(requests[0].body.find("payload+/="), std::string::npos) << requests[0].body;
}

TEST_F(WebIdentityTest, RereadsTheTokenFileOnEveryFetch) {
  AnswerEverything(200, StsSuccess("ASIA1"));
  ASSERT_TRUE(Fetch(BaseVars()).ok());
  WriteToken("rotated-token");
  ASSERT_TRUE(Fetch(BaseVars()).ok());
  const auto requests = sts_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(DecodeForm(requests[0].body).at("WebIdentityToken"), "eyJhbGciOiJSUzI1NiJ9.payload+/=.sig");
  EXPECT_EQ(DecodeForm(requests[1].body).at("WebIdentityToken"), "rotated-token");
}

TEST_F(WebIdentityTest, DefaultSessionNameAndRegionalEndpoints) {
  AnswerEverything(200, StsSuccess("ASIA1"));
  ASSERT_TRUE(Fetch(BaseVars()).ok());
  Vars with_region = BaseVars();
  with_region["AWS_REGION"] = "ap-northeast-1";
  ASSERT_TRUE(Fetch(with_region, "").ok());
  ASSERT_TRUE(Fetch(BaseVars(), "").ok());
  ASSERT_TRUE(Fetch(BaseVars(), "cn-north-1").ok());
  const auto requests = sts_->Requests();
  ASSERT_EQ(requests.size(), 4u);
  const std::string session = DecodeForm(requests[0].body).at("RoleSessionName");
  EXPECT_EQ(session.rfind("tierckpt-", 0), 0u) << session;
  EXPECT_GT(std::stoll(session.substr(9)), 1700000000);
  EXPECT_EQ(requests[1].request.endpoint, "https://sts.ap-northeast-1.amazonaws.com");
  EXPECT_EQ(requests[2].request.endpoint, "https://sts.us-east-1.amazonaws.com");
  EXPECT_EQ(requests[3].request.endpoint, "https://sts.cn-north-1.amazonaws.com.cn");
}

TEST_F(WebIdentityTest, RegionFallsBackToTheProfile) {
  AnswerEverything(200, StsSuccess("ASIA1"));
  ASSERT_TRUE(MakeDirs(dir_.Sub(".aws")).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_.Sub(".aws/config"), "[default]\nregion = sa-east-1\n", false).ok());
  ASSERT_TRUE(Fetch(BaseVars(), "").ok());
  Vars vars = BaseVars();
  vars["AWS_DEFAULT_REGION"] = "us-west-1";
  ASSERT_TRUE(Fetch(vars, "").ok());
  const auto requests = sts_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].request.endpoint, "https://sts.sa-east-1.amazonaws.com");
  EXPECT_EQ(requests[1].request.endpoint, "https://sts.us-west-1.amazonaws.com");
}

TEST_F(WebIdentityTest, EndpointOverrides) {
  AnswerEverything(200, StsSuccess("ASIA1"));
  Vars vars = BaseVars();
  vars["AWS_ENDPOINT_URL"] = "http://127.0.0.1:4566";
  ASSERT_TRUE(Fetch(vars).ok());
  vars["AWS_ENDPOINT_URL_STS"] = "http://localhost:5000/sts/";
  ASSERT_TRUE(Fetch(vars).ok());
  const auto requests = sts_->Requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].request.endpoint, "http://127.0.0.1:4566");
  EXPECT_EQ(requests[1].request.endpoint, "http://localhost:5000");
  EXPECT_EQ(requests[1].request.path, "/sts/");

  vars["AWS_ENDPOINT_URL_STS"] = "localhost:5000";
  auto r = Fetch(vars);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_ENDPOINT_URL_STS"), std::string::npos) << r.status().message();
}

TEST_F(WebIdentityTest, NotSelectedWithoutItsVariables) {
  auto r = Fetch({});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("AWS_WEB_IDENTITY_TOKEN_FILE"), std::string::npos);
  EXPECT_TRUE(sts_->Requests().empty());
}

TEST_F(WebIdentityTest, HalfConfiguredIsAnError) {
  auto r = Fetch({{"AWS_WEB_IDENTITY_TOKEN_FILE", token_file_}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_ROLE_ARN is not"), std::string::npos) << r.status().message();
  r = Fetch({{"AWS_ROLE_ARN", kRoleArn}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_WEB_IDENTITY_TOKEN_FILE is not"), std::string::npos);
  EXPECT_TRUE(sts_->Requests().empty());
}

TEST_F(WebIdentityTest, TokenFileProblemsNameTheFile) {
  Vars vars = BaseVars();
  vars["AWS_WEB_IDENTITY_TOKEN_FILE"] = dir_.Sub("missing");
  auto r = Fetch(vars);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find(dir_.Sub("missing")), std::string::npos) << r.status().message();

  WriteToken(" \n");
  r = Fetch(BaseVars());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is empty"), std::string::npos) << r.status().message();
  EXPECT_TRUE(sts_->Requests().empty());
}

TEST_F(WebIdentityTest, StsErrorResponsesBecomeClearErrors) {
  AnswerEverything(400, R"(<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>InvalidIdentityToken</Code>
  <Message>Couldn't retrieve verification key from your identity provider</Message></Error>
  <RequestId>1</RequestId></ErrorResponse>)");
  auto r = Fetch(BaseVars());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  const std::string& m = r.status().message();
  for (const std::string& part : {std::string("InvalidIdentityToken"), std::string("verification key"),
                                  std::string("https://sts.eu-west-1.amazonaws.com"), std::string(kRoleArn),
                                  std::string("HTTP 400"), std::string("trust policy")}) {
    EXPECT_NE(m.find(part), std::string::npos) << part << " not in " << m;
  }
}

TEST_F(WebIdentityTest, ThrottlingAndServerErrorsAreUnavailable) {
  AnswerEverything(400,
                   "<ErrorResponse><Error><Code>Throttling</Code><Message>Rate exceeded</Message></Error>"
                   "</ErrorResponse>");
  EXPECT_EQ(Fetch(BaseVars()).status().code(), Code::kUnavailable);
  sts_ = std::make_shared<FakeTransport>();
  AnswerEverything(503, "Service Unavailable");
  auto r = Fetch(BaseVars());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("Service Unavailable"), std::string::npos) << r.status().message();
}

TEST_F(WebIdentityTest, TransportFailureKeepsItsCodeAndNamesTheEndpoint) {
  sts_->On([](const HttpRequest&) { return true; },
           [](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
             return Timeout("POST sts.eu-west-1.amazonaws.com/: connect timed out");
           });
  auto r = Fetch(BaseVars());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_NE(r.status().message().find("AssumeRoleWithWebIdentity"), std::string::npos)
      << r.status().message();
}

TEST_F(WebIdentityTest, MalformedSuccessResponsesAreProtocolErrors) {
  for (const std::string& body :
       {std::string("not xml <"), std::string("<Other/>"),
        std::string(
            "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
            "<AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
            "<Expiration>2024-05-01T12:34:56Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
            "</AssumeRoleWithWebIdentityResponse>")}) {
    sts_ = std::make_shared<FakeTransport>();
    AnswerEverything(200, body);
    auto r = Fetch(BaseVars());
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), Code::kProtocolError) << r.status().ToString();
  }
  sts_ = std::make_shared<FakeTransport>();
  std::string bad_time = StsSuccess("A");
  bad_time.replace(bad_time.find("2024-05-01T12:34:56Z"), 20, "soon");
  AnswerEverything(200, bad_time);
  auto r = Fetch(BaseVars());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Expiration"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace tierckpt::s3
