// socket_path.cc — see socket_path.h.
#include "wire/socket_path.h"

#include <unistd.h>

#include <cstdlib>

#include "os/files.h"

namespace tierckpt::wire {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

}  // namespace

std::string DefaultSocketPath() {
  std::string env = Env("TIERCKPT_SOCKET");
  if (!env.empty()) return env;
  std::string xdg = Env("XDG_RUNTIME_DIR");
  if (!xdg.empty()) return JoinPath(JoinPath(xdg, "tierckpt"), "agent.sock");
  const uid_t uid = ::geteuid();
  if (uid == 0) return "/run/tierckpt/agent.sock";
  return "/tmp/tierckpt-" + std::to_string(uid) + "/agent.sock";
}

}  // namespace tierckpt::wire
