#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tierckpt/client.h"

namespace tierckpt {

std::string DefaultSocketPath() {
  const char* env = std::getenv("TIERCKPT_SOCKET");
  if (env != nullptr && *env != '\0') return env;
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && *xdg != '\0') return std::string(xdg) + "/tierckpt/agent.sock";
  // Root gets a directory under /run, which only root may write, so no user
  // can claim it first; other users get a per-uid directory in /tmp, which
  // the agent and Connect refuse unless that uid owns it privately.
  const uid_t uid = ::geteuid();
  if (uid == 0) return "/run/tierckpt/agent.sock";
  return "/tmp/tierckpt-" + std::to_string(uid) + "/agent.sock";
}

}  // namespace tierckpt
