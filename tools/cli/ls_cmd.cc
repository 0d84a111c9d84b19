// tierckpt ls [NS]: the steps the agent knows, per tier.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

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
  Result<StepListing> listing = client->Listing(o.ns);
  if (!listing.ok()) return Fail(listing.status().WithContext("listing steps"));
  const std::vector<StepSummary>* steps = &listing->steps;
  // A PARITY column when the agent runs --redundancy rs:K+M: its List reply
  // carries each committed step's parity state (decision 166).
  const bool parity = std::any_of(steps->begin(), steps->end(), [](const StepSummary& s) { return !s.parity.empty(); });
  // An unreachable durable tier is reported (stderr, exit 1) after the rows
  // the agent could list, so scripts notice and people still see memory.
  const int rc_out = listing->durable_error.empty() ? kExitOk : kExitFailure;
  auto report_durable = [&] {
    if (listing->durable_error.empty()) return;
    std::fprintf(stderr,
                 "tierckpt: the durable tier could not be listed; its columns show only what this agent "
                 "persisted: %s\n",
                 listing->durable_error.c_str());
  };
  if (g.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const StepSummary& s : *steps) {
      nlohmann::json e = {{"namespace", s.ns}, {"step", s.step},       {"bytes", s.bytes},
                          {"objects", s.objects}, {"memory", s.memory}, {"durable", s.durable}};
      if (!s.durable_error.empty()) e["durable_error"] = s.durable_error;
      if (!s.parity.empty()) e["parity"] = s.parity;
      arr.push_back(std::move(e));
    }
    nlohmann::json doc = {{"steps", arr}};
    if (!listing->durable_error.empty()) doc["durable_error"] = listing->durable_error;
    PrintJson(doc);
    report_durable();
    return rc_out;
  }
  if (steps->empty()) {
    if (o.ns.empty()) {
      std::printf("no steps in any tier (save one with `tierckpt save NS STEP --from DIR`)\n");
    } else {
      std::printf("no steps of namespace %s in any tier\n", o.ns.c_str());
    }
    report_durable();
    return rc_out;
  }
  std::vector<std::string> header = {"NAMESPACE", "STEP", "SIZE", "OBJECTS", "MEMORY", "DURABLE"};
  std::vector<bool> right = {false, true, true, true, false, false};
  if (parity) {
    header.push_back("PARITY");
    right.push_back(false);
  }
  Table t(header, right);
  for (const StepSummary& s : *steps) {
    std::vector<std::string> row = {s.ns, std::to_string(s.step), HumanSize(s.bytes), std::to_string(s.objects),
                                    OrDash(s.memory), OrDash(s.durable)};
    if (parity) row.push_back(OrDash(s.parity));
    t.AddRow(row);
  }
  t.Print();
  report_durable();
  return rc_out;
}

}  // namespace

void AddLsCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<LsOptions>();
  CLI::App* sub = app.add_subcommand("ls", "list steps with their size and state in each tier");
  sub->add_option("namespace", o->ns, "only this namespace");
  sub->callback([&cli, o] { cli.exit_code = RunLs(cli.global, *o); });
}

}  // namespace tierckpt::cli
