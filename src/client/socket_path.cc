// socket_path.cc — the public DefaultSocketPath (tierckpt/client.h): the
// rule the agent uses too, in wire/socket_path.h.
#include "wire/socket_path.h"

#include <string>

#include "tierckpt/client.h"

namespace tierckpt {

std::string DefaultSocketPath() { return wire::DefaultSocketPath(); }

}  // namespace tierckpt
