#include "cli.h"

#include <cstdio>
#include <string>

#ifndef TIERCKPT_VERSION
#define TIERCKPT_VERSION "unknown"
#endif

namespace tierckpt::cli {

std::string SocketPath(const GlobalOptions& g) { return g.socket.empty() ? DefaultSocketPath() : g.socket; }

std::string ClientName() { return std::string("tierckpt-cli ") + TIERCKPT_VERSION; }

std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& g, int* exit_code) {
  ClientOptions options;
  options.socket_path = SocketPath(g);
  options.client_name = ClientName();
  options.writer_id = ClientOptions::RandomWriterId();  // each command is a writer of its own
  Result<std::unique_ptr<Client>> c = Client::Connect(options);
  if (c.ok()) return std::move(c).value();
  if (c.status().code() == Code::kUnavailable || c.status().code() == Code::kNotFound) {
    // The reason only; the hint below says what to do.
    const std::string reason = c.status().message().substr(0, c.status().message().find(';'));
    std::fprintf(stderr,
                 "tierckpt: no tierckptd answers on %s: start one with `tierckpt agent start` or set "
                 "TIERCKPT_SOCKET (or --socket) to the socket of a running agent\n  (%s)\n",
                 options.socket_path.c_str(), reason.c_str());
    *exit_code = kExitNoAgent;
  } else {
    *exit_code = FailConnect(c.status(), options.socket_path, "connecting to tierckptd at " + options.socket_path);
  }
  return nullptr;
}

int FailConnect(const Status& status, const std::string& socket, const std::string& context) {
  // A refusal, a timeout, an untrusted agent or a path that is no socket:
  // the message names the socket and the cause (the agent's own words for a
  // refusal).
  if (status.message().find(socket) != std::string::npos) return Fail(status);
  return Fail(status.WithContext(context));
}

int Fail(const Status& status) {
  const std::string& m = status.message();
  std::fprintf(stderr, "tierckpt: %s\n", m.empty() ? status.ToString().c_str() : m.c_str());
  return kExitFailure;
}

int Fail(std::string_view message) {
  std::fprintf(stderr, "tierckpt: %.*s\n", static_cast<int>(message.size()), message.data());
  return kExitFailure;
}

}  // namespace tierckpt::cli
