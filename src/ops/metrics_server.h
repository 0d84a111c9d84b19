// metrics_server.h — the agent's HTTP endpoint for Prometheus (--metrics-listen):
//
//   GET /metrics   the exposition of ops/metrics.h, text format 0.0.4
//   GET /healthz   "ok" while the agent serves (Kubernetes readiness probe)
//
// Anything else is 404 (unknown path), 405 (not GET) or 400 (not HTTP); a
// request must arrive within 5 s and 8 KiB. One connection at a time,
// answered and closed (Connection: close): a scraper every few seconds is the
// load this is for. Off by default; loopback is the documented choice
// (docs/operations.md), since the series name namespaces.
//
// Thread-safe; Stop() (or the destructor) closes the listener and joins.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ops/metrics.h"
#include "peer/byte_channel.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

class MetricsServer {
 public:
  // metrics: what is rendered (must outlive this); gauges: read at each
  // scrape (the agent's tier, queues and peers).
  MetricsServer(const Metrics* metrics, std::function<std::vector<Gauge>()> gauges)
      : metrics_(metrics), gauges_(std::move(gauges)) {}
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds address ("127.0.0.1:9464"; port 0 picks one). Errors name it.
  Status Start(const std::string& address);
  std::string address() const;
  void Stop();

 private:
  void Loop();
  void Answer(peer::ByteChannel* conn);

  const Metrics* const metrics_;
  std::function<std::vector<Gauge>()> gauges_;
  std::unique_ptr<peer::ChannelAcceptor> acceptor_;
  std::thread thread_;
};

}  // namespace tierckpt::agent
