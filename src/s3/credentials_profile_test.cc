// Tests of the shared-files source (~/.aws/credentials, ~/.aws/config,
// AWS_PROFILE) and ProfileRegion(), against files in a temporary home.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "os/files.h"
#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"
#include "testing/temp_dir.h"

namespace tierckpt::s3 {
namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

class ProfileSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(MakeDirs(home_.Sub(".aws")).ok()); }

  void Write(const std::string& path, std::string_view text) {
    ASSERT_TRUE(WriteFileAtomic(path, text, /*durable=*/false).ok()) << path;
  }
  void WriteCredentials(std::string_view text) { Write(home_.Sub(".aws/credentials"), text); }
  void WriteConfig(std::string_view text) { Write(home_.Sub(".aws/config"), text); }

  Result<std::optional<Credentials>> Fetch(Vars vars = {}) {
    why_not_.clear();
    return MakeProfileSource(Environment::FromMap(std::move(vars), home_.path()))->Fetch(&why_not_);
  }

  testing_util::TempDir home_{"tc_cred_profile"};
  std::string why_not_;
};

TEST_F(ProfileSourceTest, DefaultProfileFromCredentialsFile) {
  WriteCredentials(
      "[default]\naws_access_key_id = AKID\naws_secret_access_key = SECRET\n"
      "aws_session_token = TOK\n[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  auto r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->access_key_id, "AKID");
  EXPECT_EQ((*r)->secret_access_key, "SECRET");
  EXPECT_EQ((*r)->session_token, "TOK");
  EXPECT_FALSE((*r)->expiration.has_value());
  EXPECT_NE((*r)->source.find("profile 'default'"), std::string::npos) << (*r)->source;
  EXPECT_NE((*r)->source.find(home_.Sub(".aws/credentials")), std::string::npos) << (*r)->source;
}

TEST_F(ProfileSourceTest, AwsProfileSelectsSectionsInBothFiles) {
  WriteCredentials("[default]\naws_access_key_id = D\naws_secret_access_key = D\n");
  WriteConfig(
      "[default]\nregion = us-west-2\n[profile dev]\nregion = eu-west-1\n"
      "aws_access_key_id = DEV\naws_secret_access_key = DEVSECRET\n");
  auto r = Fetch({{"AWS_PROFILE", "dev"}});
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->access_key_id, "DEV");
  EXPECT_NE((*r)->source.find(home_.Sub(".aws/config")), std::string::npos) << (*r)->source;

  // The credentials file wins over the config file for the same profile.
  WriteCredentials("[dev]\naws_access_key_id = CREDFILE\naws_secret_access_key = S\n");
  r = Fetch({{"AWS_PROFILE", "dev"}});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->access_key_id, "CREDFILE");
}

TEST_F(ProfileSourceTest, FileLocationOverridesExpandHome) {
  Write(home_.Sub("creds.ini"), "[ci]\naws_access_key_id = CI\naws_secret_access_key = S\n");
  Write(home_.Sub("conf.ini"), "[profile ci]\nregion = ap-south-1\n");
  Environment env = Environment::FromMap({{"AWS_PROFILE", "ci"},
                                          {"AWS_SHARED_CREDENTIALS_FILE", "~/creds.ini"},
                                          {"AWS_CONFIG_FILE", home_.Sub("conf.ini")}},
                                         home_.path());
  std::string why;
  auto r = MakeProfileSource(env)->Fetch(&why);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->access_key_id, "CI");
  EXPECT_EQ(ProfileRegion(env), "ap-south-1");
}

