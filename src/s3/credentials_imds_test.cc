// Tests of the IMDSv2 source against a scripted instance metadata service.
#include <gtest/gtest.h>

#include "s3/credentials_providers.h"
#include "testing/fake_transport.h"

namespace tierckpt::s3 {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

constexpr char kToken[] = "AQAEAImdsSessionToken==";
constexpr char kRolesPath[] = "/latest/meta-data/iam/security-credentials/";
constexpr char kRoleCredentials[] = R"({
  "Code" : "Success",
  "LastUpdated" : "2024-05-01T06:34:56Z",
  "Type" : "AWS-HMAC",
  "AccessKeyId" : "ASIAIMDS",
  "SecretAccessKey" : "IMDSSECRET",
  "Token" : "IMDSTOKEN",
  "Expiration" : "2024-05-01T12:34:56Z"
})";

HttpResponse ImdsResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// A metadata service that demands the session token on every GET.
class FakeImds {
 public:
  FakeImds() : transport_(std::make_shared<FakeTransport>()) {
    transport_->On([](const HttpRequest& r) { return r.method == "PUT" && r.path == "/latest/api/token"; },
                   [this](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
                     if (FindHeader(r.headers, "x-aws-ec2-metadata-token-ttl-seconds") != "21600") {
                       return ImdsResponse(400, "missing ttl");
                     }
                     return token_response_;
                   });
    transport_->On([](const HttpRequest& r) { return r.method == "GET"; },
                   [this](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
                     if (FindHeader(r.headers, "x-aws-ec2-metadata-token") != kToken)
                       return ImdsResponse(401, "");
                     if (r.path == kRolesPath) return roles_response_;
                     if (r.path == std::string(kRolesPath) + "ckpt-role")
                       return ImdsResponse(200, credentials_body_);
                     return ImdsResponse(404, "not found");
                   });
  }

  std::shared_ptr<FakeTransport> transport_;
  Result<HttpResponse> token_response_ = ImdsResponse(200, std::string(kToken) + "\n");
  HttpResponse roles_response_ = ImdsResponse(200, "ckpt-role\n");
  std::string credentials_body_ = kRoleCredentials;
};

class ImdsSourceTest : public ::testing::Test {
 protected:
  Result<std::optional<Credentials>> Fetch(Vars vars = {}) {
    why_not_.clear();
    return MakeImdsSource(Environment::FromMap(std::move(vars), "/nonexistent"), imds_.transport_)
        ->Fetch(&why_not_);
  }

  FakeImds imds_;
  std::string why_not_;
};

TEST_F(ImdsSourceTest, TokenThenRoleThenCredentials) {
  auto r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->access_key_id, "ASIAIMDS");
  EXPECT_EQ((*r)->secret_access_key, "IMDSSECRET");
  EXPECT_EQ((*r)->session_token, "IMDSTOKEN");
  ASSERT_TRUE((*r)->expiration.has_value());
  EXPECT_EQ((*r)->source, "IMDS role ckpt-role");

  const auto requests = imds_.transport_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[0].request.method, "PUT");
  EXPECT_EQ(requests[0].request.endpoint, "http://169.254.169.254");
  EXPECT_EQ(requests[0].request.path, "/latest/api/token");
  EXPECT_EQ(FindHeader(requests[0].request.headers, "x-aws-ec2-metadata-token-ttl-seconds"), "21600");
  EXPECT_FALSE(FindHeader(requests[0].request.headers, "x-aws-ec2-metadata-token").has_value());
  EXPECT_EQ(requests[1].request.method, "GET");
  EXPECT_EQ(requests[1].request.path, kRolesPath);
  EXPECT_EQ(FindHeader(requests[1].request.headers, "x-aws-ec2-metadata-token"), kToken);
  EXPECT_EQ(requests[2].request.method, "GET");
  EXPECT_EQ(requests[2].request.path, std::string(kRolesPath) + "ckpt-role");
  EXPECT_EQ(FindHeader(requests[2].request.headers, "x-aws-ec2-metadata-token"), kToken);
}

