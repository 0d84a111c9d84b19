// cli.h — what every `tierckpt` subcommand shares: global options, exit
// codes, error reporting and connecting to the agent.
//
// Each subcommand lives in its own file and registers itself with an
// Add*Command(app, cli) function declared here; its callback stores the
// process exit code in cli.exit_code. Single-threaded except where a command
// starts copy threads itself.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <string_view>

#include "tierckpt/client.h"
#include "tierckpt/status.h"

namespace tierckpt::cli {

// Exit codes (docs/cli.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // includes a verify mismatch
inline constexpr int kExitUsage = 2;    // bad command line
inline constexpr int kExitNoAgent = 3;  // no agent answers on the socket

struct GlobalOptions {
  std::string socket;  // --socket / TIERCKPT_SOCKET; "" = DefaultSocketPath()
  bool json = false;   // one JSON document on stdout instead of text
  bool progress = false;  // progress lines on stderr even when it is not a TTY
};

struct Cli {
  GlobalOptions global;
  int exit_code = kExitOk;
};

// The socket the commands use.
std::string SocketPath(const GlobalOptions& g);
std::string ClientName();

// Connects; on failure prints the reason (with what to do) and sets *exit_code
// to kExitNoAgent for an unreachable agent or kExitFailure otherwise.
std::unique_ptr<Client> ConnectOrReport(const GlobalOptions& g, int* exit_code);

// Fails with a connect error to the agent at socket: as it is when its
// message already names the socket (a refusal, an untrusted agent, a path
// that is no socket), otherwise with `context` in front; returns
// kExitFailure.
int FailConnect(const Status& status, const std::string& socket, const std::string& context);

// Prints "tierckpt: <message>" (the Status' message, with its code name for
// codes whose meaning is not obvious from the text) to stderr; returns
// kExitFailure.
int Fail(const Status& status);
int Fail(std::string_view message);

void AddAgentCommands(CLI::App& app, Cli& cli);   // agent_cmd.cc, agent_start.cc
void AddLsCommand(CLI::App& app, Cli& cli);       // ls_cmd.cc
void AddShowCommand(CLI::App& app, Cli& cli);     // show_cmd.cc
void AddVerifyCommand(CLI::App& app, Cli& cli);   // verify_cmd.cc
void AddRestoreCommand(CLI::App& app, Cli& cli);  // restore_cmd.cc
void AddSaveCommand(CLI::App& app, Cli& cli);     // save_cmd.cc
void AddStepCommands(CLI::App& app, Cli& cli);    // step_cmd.cc: persist, rm
void AddPruneCommand(CLI::App& app, Cli& cli);    // prune_cmd.cc
void AddSyncCommand(CLI::App& app, Cli& cli);     // sync_cmd.cc

// Adds the required positional "step" argument: decimal only, leading zeros
// allowed, at most kMaxStep (common/names.h ParseStep); anything else is a
// usage error quoting what was typed (step_arg.cc).
CLI::Option* AddStepArgument(CLI::App* command, uint64_t* step);
// A transform for every other integer option: digits only, leading zeros
// stripped, so that no option reads "010" as octal or "0x10" as hex.
CLI::Validator DecimalOnly();

// Registered by agent_start.cc, used by AddAgentCommands.
void AddAgentStartCommand(CLI::App& agent, Cli& cli);

}  // namespace tierckpt::cli
