// tierckpt show NS STEP: a step's manifest.
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

struct ShowOptions {
  std::string ns;
  uint64_t step = 0;
};

int RunShow(const GlobalOptions& g, const ShowOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<Manifest> m = client->Show(o.ns, o.step);
  if (!m.ok()) return Fail(m.status().WithContext("showing " + o.ns + "/" + std::to_string(o.step)));
  // The tier states come from the listing (Show returns the manifest only).
  std::string memory, durable;
  Result<std::vector<StepSummary>> steps = client->List(o.ns);
  if (steps.ok()) {
    for (const StepSummary& s : *steps) {
      if (s.step == o.step) {
        memory = s.memory;
        durable = s.durable;
      }
    }
  }
  if (g.json) {
    nlohmann::json manifest = ParseJson(m->ToJson());
    PrintJson({{"manifest", manifest}, {"memory", memory}, {"durable", durable}});
    return kExitOk;
  }
  std::printf("namespace   %s\n", m->ns.c_str());
  std::printf("step        %llu\n", static_cast<unsigned long long>(m->step));
  std::printf("created     %s\n", FormatUnixMs(m->created_unix_ms).c_str());
  std::printf("node        %s\n", OrDash(m->node).c_str());
  std::printf("world size  %s\n", m->world_size == 0 ? "-" : std::to_string(m->world_size).c_str());
  std::printf("size        %s (%llu bytes) in %zu objects\n", HumanSize(m->TotalBytes()).c_str(),
              static_cast<unsigned long long>(m->TotalBytes()), m->objects.size());
  std::printf("memory      %s\n", OrDash(memory).c_str());
  std::printf("durable     %s\n\n", OrDash(durable).c_str());
  Table t({"NAME", "SIZE", "CHECKSUM", "NODE"}, {false, true, false, false});
  for (const ObjectEntry& e : m->objects) t.AddRow({e.name, HumanSize(e.size), e.checksum, OrDash(e.node)});
  t.Print();
  return kExitOk;
}

}  // namespace

void AddShowCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<ShowOptions>();
  CLI::App* sub = app.add_subcommand("show", "print a step's manifest: its objects, sizes and checksums");
  sub->add_option("namespace", o->ns, "namespace")->required();
  AddStepArgument(sub, &o->step);
  sub->callback([&cli, o] { cli.exit_code = RunShow(cli.global, *o); });
}

}  // namespace tierckpt::cli