TEST_F(ProfileSourceTest, NoFilesOrNoDefaultProfileIsNotSelected) {
  auto r = Fetch();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("[default]"), std::string::npos) << why_not_;

  WriteCredentials("[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  r = Fetch();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());

  // A default profile holding only settings (the usual EC2 ~/.aws/config)
  // lets the chain go on to container and IMDS credentials.
  WriteConfig("[default]\nregion = us-east-2\n");
  r = Fetch();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why_not_.find("no aws_access_key_id"), std::string::npos) << why_not_;

  // No home directory and no overrides: nothing to read.
  std::string why;
  r = MakeProfileSource(Environment::FromMap({}, ""))->Fetch(&why);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST_F(ProfileSourceTest, MissingNamedProfileIsAnError) {
  WriteCredentials("[default]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  auto r = Fetch({{"AWS_PROFILE", "prod"}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("AWS_PROFILE"), std::string::npos) << m;
  EXPECT_NE(m.find("'prod'"), std::string::npos) << m;
  EXPECT_NE(m.find("[profile prod]"), std::string::npos) << m;
  EXPECT_NE(m.find(home_.Sub(".aws/credentials")), std::string::npos) << m;
}

TEST_F(ProfileSourceTest, HalfAKeyPairIsAnError) {
  WriteCredentials("[default]\naws_access_key_id = AKID\n");
  auto r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no aws_secret_access_key"), std::string::npos) << r.status().message();
}

TEST_F(ProfileSourceTest, UnsupportedProfileKindsSayWhatToUseInstead) {
  for (const char* kind :
       {"role_arn = arn:aws:iam::1:role/r\nsource_profile = base", "credential_process = /bin/x",
        "sso_session = corp\nsso_account_id = 1\nsso_role_name = r"}) {
    WriteConfig(std::string("[profile assumed]\n") + kind + "\n");
    auto r = Fetch({{"AWS_PROFILE", "assumed"}});
    ASSERT_FALSE(r.ok()) << kind;
    EXPECT_EQ(r.status().code(), Code::kUnimplemented);
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("'assumed'"), std::string::npos) << m;
    EXPECT_NE(m.find(home_.Sub(".aws/config")), std::string::npos) << m;
    const std::string key = std::string(kind).substr(0, std::string(kind).find(' '));
    EXPECT_NE(m.find(key), std::string::npos) << m;
    EXPECT_NE(m.find("AWS_ACCESS_KEY_ID"), std::string::npos) << m;
    EXPECT_NE(m.find("AWS_WEB_IDENTITY_TOKEN_FILE"), std::string::npos) << m;
  }
  // Static keys next to role_arn are used (the profile also works for us).
  WriteConfig(
      "[profile assumed]\nrole_arn = arn:aws:iam::1:role/r\naws_access_key_id = K\naws_secret_access_key = "
      "S\n");
  auto r = Fetch({{"AWS_PROFILE", "assumed"}});
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->access_key_id, "K");
}

TEST_F(ProfileSourceTest, UnreadableOrMalformedFilesAreErrorsNamingThePath) {
  WriteCredentials("[default]\nthis line is broken\n");
  auto r = Fetch();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(home_.Sub(".aws/credentials") + ":2:"), std::string::npos)
      << r.status().message();

  if (::geteuid() != 0) {  // root reads anything
    WriteCredentials("[default]\naws_access_key_id = X\naws_secret_access_key = Y\n");
    ASSERT_EQ(::chmod(home_.Sub(".aws/credentials").c_str(), 0), 0);
    r = Fetch();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("cannot read " + home_.Sub(".aws/credentials")), std::string::npos)
        << r.status().message();
  }
}

TEST_F(ProfileSourceTest, ProfileRegion) {
  Environment env = Environment::FromMap({}, home_.path());
  EXPECT_EQ(ProfileRegion(env), std::nullopt);
  WriteConfig("[default]\nregion = us-west-2\n[profile dev]\nregion = eu-central-1\n[profile bare]\n");
  EXPECT_EQ(ProfileRegion(env), "us-west-2");
  EXPECT_EQ(ProfileRegion(Environment::FromMap({{"AWS_PROFILE", "dev"}}, home_.path())), "eu-central-1");
  EXPECT_EQ(ProfileRegion(Environment::FromMap({{"AWS_PROFILE", "bare"}}, home_.path())), std::nullopt);
  EXPECT_EQ(ProfileRegion(Environment::FromMap({{"AWS_PROFILE", "nope"}}, home_.path())), std::nullopt);
  WriteConfig("garbage\n");
  EXPECT_EQ(ProfileRegion(env), std::nullopt);
}

}  // namespace
}  // namespace tierckpt::s3