TEST_F(ImdsSourceTest, EndpointOverridesAndDisable) {
  ASSERT_TRUE(Fetch({{"AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1338/"}}).ok());
  ASSERT_TRUE(Fetch({{"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6"}}).ok());
  auto requests = imds_.transport_->Requests();
  ASSERT_EQ(requests.size(), 6u);
  EXPECT_EQ(requests[0].request.endpoint, "http://127.0.0.1:1338");
  EXPECT_EQ(requests[2].request.endpoint, "http://127.0.0.1:1338");
  EXPECT_EQ(requests[3].request.endpoint, "http://[fd00:ec2::254]");

  auto r = Fetch({{"AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "ipv5"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"), std::string::npos);

  r = Fetch({{"AWS_EC2_METADATA_DISABLED", "TRUE"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("AWS_EC2_METADATA_DISABLED"), std::string::npos);
  EXPECT_EQ(imds_.transport_->Requests().size(), 6u) << "disabled IMDS must not be contacted";
  // Anything but "true" leaves it on.
  EXPECT_TRUE(Fetch({{"AWS_EC2_METADATA_DISABLED", "false"}}).ok());
}

TEST_F(ImdsSourceTest, NothingAnsweringMeansNotSelected) {
  imds_.token_response_ =
      Unavailable("PUT 169.254.169.254/latest/api/token: Connection timed out after 1000 ms");
  auto r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("http://169.254.169.254"), std::string::npos) << why_not_;
  EXPECT_NE(why_not_.find("Connection timed out"), std::string::npos) << why_not_;
  EXPECT_NE(why_not_.find("HttpPutResponseHopLimit"), std::string::npos) << why_not_;

  imds_.token_response_ = Timeout("timed out");
  r = Fetch();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());

  // Other transport failures are errors.
  imds_.token_response_ = Internal("curl: out of handles");
  EXPECT_EQ(Fetch().status().code(), Code::kInternal);
}

TEST_F(ImdsSourceTest, RefusedTokenIsAnError) {
  imds_.token_response_ = ImdsResponse(403, "Forbidden");
  auto r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kPermissionDenied);
  EXPECT_NE(r.status().message().find("/latest/api/token"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("HTTP 403"), std::string::npos) << r.status().message();
}

TEST_F(ImdsSourceTest, NoRoleAttached) {
  imds_.roles_response_ = ImdsResponse(404, "");
  auto r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_NE(r.status().message().find("instance profile"), std::string::npos) << r.status().message();
  imds_.roles_response_ = ImdsResponse(200, "\n");
  EXPECT_EQ(Fetch().status().code(), Code::kNotFound);
}

TEST_F(ImdsSourceTest, RoleNamesAreEncodedAndOnlyTheFirstIsUsed) {
  imds_.roles_response_ = ImdsResponse(200, "ckpt role\nsecond\n");
  auto r = Fetch();
  ASSERT_FALSE(r.ok());  // the fake knows no "ckpt role"
  const auto requests = imds_.transport_->Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_EQ(requests[2].request.path, std::string(kRolesPath) + "ckpt%20role");
  EXPECT_NE(r.status().message().find("HTTP 404"), std::string::npos) << r.status().message();
}

TEST_F(ImdsSourceTest, BadCredentialDocuments) {
  imds_.credentials_body_ = R"({"Code":"AssumeRoleUnauthorizedAccess","Message":"role cannot be assumed"})";
  auto r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AssumeRoleUnauthorizedAccess"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("role cannot be assumed"), std::string::npos) << r.status().message();

  imds_.credentials_body_ = R"({"Code":"Success","AccessKeyId":"A","SecretAccessKey":"S","Token":"T"})";
  r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("Expiration"), std::string::npos) << r.status().message();

  imds_.credentials_body_ = "{";
  EXPECT_EQ(Fetch().status().code(), Code::kProtocolError);
}

}  // namespace
}  // namespace tierckpt::s3
