// tierckptd — the tierckpt node agent. Parses the configuration and runs the
// agent until Shutdown or SIGINT/SIGTERM. Exit codes: 0 clean stop, 2 bad
// configuration or environment (agent::ExitCodeFor), 1 other start failures.
#include <cstdio>

#include "agent/agent.h"
#include "common/log.h"

int main(int argc, char** argv) {
  using namespace tierckpt::agent;
  auto cmd = ParseAgentCommandLine(argc, argv);
  if (!cmd.ok()) {
    std::fprintf(stderr, "tierckptd: %s\n", cmd.status().message().c_str());
    return 2;
  }
  if (cmd->exit_now) {
    std::fputs(cmd->text.c_str(), stdout);
    return 0;
  }
  Agent agent(std::move(cmd->config));
  if (tierckpt::Status st = agent.Start(/*handle_signals=*/true); !st.ok()) {
    if (!agent.config().log_file.empty()) tierckpt::Log(tierckpt::LogLevel::kError, "start failed").Err(st);
    std::fprintf(stderr, "tierckptd: %s\n", st.message().c_str());
    return ExitCodeFor(st);
  }
  agent.Run();
  return 0;
}
