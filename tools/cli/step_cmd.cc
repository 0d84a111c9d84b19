// tierckpt persist NS STEP [--wait] and tierckpt rm NS STEP [--durable].
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

struct StepOptions {
  std::string ns;
  uint64_t step = 0;
  bool wait = false;
  double timeout_s = 0;  // 0 = no limit
  bool durable = false;
};

std::string StepName(const StepOptions& o) { return o.ns + "/" + std::to_string(o.step); }

// Where ns persists: its own base when a job bound one (docs/agent.md, "Per-job durable
// bases"), else the agent's default, as the agent's status reports it.
std::string BaseOf(Client& client, const std::string& ns) {
  Result<std::string> stats = client.Stats();
  if (stats.ok()) {
    const nlohmann::json j = ParseJson(*stats);
    if (j.contains("namespaces") && j["namespaces"].is_array()) {
      for (const nlohmann::json& n : j["namespaces"]) {
        if (n.is_object() && n.value("namespace", "") == ns && n.contains("durable") &&
            n["durable"].is_string()) {
          return n["durable"].get<std::string>();
        }
      }
    }
  }
  return client.durable_base();
}

int RunPersist(const GlobalOptions& g, const StepOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  if (client->durable_base().empty()) {
    return Fail("the agent at " + client->socket_path() +
                " has no durable tier; restart it with `tierckpt agent start --durable DIR_OR_URL`");
  }
  Status s = client->Persist(o.ns, o.step);
  if (!s.ok()) return Fail(s.WithContext("persisting " + StepName(o)));
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  if (o.wait) {
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    Status w = client->WaitDurable(o.ns, o.step, timeout);
    if (!w.ok()) return Fail(w.WithContext("waiting for " + StepName(o) + " to be durable"));
  }
  const std::string base = BaseOf(*client, o.ns);
  if (g.json) {
    PrintJson({{"namespace", o.ns},
               {"step", o.step},
               {"durable", o.wait ? "committed" : "pending"},
               {"durable_base", base},
               {"seconds", seconds()}});
  } else if (o.wait) {
    std::printf("%s is durable in %s (%.2f s)\n", StepName(o).c_str(), base.c_str(), seconds());
  } else {
    std::printf("%s queued for persisting to %s (wait with `tierckpt persist %s %llu --wait`)\n", StepName(o).c_str(),
                base.c_str(), o.ns.c_str(), static_cast<unsigned long long>(o.step));
  }
  return kExitOk;
}

int RunRm(const GlobalOptions& g, const StepOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Status s = client->DeleteStep(o.ns, o.step, o.durable);
  if (!s.ok()) return Fail(s.WithContext("deleting " + StepName(o)));
  if (g.json) {
    PrintJson({{"namespace", o.ns}, {"step", o.step}, {"deleted_durable", o.durable}});
  } else {
    std::printf("deleted %s from memory%s\n", StepName(o).c_str(), o.durable ? " and durable" : "");
  }
  return kExitOk;
}

}  // namespace

void AddStepCommands(CLI::App& app, Cli& cli) {
  auto p = std::make_shared<StepOptions>();
  CLI::App* persist = app.add_subcommand("persist", "copy a committed step to the durable tier");
  persist->add_option("namespace", p->ns, "namespace")->required();
  AddStepArgument(persist, &p->step);
  persist->add_flag("--wait", p->wait, "wait until the step is committed in the durable tier");
  persist->add_option("--timeout", p->timeout_s, "with --wait: give up after this many seconds (0 = never)")
      ->check(CLI::NonNegativeNumber);
  persist->callback([&cli, p] { cli.exit_code = RunPersist(cli.global, *p); });

  auto r = std::make_shared<StepOptions>();
  CLI::App* rm = app.add_subcommand("rm", "delete a step from the memory tier and its replicas on peers (and the durable tier with --durable)");
  rm->add_option("namespace", r->ns, "namespace")->required();
  AddStepArgument(rm, &r->step);
  rm->add_flag("--durable", r->durable, "delete the durable copy too");
  rm->callback([&cli, r] { cli.exit_code = RunRm(cli.global, *r); });
}

}  // namespace tierckpt::cli
