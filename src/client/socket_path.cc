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
  return "/tmp/tierckpt-" + std::to_string(::getuid()) + "/agent.sock";
}

}  // namespace tierckpt
