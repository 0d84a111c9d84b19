// metrics_server.cc — see metrics_server.h.
#include "ops/metrics_server.h"

namespace tierckpt::agent {
namespace {

HttpServerOptions MetricsHttpOptions(AllowList allow) {
  HttpServerOptions o;
  o.flag = "--metrics-listen";
  o.allow = std::move(allow);
  o.threads = 2;
  o.keep_alive_requests = 1;
  o.limits.read_timeout = std::chrono::seconds(5);
  o.limits.write_timeout = std::chrono::seconds(5);
  o.limits.header_timeout = std::chrono::seconds(5);
  o.max_waiting = 64;
  o.max_body_bytes = 8192;
  // Scrapers name the node as they know it; nothing here changes state or
  // reads a checkpoint, so any Host is served (browsers are still refused).
  o.hosts = {"*"};
  return o;
}

}  // namespace

MetricsServer::MetricsServer(const Metrics* metrics, std::function<std::vector<Gauge>()> gauges,
                             AllowList allow)
    : metrics_(metrics), gauges_(std::move(gauges)), http_(MetricsHttpOptions(std::move(allow))) {
  httplib::Server& s = http_.server();
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_->Render(gauges_()), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) { SetTextResponse(res, 200, "ok"); });
  auto not_get = [](const httplib::Request& req, httplib::Response& res) {
    SetTextResponse(res, 405, req.method + " " + req.path + " is not served; use GET");
  };
  for (const char* path : {"/metrics", "/healthz"}) {
    s.Post(path, not_get);
    s.Put(path, not_get);
    s.Delete(path, not_get);
    s.Patch(path, not_get);
  }
}

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start(const std::string& address) { return http_.Start(address); }

void MetricsServer::Stop() { http_.Stop(); }

}  // namespace tierckpt::agent
