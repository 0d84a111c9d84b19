// Tests of the parsers the credential sources share: ISO 8601 times, URLs,
// JSON credentials, the AWS INI dialect.
#include <gtest/gtest.h>

#include "s3/credentials_providers.h"
#include "s3/ini.h"

namespace tierckpt::s3 {
namespace {

int64_t UnixSeconds(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

TEST(ParseIso8601Test, KnownInstants) {
  // date -u -d 2024-05-01T12:34:56Z +%s
  Result<Clock::time_point> t = ParseIso8601("2024-05-01T12:34:56Z");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(UnixSeconds(*t), 1714566896);
  EXPECT_EQ(UnixSeconds(*ParseIso8601("1970-01-01T00:00:00Z")), 0);
  EXPECT_EQ(UnixSeconds(*ParseIso8601("2000-02-29T23:59:59Z")), 951868799);
  EXPECT_EQ(UnixSeconds(*ParseIso8601("2024-05-01T14:34:56+02:00")), 1714566896);
  EXPECT_EQ(UnixSeconds(*ParseIso8601("2024-05-01T10:04:56-02:30")), 1714566896);
  Result<Clock::time_point> frac = ParseIso8601("2024-05-01T12:34:56.750Z");
  ASSERT_TRUE(frac.ok());
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(frac->time_since_epoch()).count(),
            1714566896750);
}

TEST(ParseIso8601Test, RejectsMalformed) {
  for (const char* bad : {"", "2024-05-01", "2024-05-01T12:34:56", "2024-13-01T00:00:00Z",
                          "2024-05-01T24:00:00Z", "2024-05-01T12:34:56.Z", "2024-05-01T12:34:56+0200",
                          "2024/05/01T12:34:56Z", "2024-05-01T12:34:56Zjunk", "1714566896"}) {
    Result<Clock::time_point> t = ParseIso8601(bad);
    EXPECT_EQ(t.status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST(ParseHttpUrlTest, SplitsEndpointPathAndQuery) {
  Result<HttpUrl> u = ParseHttpUrl("HTTP://LocalHost:8080/v2/credentials/abc?x=1&y=a%2Fb&flag#frag");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "http");
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->endpoint, "http://LocalHost:8080");
  EXPECT_EQ(u->path, "/v2/credentials/abc");
  ASSERT_EQ(u->query.size(), 3u);
  EXPECT_EQ(u->query[1], (std::pair<std::string, std::string>("y", "a/b")));
  EXPECT_EQ(u->query[2], (std::pair<std::string, std::string>("flag", "")));

  Result<HttpUrl> v6 = ParseHttpUrl("http://[FD00:EC2::23]:80");
  ASSERT_TRUE(v6.ok()) << v6.status().ToString();
  EXPECT_EQ(v6->host, "[fd00:ec2::23]");
  EXPECT_EQ(v6->path, "/");
  EXPECT_EQ(ParseHttpUrl("https://sts.us-east-1.amazonaws.com")->endpoint,
            "https://sts.us-east-1.amazonaws.com");
}

TEST(ParseHttpUrlTest, RejectsBadUrls) {
  for (const char* bad : {"", "localhost:80/x", "ftp://host/", "http://", "http:///path", "http://u:p@host/",
                          "http://host:port/", "http://host:/", "http://[::1/", "http://[::1]x/",
                          "http://a b/", "http://h/?a=%zz"}) {
    Result<HttpUrl> u = ParseHttpUrl(bad);
    EXPECT_EQ(u.status().code(), Code::kInvalidArgument) << bad;
  }
  // The message names the URL and the accepted form.
  Status s = ParseHttpUrl("ftp://host/").status();
  EXPECT_NE(s.message().find("ftp://host/"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("https://"), std::string::npos) << s.message();
}

TEST(CredentialsHelpersTest, SnippetTrimAndHome) {
  EXPECT_EQ(BodySnippet(std::string("a\nb\x01", 4)), "a b\\x01");
  EXPECT_EQ(BodySnippet(std::string(300, 'x')).size(), 203u);
  EXPECT_EQ(TrimAscii(" \t token\r\n"), "token");
  EXPECT_EQ(ExpandHome("~/.aws/config", "/home/u"), "/home/u/.aws/config");
  EXPECT_EQ(ExpandHome("~", "/home/u"), "/home/u");
  EXPECT_EQ(ExpandHome("~bob/x", "/home/u"), "~bob/x");
  EXPECT_EQ(ExpandHome("/etc/aws", "/home/u"), "/etc/aws");
  EXPECT_EQ(ExpandHome("~/x", ""), "~/x");
}

TEST(ParseJsonCredentialsTest, FieldsAndErrors) {
  Result<Credentials> c = ParseJsonCredentials(
      R"({"AccessKeyId":"AKID","SecretAccessKey":"SECRET","Token":"TOK","Expiration":"2024-05-01T12:34:56Z"})",
      "test endpoint", "container");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->access_key_id, "AKID");
  EXPECT_EQ(c->secret_access_key, "SECRET");
  EXPECT_EQ(c->session_token, "TOK");
  ASSERT_TRUE(c->expiration.has_value());
  EXPECT_EQ(UnixSeconds(*c->expiration), 1714566896);
  EXPECT_EQ(c->source, "container");

  Result<Credentials> no_expiry =
      ParseJsonCredentials(R"({"AccessKeyId":"A","SecretAccessKey":"S"})", "e", "x");
  ASSERT_TRUE(no_expiry.ok());
  EXPECT_FALSE(no_expiry->expiration.has_value());

  for (const char* bad :
       {"", "not json", "[1]", R"({"SecretAccessKey":"S"})", R"({"AccessKeyId":"A"})",
        R"({"AccessKeyId":5,"SecretAccessKey":"S"})", R"({"AccessKeyId":"","SecretAccessKey":"S"})",
        R"({"AccessKeyId":"A","SecretAccessKey":"S","Expiration":"tomorrow"})"}) {
    Result<Credentials> r = ParseJsonCredentials(bad, "test endpoint", "x");
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("test endpoint"), std::string::npos) << r.status().message();
  }
}

TEST(ParseIniTest, SectionsKeysCommentsAndSubKeys) {
  Result<IniFile> ini = ParseIni(
      "# comment\n"
      "; another\n"
      "[default]\r\n"
      "Aws_Access_Key_Id = AKID\n"
      "aws_secret_access_key=se#cret=\n"
      "\n"
      "[profile   dev]   # trailing comment\n"
      "region = eu-west-1\n"
      "s3 =\n"
      "  addressing_style = path\n"
      "  max_concurrent_requests = 20\n"
      "note = first\n"
      "  second\n"
      "[default]\n"
      "region = us-west-2\n",
      "/x/config");
  ASSERT_TRUE(ini.ok()) << ini.status().ToString();
  const IniSection* def = ini->Find("default");
  ASSERT_NE(def, nullptr);
  EXPECT_EQ(def->at("aws_access_key_id"), "AKID");
  EXPECT_EQ(def->at("aws_secret_access_key"), "se#cret=");
  EXPECT_EQ(def->at("region"), "us-west-2");  // repeated sections merge
  const IniSection* dev = ini->Find("profile dev");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->at("region"), "eu-west-1");
  EXPECT_EQ(dev->at("s3"), "");
  EXPECT_EQ(dev->at("s3.addressing_style"), "path");
  EXPECT_EQ(dev->at("s3.max_concurrent_requests"), "20");
  EXPECT_EQ(dev->at("note"), "first\nsecond");
  EXPECT_EQ(ini->Find("profile"), nullptr);
}

TEST(ParseIniTest, ErrorsNameFileAndLineButNotTheText) {
  struct Case {
    const char* text;
    int line;
  };
  for (const Case& c :
       {Case{"key = value\n", 1}, Case{"[default]\nAKIDSECRETLINE\n", 2}, Case{"[default\n", 1},
        Case{"[]\n", 1}, Case{"[a]\n= v\n", 2}, Case{"[a] junk\n", 1}}) {
    Result<IniFile> ini = ParseIni(c.text, "/home/u/.aws/credentials");
    ASSERT_FALSE(ini.ok()) << c.text;
    EXPECT_EQ(ini.status().code(), Code::kInvalidArgument);
    EXPECT_NE(ini.status().message().find("/home/u/.aws/credentials:" + std::to_string(c.line) + ":"),
              std::string::npos)
        << ini.status().message();
    EXPECT_EQ(ini.status().message().find("AKIDSECRETLINE"), std::string::npos) << ini.status().message();
  }
}

}  // namespace
}  // namespace tierckpt::s3
