// Tests of Environment, the environment source and StaticCredentials.
#include <gtest/gtest.h>

#include <cstdlib>

#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

TEST(EnvironmentTest, FromMapTreatsEmptyAsUnset) {
  Environment env = Environment::FromMap({{"A", "1"}, {"EMPTY", ""}}, "/home/u");
  EXPECT_EQ(env.Get("A"), "1");
  EXPECT_EQ(env.Get("EMPTY"), std::nullopt);
  EXPECT_EQ(env.Get("MISSING"), std::nullopt);
  EXPECT_EQ(env.home, "/home/u");
  Environment copy = env;  // copies share the variables safely
  EXPECT_EQ(copy.Get("A"), "1");
  Environment none;
  EXPECT_EQ(none.Get("A"), std::nullopt);
}

TEST(EnvironmentTest, ProcessReadsGetenvAndHome) {
  Environment env = Environment::Process();
  const char* path = std::getenv("PATH");
  if (path != nullptr && path[0] != '\0') {
    EXPECT_EQ(env.Get("PATH"), std::string(path));
  }
  EXPECT_EQ(env.Get("TIERCKPT_SURELY_UNSET_VARIABLE_42"), std::nullopt);
  EXPECT_FALSE(env.home.empty());
}

Result<std::optional<Credentials>> FetchEnv(std::map<std::string, std::string, std::less<>> vars,
                                            std::string* why_not) {
  return MakeEnvironmentSource(Environment::FromMap(std::move(vars), "/nonexistent"))->Fetch(why_not);
}

TEST(EnvironmentSourceTest, KeysAndOptionalToken) {
  std::string why;
  auto r = FetchEnv({{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "SECRET"}}, &why);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->access_key_id, "AKID");
  EXPECT_EQ((*r)->secret_access_key, "SECRET");
  EXPECT_EQ((*r)->session_token, "");
  EXPECT_FALSE((*r)->expiration.has_value());
  EXPECT_EQ((*r)->source, "environment");

  r = FetchEnv(
      {{"AWS_ACCESS_KEY_ID", "AKID"}, {"AWS_SECRET_ACCESS_KEY", "SECRET"}, {"AWS_SESSION_TOKEN", "TOK\n"}},
      &why);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->session_token, "TOK");
}

TEST(EnvironmentSourceTest, NotSelectedWhenUnset) {
  std::string why;
  auto r = FetchEnv({{"AWS_SESSION_TOKEN", "TOK"}, {"AWS_ACCESS_KEY_ID", ""}}, &why);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_NE(why.find("AWS_ACCESS_KEY_ID"), std::string::npos) << why;
}

TEST(EnvironmentSourceTest, HalfConfiguredIsAnErrorNamingTheMissingVariable) {
  std::string why;
  auto r = FetchEnv({{"AWS_ACCESS_KEY_ID", "AKID"}}, &why);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("AWS_SECRET_ACCESS_KEY is not"), std::string::npos)
      << r.status().message();

  r = FetchEnv({{"AWS_SECRET_ACCESS_KEY", "SECRET"}}, &why);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("AWS_ACCESS_KEY_ID is not"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find("SECRET "), std::string::npos)
      << "secret leaked: " << r.status().message();
}

TEST(StaticCredentialsTest, ReturnsWhatItWasGiven) {
  Credentials given;
  given.access_key_id = "AKID";
  given.secret_access_key = "SECRET";
  given.session_token = "TOK";
  auto provider = StaticCredentials(given);
  EXPECT_EQ(provider->Name(), "static");
  Result<Credentials> c = provider->Get();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, "SECRET");
  EXPECT_EQ(c->session_token, "TOK");
  EXPECT_EQ(c->source, "static");

  given.source = "s3 url";
  EXPECT_EQ(StaticCredentials(given)->Name(), "s3 url");
}

TEST(StaticCredentialsTest, EmptyKeysAreAnError) {
  Credentials no_secret;
  no_secret.access_key_id = "AKID";
  Result<Credentials> c = StaticCredentials(no_secret)->Get();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("secret access key"), std::string::npos) << c.status().message();
  EXPECT_FALSE(StaticCredentials(Credentials{})->Get().ok());
}

}  // namespace
}  // namespace tierckpt::s3
