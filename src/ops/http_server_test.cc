#include "ops/http_server.h"

#include <gtest/gtest.h>

namespace tierckpt::agent {
namespace {

TEST(AllowListTest, MatchesAddressesAndNetworksOfBothFamilies) {
  Result<AllowList> l = AllowList::Parse({"10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"});
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_TRUE(l->Allows("10.200.3.4"));
  EXPECT_TRUE(l->Allows("192.168.1.7"));
  EXPECT_FALSE(l->Allows("192.168.1.8"));
  EXPECT_TRUE(l->Allows("fd12:3456::1"));
  EXPECT_TRUE(l->Allows("::1"));
  EXPECT_FALSE(l->Allows("127.0.0.1"));
  EXPECT_TRUE(l->Allows("::ffff:10.1.2.3"));  // an IPv4 client of a dual-stack socket
  EXPECT_FALSE(l->Allows("not an address"));
  EXPECT_EQ(l->ToString(), "10.0.0.0/8,192.168.1.7,fd00::/8,::1");
  EXPECT_TRUE(AllowList().Allows("203.0.113.9"));  // empty: any
  Result<AllowList> all = AllowList::Parse({"0.0.0.0/0"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(all->Allows("203.0.113.9"));
}

TEST(AllowListTest, BadEntriesNameThemselves) {
  for (const char* bad : {"10.0.0.0/33", "host.example", "10.0.0.0/x", "::/129", ""}) {
    Result<AllowList> l = AllowList::Parse({bad});
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
    EXPECT_NE(l.status().message().find("allow-list entry \"" + std::string(bad) + "\""), std::string::npos)
        << l.status().ToString();
  }
}

HttpServerOptions Options(AllowList allow = {}) {
  HttpServerOptions o;
  o.flag = "--test-listen";
  o.allow = std::move(allow);
  return o;
}

TEST(HttpServerTest, ServesRoutesAndExplainsWhatItRefuses) {
  HttpServer server(Options());
  server.server().Get(
      "/hello", [](const httplib::Request&, httplib::Response& res) { SetTextResponse(res, 200, "hi"); });
  server.server().Get("/boom",
                      [](const httplib::Request&, httplib::Response&) { throw std::runtime_error("kaput"); });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  httplib::Client c("http://" + server.address());
  auto r = c.Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hi\n");
  r = c.Get("/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(r->body, "no resource at /nothing\n");
  r = c.Get("/boom");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  EXPECT_NE(r->body.find("GET /boom: kaput"), std::string::npos) << r->body;
  server.Stop();
  EXPECT_FALSE(c.Get("/hello"));
}

TEST(HttpServerTest, AClientOutsideTheAllowListGets403NamingItsAddress) {
  Result<AllowList> allow = AllowList::Parse({"10.0.0.0/8"});
  ASSERT_TRUE(allow.ok());
  HttpServer server(Options(std::move(allow).value()));
  bool ran = false;
  server.server().Get("/hello", [&](const httplib::Request&, httplib::Response& res) {
    ran = true;
    SetTextResponse(res, 200, "hi");
  });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  httplib::Client c("http://" + server.address());
  auto r = c.Get("/hello");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403);
  EXPECT_NE(r->body.find("client address 127.0.0.1 is not in the allow-list"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("--test-listen"), std::string::npos);
  EXPECT_FALSE(ran);
}

TEST(HttpServerTest, ATakenPortOrABadAddressIsAClearStartError) {
  HttpServer a(Options());
  ASSERT_TRUE(a.Start("127.0.0.1:0").ok());
  HttpServer b(Options());
  Status s = b.Start(a.address());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot listen on " + a.address() + " (--test-listen)"), std::string::npos)
      << s.ToString();
  HttpServer c(Options());
  s = c.Start("localhost");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--test-listen"), std::string::npos) << s.ToString();
  HttpServer d(Options());  // never started: Stop and the destructor are no-ops
  d.Stop();
}

}  // namespace
}  // namespace tierckpt::agent
