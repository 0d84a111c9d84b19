// Tests of the container source (ECS, EKS Pod Identity) against a scripted
// credentials endpoint.
#include <gtest/gtest.h>

#include "os/files.h"
#include "s3/credentials_providers.h"
#include "testing/fake_transport.h"
#include "testing/temp_dir.h"

namespace tierckpt::s3 {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

constexpr char kCredentialsJson[] =
    R"({"AccessKeyId":"ASIACONTAINER","SecretAccessKey":"SECRET","Token":"TOKEN",)"
    R"("Expiration":"2024-05-01T12:34:56Z","RoleArn":"arn:aws:iam::1:role/task"})";

HttpResponse ContainerResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

class ContainerSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { Answer(200, kCredentialsJson); }

  void Answer(int status, std::string body) {
    endpoint_ = std::make_shared<FakeTransport>();
    endpoint_->On([](const HttpRequest&) { return true; },
                  [status, body](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
                    return ContainerResponse(status, body);
                  });
  }

  Result<std::optional<Credentials>> Fetch(Vars vars) {
    why_not_.clear();
    return MakeContainerSource(Environment::FromMap(std::move(vars), dir_.path()), endpoint_)
        ->Fetch(&why_not_);
  }

  HttpRequest LastRequest() const {
    const auto requests = endpoint_->Requests();
    EXPECT_FALSE(requests.empty());
    return requests.empty() ? HttpRequest{} : requests.back().request;
  }

  testing_util::TempDir dir_{"tc_cred_container"};
  std::shared_ptr<FakeTransport> endpoint_;
  std::string why_not_;
};

TEST_F(ContainerSourceTest, EcsRelativeUri) {
  auto r = Fetch({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/7d8f-uuid"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->access_key_id, "ASIACONTAINER");
  EXPECT_EQ((*r)->secret_access_key, "SECRET");
  EXPECT_EQ((*r)->session_token, "TOKEN");
  EXPECT_TRUE((*r)->expiration.has_value());
  EXPECT_EQ((*r)->source, "container");
  const HttpRequest req = LastRequest();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.endpoint, "http://169.254.170.2");
  EXPECT_EQ(req.path, "/v2/credentials/7d8f-uuid");
  EXPECT_FALSE(FindHeader(req.headers, "authorization").has_value());
}

TEST_F(ContainerSourceTest, RelativeUriWinsOverFullUri) {
  ASSERT_TRUE(Fetch({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/rel"},
                     {"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:9/full"}})
                  .ok());
  EXPECT_EQ(LastRequest().path, "/rel");
  EXPECT_EQ(LastRequest().endpoint, "http://169.254.170.2");
}

TEST_F(ContainerSourceTest, RelativeUriMustBeAPath) {
  auto r = Fetch({{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "v2/credentials"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("must start with '/'"), std::string::npos) << r.status().message();
}

TEST_F(ContainerSourceTest, FullUriRule) {
  for (const char* allowed :
       {"https://creds.example.com/v1/credentials", "http://127.0.0.1:51679/creds", "http://127.9.8.7/creds",
        "http://localhost/creds", "http://LOCALHOST:80/creds", "http://[::1]:8080/creds",
        "http://169.254.170.23/v1/credentials", "http://[fd00:ec2::23]/v1/credentials",
        "http://[fd00:ec2:0::23]:80/v1/credentials"}) {
    auto r = Fetch({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", allowed}});
    EXPECT_TRUE(r.ok() && r->has_value()) << allowed << ": " << r.status().ToString();
  }
  for (const char* refused :
       {"http://10.0.0.1/creds", "http://169.254.170.2/creds", "http://169.254.169.254/creds",
        "http://example.com/creds", "http://localhost.evil.com/creds", "http://128.0.0.1/creds",
        "http://[fd00:ec2::24]/creds", "http://[::2]/creds", "http://127.0.0.1.nip.io/creds"}) {
    auto r = Fetch({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", refused}});
    ASSERT_FALSE(r.ok()) << refused;
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    const std::string& m = r.status().message();
    EXPECT_NE(m.find(refused), std::string::npos) << m;
    EXPECT_NE(m.find("loopback"), std::string::npos) << m;
    EXPECT_NE(m.find("169.254.170.23"), std::string::npos) << m;
  }
  auto r = Fetch({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "ftp://127.0.0.1/x"}});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_CONTAINER_CREDENTIALS_FULL_URI"), std::string::npos);
}

TEST_F(ContainerSourceTest, FullUriKeepsItsQuery) {
  ASSERT_TRUE(Fetch({{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:8080/get?role=a%2Fb"}}).ok());
  const HttpRequest req = LastRequest();
  EXPECT_EQ(req.endpoint, "http://127.0.0.1:8080");
  EXPECT_EQ(req.path, "/get");
  ASSERT_EQ(req.query.size(), 1u);
  EXPECT_EQ(req.query[0].second, "a/b");
}

TEST_F(ContainerSourceTest, AuthorizationTokenFileIsRereadAndWins) {
  const std::string file = dir_.Sub("eks-pod-identity-token");
  ASSERT_TRUE(WriteFileAtomic(file, "first-token\n", false).ok());
  Vars vars = {{"AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.170.23/v1/credentials"},
               {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file},
               {"AWS_CONTAINER_AUTHORIZATION_TOKEN", "from-variable"}};
  ASSERT_TRUE(Fetch(vars).ok());
  EXPECT_EQ(FindHeader(LastRequest().headers, "authorization").value_or(""), "first-token");
  ASSERT_TRUE(WriteFileAtomic(file, "second-token", false).ok());
  ASSERT_TRUE(Fetch(vars).ok());
  EXPECT_EQ(FindHeader(LastRequest().headers, "authorization").value_or(""), "second-token");

  vars.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  ASSERT_TRUE(Fetch(vars).ok());
  EXPECT_EQ(FindHeader(LastRequest().headers, "authorization").value_or(""), "from-variable");
}

TEST_F(ContainerSourceTest, BadAuthorizationTokens) {
  Vars vars = {{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/creds"},
               {"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", dir_.Sub("absent")}};
  auto r = Fetch(vars);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(dir_.Sub("absent")), std::string::npos) << r.status().message();
  vars.erase("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  vars["AWS_CONTAINER_AUTHORIZATION_TOKEN"] = "abc\r\nX-Injected: 1";
  r = Fetch(vars);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line break"), std::string::npos) << r.status().message();
  EXPECT_EQ(endpoint_->Requests().size(), 0u);
}

TEST_F(ContainerSourceTest, HttpErrorsAndBadBodies) {
  const Vars vars = {{"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/creds"}};
  struct Case {
    int status;
    const char* body;
    Code code;
  };
  for (const Case& c :
       {Case{500, "agent broke", Code::kUnavailable}, Case{403, "bad token", Code::kPermissionDenied},
        Case{404, "no such task", Code::kProtocolError}, Case{200, "<html>", Code::kProtocolError},
        Case{200, R"({"AccessKeyId":"A"})", Code::kProtocolError}}) {
    Answer(c.status, c.body);
    auto r = Fetch(vars);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), c.code) << r.status().ToString();
    EXPECT_NE(r.status().message().find("http://169.254.170.2/creds"), std::string::npos)
        << r.status().message();
  }
}

TEST_F(ContainerSourceTest, NotSelectedWithoutItsVariables) {
  auto r = Fetch({{"AWS_CONTAINER_AUTHORIZATION_TOKEN", "x"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"), std::string::npos);
  EXPECT_TRUE(endpoint_->Requests().empty());
}

}  // namespace
}  // namespace tierckpt::s3
