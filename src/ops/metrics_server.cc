// metrics_server.cc — see metrics_server.h.
#include "ops/metrics_server.h"

#include "common/log.h"
#include "peer/tcp_socket.h"

namespace tierckpt::agent {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr peer::Millis kRequestTimeout{5000};

void Respond(peer::ByteChannel* conn, int code, std::string_view reason, std::string_view type,
             const std::string& body) {
  std::string head = "HTTP/1.1 " + std::to_string(code) + " " + std::string(reason) + "\r\nContent-Type: " +
                     std::string(type) + "\r\nContent-Length: " + std::to_string(body.size()) +
                     "\r\nConnection: close\r\n\r\n";
  peer::ConstBuffer bufs[2] = {{head.data(), head.size()}, {body.data(), body.size()}};
  conn->Write(bufs, kRequestTimeout).IgnoreError();  // a scraper that left gets nothing
}

}  // namespace

MetricsServer::~MetricsServer() { Stop(); }

Status MetricsServer::Start(const std::string& address) {
  Result<std::unique_ptr<peer::ChannelAcceptor>> a = peer::TcpBind(address, peer::SocketOptions{});
  if (!a.ok()) return a.status().WithContext("serving metrics at " + address + " (--metrics-listen)");
  acceptor_ = std::move(a).value();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

std::string MetricsServer::address() const { return acceptor_ != nullptr ? acceptor_->address() : ""; }

void MetricsServer::Stop() {
  if (acceptor_ != nullptr) acceptor_->Shutdown();
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::Loop() {
  for (;;) {
    Result<std::unique_ptr<peer::ByteChannel>> c = acceptor_->Accept();
    if (!c.ok()) {
      if (c.status().code() == Code::kAborted) return;
      Log(LogLevel::kWarn, "metrics_accept_failed").Err(c.status());
      continue;
    }
    Answer(c->get());
    (*c)->Shutdown();
  }
}

void MetricsServer::Answer(peer::ByteChannel* conn) {
  std::string request;
  while (request.size() < kMaxRequest && request.find("\r\n\r\n") == std::string::npos) {
    char ch = 0;
    size_t got = 0;
    Status s = conn->Read(&ch, 1, kRequestTimeout, kRequestTimeout, &got);
    if (!s.ok() || got == 0) return;
    request += ch;
  }
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (line_end == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0) {
    Respond(conn, 400, "Bad Request", "text/plain", "tierckptd serves GET /metrics and GET /healthz\n");
    return;
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (size_t q = path.find('?'); q != std::string::npos) path.resize(q);
  if (method != "GET" && method != "HEAD") {
    Respond(conn, 405, "Method Not Allowed", "text/plain", "use GET\n");
    return;
  }
  if (path == "/metrics") {
    Respond(conn, 200, "OK", "text/plain; version=0.0.4; charset=utf-8", metrics_->Render(gauges_()));
  } else if (path == "/healthz") {
    Respond(conn, 200, "OK", "text/plain", "ok\n");
  } else {
    Respond(conn, 404, "Not Found", "text/plain", "tierckptd serves /metrics and /healthz, not " + path + "\n");
  }
}

}  // namespace tierckpt::agent
