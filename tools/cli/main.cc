// tierckpt — the command line of tierckpt: agent control and the steps held
// by the local agent. docs/cli.md documents every command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "cli.h"

int main(int argc, char** argv) {
  using namespace tierckpt::cli;
  Cli cli;
  CLI::App app{"tierckpt — tiered checkpoints: talk to the local node agent (tierckptd)", "tierckpt"};
  app.fallthrough();  // global options are accepted after the subcommand too
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tierckpt ") + TIERCKPT_VERSION);
  app.add_option("--socket", cli.global.socket, "the agent's Unix socket (default: " + tierckpt::DefaultSocketPath() + ")")
      ->envname("TIERCKPT_SOCKET");
  app.add_flag("--json", cli.global.json, "print one JSON document on stdout instead of text");
  app.add_flag("--progress", cli.global.progress, "print progress on stderr even when it is not a terminal");

  AddAgentCommands(app, cli);
  AddLsCommand(app, cli);
  AddShowCommand(app, cli);
  AddVerifyCommand(app, cli);
  AddRestoreCommand(app, cli);
  AddSaveCommand(app, cli);
  AddStepCommands(app, cli);
  AddPruneCommand(app, cli);
  AddSyncCommand(app, cli);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion&) {
    std::printf("tierckpt %s\n", TIERCKPT_VERSION);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    // "tierckpt bogus" fails as a missing subcommand; name the stray word.
    std::vector<std::string> rest = app.remaining();
    std::string what = e.what();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !rest.empty()) {
      what = "unknown command \"" + rest.front() + "\"";
    }
    std::fprintf(stderr, "tierckpt: %s\nRun `tierckpt --help` (or `tierckpt <command> --help`) for usage.\n",
                 what.c_str());
    return kExitUsage;
  }
  return cli.exit_code;
}
