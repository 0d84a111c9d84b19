// Tests of DefaultCredentialsChain: the SDK order, no fall-through past a
// misconfiguration, the "nothing configured" error, the IMDS transport, the
// cache in front.
#include "s3/credentials_chain.h"

#include <gtest/gtest.h>

#include "os/files.h"
#include "testing/fake_transport.h"
#include "testing/temp_dir.h"

namespace tierckpt::s3 {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

HttpResponse Response(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

constexpr char kStsBody[] =
    "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
    "<AccessKeyId>FROM-STS</AccessKeyId><SecretAccessKey>S</SecretAccessKey><SessionToken>T</SessionToken>"
    "<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>"
    "</AssumeRoleWithWebIdentityResponse>";

// One fake network: STS, the ECS agent and (optionally) IMDS.
std::shared_ptr<FakeTransport> FakeAws(bool with_imds) {
  auto t = std::make_shared<FakeTransport>();
  t->On([](const HttpRequest& r) { return r.endpoint == "https://sts.us-east-1.amazonaws.com"; },
        [](const HttpRequest&, std::string_view) -> Result<HttpResponse> { return Response(200, kStsBody); });
  t->On([](const HttpRequest& r) { return r.endpoint == "http://169.254.170.2"; },
        [](const HttpRequest&, std::string_view) -> Result<HttpResponse> {
          return Response(200, R"({"AccessKeyId":"FROM-CONTAINER","SecretAccessKey":"S","Token":"T",)"
                               R"("Expiration":"2099-01-01T00:00:00Z"})");
        });
  t->On([](const HttpRequest& r) { return r.endpoint == "http://169.254.169.254"; },
        [with_imds](const HttpRequest& r, std::string_view) -> Result<HttpResponse> {
          if (!with_imds)
            return Timeout("PUT 169.254.169.254/latest/api/token: Connection timed out after 1000 ms");
          if (r.method == "PUT") return Response(200, "tok");
          if (r.path == "/latest/meta-data/iam/security-credentials/") return Response(200, "role");
          return Response(200, R"({"Code":"Success","AccessKeyId":"FROM-IMDS","SecretAccessKey":"S",)"
                               R"("Token":"T","Expiration":"2099-01-01T00:00:00Z"})");
        });
  return t;
}

class ChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(MakeDirs(home_.Sub(".aws")).ok());
    ASSERT_TRUE(WriteFileAtomic(home_.Sub("token"), "jwt", false).ok());
    ASSERT_TRUE(WriteFileAtomic(home_.Sub(".aws/credentials"),
                                "[default]\naws_access_key_id = FROM-PROFILE\naws_secret_access_key = S\n",
                                false)
                    .ok());
  }

  Vars AllSources() const {
    return {{"AWS_ACCESS_KEY_ID", "FROM-ENV"},
            {"AWS_SECRET_ACCESS_KEY", "S"},
            {"AWS_WEB_IDENTITY_TOKEN_FILE", home_.Sub("token")},
            {"AWS_ROLE_ARN", "arn:aws:iam::1:role/r"},
            {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/x"}};
  }

  Result<Credentials> Get(Vars vars, std::string home) {
    return DefaultCredentialsChain(aws_, Environment::FromMap(std::move(vars), std::move(home)), "us-east-1")
        ->Get();
  }
  std::string KeyId(Vars vars) {
    Result<Credentials> c = Get(std::move(vars), home_.path());
    return c.ok() ? c->access_key_id : "error: " + c.status().ToString();
  }

  testing_util::TempDir home_{"tc_cred_chain"};
  std::shared_ptr<FakeTransport> aws_ = FakeAws(/*with_imds=*/true);
};

TEST_F(ChainTest, SdkOrder) {
  Vars vars = AllSources();
  EXPECT_EQ(KeyId(vars), "FROM-ENV");
  EXPECT_TRUE(aws_->Requests().empty()) << "environment credentials need no network";
  vars.erase("AWS_ACCESS_KEY_ID");
  vars.erase("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(KeyId(vars), "FROM-STS");
  vars.erase("AWS_WEB_IDENTITY_TOKEN_FILE");
  vars.erase("AWS_ROLE_ARN");
  EXPECT_EQ(KeyId(vars), "FROM-PROFILE");
  ASSERT_TRUE(RemoveTree(home_.Sub(".aws")).ok());
  EXPECT_EQ(KeyId(vars), "FROM-CONTAINER");
  vars.erase("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  EXPECT_EQ(KeyId(vars), "FROM-IMDS");
}

TEST_F(ChainTest, AConfiguredSourceThatFailsStopsTheChain) {
  Vars vars = AllSources();
  vars.erase("AWS_SECRET_ACCESS_KEY");
  Result<Credentials> c = Get(vars, home_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("environment"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("AWS_SECRET_ACCESS_KEY"), std::string::npos) << c.status().message();
  EXPECT_TRUE(aws_->Requests().empty()) << "the chain fell through past a misconfigured source";

  // A profile AWS_PROFILE names but nobody defined does not fall through to
  // the container either.
  vars = {{"AWS_PROFILE", "nope"}, {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/x"}};
  c = Get(vars, home_.path());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kNotFound);
  EXPECT_NE(c.status().message().find("shared files"), std::string::npos) << c.status().message();
  EXPECT_TRUE(aws_->Requests().empty());
}

TEST_F(ChainTest, NothingConfiguredNamesEverySourceAndWhatToSet) {
  aws_ = FakeAws(/*with_imds=*/false);
  Result<Credentials> c = Get({}, home_.Sub("empty-home"));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition);
  const std::string& m = c.status().message();
  for (const char* part : {"environment: AWS_ACCESS_KEY_ID", "web identity: AWS_WEB_IDENTITY_TOKEN_FILE",
                           "shared files: no [default]", "container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                           "IMDS: nothing answered at http://169.254.169.254",
                           "Set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"}) {
    EXPECT_NE(m.find(part), std::string::npos) << "'" << part << "' not in: " << m;
  }
  // The IMDS reason keeps the transport's words.
  EXPECT_NE(m.find("Connection timed out"), std::string::npos) << m;
}

TEST_F(ChainTest, ImdsUsesItsOwnTransport) {
  auto main = FakeAws(/*with_imds=*/false);
  auto imds = FakeAws(/*with_imds=*/true);
  ChainOptions options;
  options.imds_transport = imds;
  auto chain = DefaultCredentialsChain(main, Environment::FromMap({}, home_.Sub("empty-home")), "", options);
  Result<Credentials> c = chain->Get();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "FROM-IMDS");
  EXPECT_TRUE(main->Requests().empty());
  EXPECT_EQ(imds->Requests().size(), 3u);
}

TEST_F(ChainTest, TheChainIsCached) {
  Vars vars = AllSources();
  vars.erase("AWS_ACCESS_KEY_ID");
  vars.erase("AWS_SECRET_ACCESS_KEY");
  auto chain = DefaultCredentialsChain(aws_, Environment::FromMap(vars, home_.path()), "us-east-1");
  for (int i = 0; i < 3; ++i) {
    Result<Credentials> c = chain->Get();
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->access_key_id, "FROM-STS");
  }
  EXPECT_EQ(aws_->Requests().size(), 1u);
  EXPECT_EQ(chain->Name(), "default credentials chain");
}

}  // namespace
}  // namespace tierckpt::s3
