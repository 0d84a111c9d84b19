// The agent's metrics: the exposition text, and the HTTP endpoint over real
// loopback TCP. A real Prometheus scrapes a real agent in
// tests/integration/test_operations.py.
#include "ops/metrics.h"

#include <gtest/gtest.h>

#include "ops/metrics_server.h"
#include "ops/recent_errors.h"
#include "peer/tcp_socket.h"

namespace tierckpt::agent {
namespace {

std::string Get(const std::string& address, const std::string& request) {
  auto conn = peer::TcpDial(address, peer::Millis(3000), peer::SocketOptions{});
  EXPECT_TRUE(conn.ok()) << conn.status().ToString();
  if (!conn.ok()) return "";
  peer::ConstBuffer buf{request.data(), request.size()};
  EXPECT_TRUE((*conn)->Write({&buf, 1}, peer::Millis(3000)).ok());
  std::string out;
  char chunk[4096];
  for (;;) {
    size_t got = 0;
    Status s = (*conn)->Read(chunk, sizeof(chunk), peer::Millis(3000), peer::Millis(3000), &got);
    out.append(chunk, got);
    if (!s.ok() || got < sizeof(chunk)) break;
  }
  return out;
}

TEST(MetricsTest, RendersCountersHistogramsAndGaugesInTheTextFormat) {
  Metrics m;
  m.commit.Succeeded(1000, 0.004);
  m.commit.Succeeded(3000, 2.0);
  m.commit.Failed();
  m.CommittedStep("job\"1");
  m.Dropped("retention keeps the newest 3");
  m.Dropped("evicted to make room in the memory budget");
  m.Error("persist");
  const std::string text = m.Render({{"tierckpt_memory_budget_bytes", "budget", {}, 1024},
                                     {"tierckpt_peer_up", "peer", {{"peer", "n2"}}, 1}});
  EXPECT_NE(text.find("# TYPE tierckpt_commit_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_total{result=\"ok\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tierckpt_commit_total{result=\"error\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_bytes_total 4000\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_seconds_bucket{le=\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_seconds_bucket{le=\"2.5\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_steps_committed_total{namespace=\"job\\\"1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_steps_dropped_total{reason=\"retention\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_steps_dropped_total{reason=\"budget\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_errors_total{kind=\"persist\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE tierckpt_memory_budget_bytes gauge\ntierckpt_memory_budget_bytes 1024\n"),
            std::string::npos);
  EXPECT_NE(text.find("tierckpt_peer_up{peer=\"n2\"} 1\n"), std::string::npos);
}

TEST(MetricsTest, TheServerAnswersMetricsHealthAndRefusesTheRest) {
  int scrapes = 0;
  Metrics metrics;  // the server renders the instance it is given
  metrics.persist.Succeeded(5, 0.2);
  MetricsServer server(&metrics, [&] {
    ++scrapes;
    return std::vector<Gauge>{{"tierckpt_memory_budget_bytes", "budget", {}, 77}};
  });
  ASSERT_TRUE(server.Start("127.0.0.1:0").ok());
  const std::string text = Get(server.address(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(text.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << text;
  EXPECT_NE(text.find("Content-Type: text/plain; version=0.0.4"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_memory_budget_bytes 77\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_commit_total{result=\"ok\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("tierckpt_persist_total{result=\"ok\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tierckpt_persist_bytes_total 5\n"), std::string::npos);
  EXPECT_EQ(scrapes, 1);
  EXPECT_NE(Get(server.address(), "GET /healthz HTTP/1.0\r\n\r\n").find("200 OK"), std::string::npos);
  EXPECT_NE(Get(server.address(), "GET /nope HTTP/1.1\r\n\r\n").find("404 Not Found"), std::string::npos);
  EXPECT_NE(Get(server.address(), "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n").find("405"),
            std::string::npos);
  EXPECT_NE(Get(server.address(), "garbage\r\n\r\n").find("400 Bad Request"), std::string::npos);
  // Still serving after the bad ones.
  EXPECT_NE(Get(server.address(), "GET /metrics?x=1 HTTP/1.1\r\n\r\n").find("200 OK"), std::string::npos);
  server.Stop();
  EXPECT_FALSE(peer::TcpDial(server.address(), peer::Millis(500), peer::SocketOptions{}).ok());
}

TEST(MetricsTest, ATakenPortIsAClearStartError) {
  Metrics metrics;
  MetricsServer a(&metrics, [] { return std::vector<Gauge>{}; });
  ASSERT_TRUE(a.Start("127.0.0.1:0").ok());
  MetricsServer b(&metrics, [] { return std::vector<Gauge>{}; });
  Status s = b.Start(a.address());
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--metrics-listen"), std::string::npos) << s.ToString();
}

TEST(MetricsTest, RecentErrorsCountsEachErrorInTheMetricsItWasGiven) {
  Metrics metrics;
  RecentErrors errors(&metrics, /*capacity=*/1);
  errors.Add("persist", Internal("disk gone"));
  errors.Add("persist", Status::Ok());  // not an error: neither kept nor counted
  errors.Add("commit", NotFound("no step"));
  const std::string text = metrics.Render({});
  EXPECT_NE(text.find("tierckpt_errors_total{kind=\"persist\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("tierckpt_errors_total{kind=\"commit\"} 1\n"), std::string::npos) << text;
  ASSERT_EQ(errors.Snapshot().size(), 1u);  // the oldest dropped, still counted
  EXPECT_EQ(errors.Snapshot()[0].event, "commit");
  // Another instance counts nothing of it.
  EXPECT_EQ(Metrics().Render({}).find("tierckpt_errors_total{"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt::agent
