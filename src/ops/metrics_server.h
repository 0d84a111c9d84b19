// metrics_server.h — the agent's HTTP endpoint for Prometheus (--metrics-listen):
//
//   GET /metrics   the exposition of ops/metrics.h, text format 0.0.4
//   GET /healthz   "ok" while the agent serves (Kubernetes readiness probe)
//
// Anything else is 404 (unknown path), 405 (not GET or HEAD) or 400 (not
// HTTP), each with a line saying so. Served by the agent's one HTTP server
// (ops/http_server.h) on two threads, each connection closed after its answer:
// a scraper every few seconds is the load this is for. Off by default;
// loopback is the documented choice (docs/operations.md), since the series
// name namespaces.
//
// Thread-safe; Stop() (or the destructor) closes the listener and joins.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/http_server.h"
#include "ops/metrics.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class MetricsServer {
 public:
  // metrics: what is rendered (must outlive this); gauges: read at each
  // scrape (the agent's tier, queues and peers); allow: the client networks
  // (empty: any).
  MetricsServer(const Metrics* metrics, std::function<std::vector<Gauge>()> gauges, AllowList allow = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds address ("127.0.0.1:9464"; port 0 picks one). Errors name it.
  Status Start(const std::string& address);
  std::string address() const { return http_.address(); }
  void Stop();

 private:
  const Metrics* const metrics_;
  std::function<std::vector<Gauge>()> gauges_;
  HttpServer http_;
};

}  // namespace tierckpt::agent
