// agent_common.h — facts about a running agent shared by the agent
// subcommands (taken from its Stats document; docs/protocol.md).
#pragma once

#include <cstdint>
#include <string>

#include "tierckpt/client.h"

namespace tierckpt::cli {

struct AgentFacts {
  int64_t pid = 0;  // 0 when the agent did not say
  std::string version;
  std::string root;
};

// Best effort: missing fields stay empty.
AgentFacts ReadAgentFacts(Client& client);

}  // namespace tierckpt::cli
