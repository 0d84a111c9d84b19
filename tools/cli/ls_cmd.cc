// tierckpt ls [NS]: the steps the agent knows, per tier.
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

struct LsOptions {
  std::string ns;
};

int RunLs(const GlobalOptions& g, const LsOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<std::vector<StepSummary>> steps = client->List(o.ns);
  if (!steps.ok()) return Fail(steps.status().WithContext("listing steps"));
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const StepSummary& s : *steps) {
      arr.push_back({{"namespace", s.ns},
                     {"step", s.step},
                     {"bytes", s.bytes},
                     {"objects", s.objects},
                     {"memory", s.memory},
                     {"durable", s.durable}});
    }
    PrintJson({{"steps", arr}});
    return kExitOk;
  }
  if (steps->empty()) {
    if (o.ns.empty()) {
      std::printf("no steps in any tier (save one with `tierckpt save NS STEP --from DIR`)\n");
    } else {
      std::printf("no steps of namespace %s in any tier\n", o.ns.c_str());
    }
    return kExitOk;
  }
  Table t({"NAMESPACE", "STEP", "SIZE", "OBJECTS", "MEMORY", "DURABLE"}, {false, true, true, true, false, false});
  for (const StepSummary& s : *steps) {
    t.AddRow({s.ns, std::to_string(s.step), HumanSize(s.bytes), std::to_string(s.objects), OrDash(s.memory),
              OrDash(s.durable)});
  }
  t.Print();
  return kExitOk;
}

}  // namespace

void AddLsCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<LsOptions>();
  CLI::App* sub = app.add_subcommand("ls", "list steps with their size and state in each tier");
  sub->add_option("namespace", o->ns, "only this namespace");
  sub->callback([&cli, o] { cli.exit_code = RunLs(cli.global, *o); });
}

}  // namespace tierckpt::cli
