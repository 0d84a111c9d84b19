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

namespace tierckpt::agent {
namespace {

httplib::Request RequestWith(std::initializer_list<std::pair<std::string, std::string>> headers) {
  httplib::Request req;
  for (const auto& [k, v] : headers) req.headers.emplace(k, v);
  return req;
}

// Issue 37 item 11: "Transfer-Encoding: CHUNKED" with a longer Content-Length
// reached the upload route, which read the chunked body, found it short and
// answered 200 with an empty body. The pair is refused before routing, in
// any spelling.
TEST(ScreenRequestTest, RefusesTransferEncodingWithContentLengthInAnySpelling) {
  HttpServerOptions o;
  for (const char* te : {"chunked", "CHUNKED", "Chunked"}) {
    const Refusal r =
        ScreenRequest(RequestWith({{"Host", "127.0.0.1:9200"}, {"Transfer-Encoding", te},
                                   {"Content-Length", "100"}}),
                      o, "node1");
    EXPECT_EQ(r.status, 400) << te;
    EXPECT_NE(r.why.find("both Transfer-Encoding and Content-Length"), std::string::npos) << te << ": " << r.why;
  }
  EXPECT_NE(ScreenRequest(RequestWith({{"Host", "127.0.0.1"}, {"Transfer-Encoding", "gzip, chunked"}}), o,
                          "node1")
                .why.find("not supported"),
            std::string::npos);
  EXPECT_EQ(ScreenRequest(RequestWith({{"Host", "127.0.0.1"}, {"Transfer-Encoding", "CHUNKED"}}), o, "node1").why,
            "");
  EXPECT_EQ(ScreenRequest(RequestWith({{"Host", "127.0.0.1"}, {"Content-Length", "5"}}), o, "node1").why, "");
}

// Issue 37 item 7: a web page in a local browser drove the loopback API (a
// cross-site POST, and a GET under a rebound DNS name as Host).
TEST(ScreenRequestTest, RefusesBrowsersAndForeignHostNames) {
  HttpServerOptions o;
  o.flag = "--http-listen";
  o.hosts = {"svc.example.internal"};
  o.hosts_flag = "--http-host";
  EXPECT_NE(ScreenRequest(RequestWith({{"Host", "127.0.0.1:9200"}, {"Origin", "http://evil.example"}}), o, "n1")
                .why.find("web page"),
            std::string::npos);
  EXPECT_NE(ScreenRequest(RequestWith({{"Host", "localhost"}, {"Sec-Fetch-Site", "same-origin"}}), o, "n1").why, "");
  const std::string rebound = ScreenRequest(RequestWith({{"Host", "evil.example:9200"}}), o, "n1").why;
  EXPECT_NE(rebound.find("evil.example"), std::string::npos) << rebound;
  EXPECT_NE(rebound.find("--http-host"), std::string::npos) << rebound;
  for (const char* host : {"127.0.0.1:9200", "[::1]:9200", "LOCALHOST:9200", "n1", "10.1.2.3", "",
                           "svc.example.internal:9200", "SVC.example.internal"}) {
    EXPECT_EQ(ScreenRequest(RequestWith({{"Host", host}}), o, "n1").why, "") << host;
  }
  o.hosts = {"*"};
  EXPECT_EQ(ScreenRequest(RequestWith({{"Host", "anything.example"}}), o, "n1").why, "");
}

}  // namespace
}  // namespace tierckpt::agent
