// tierckpt ls [NS]: the steps the agent knows, per tier.
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

struct LsOptions {
  std::string ns;
};

// Each step's parity state (pending, redundant, incomplete, unknown) from
// the agent's status, when it runs --redundancy rs:K+M; nullopt otherwise
// (or when its status cannot be read: the listing stands without it).
using ParityStates = std::map<std::pair<std::string, uint64_t>, std::string>;
std::optional<ParityStates> ParityOf(Client& client) {
  Result<std::string> stats = client.Stats();
  if (!stats.ok()) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(*stats, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  auto peers = j.find("peers");
  if (peers == j.end() || !peers->is_object()) return std::nullopt;
  auto parity = peers->find("parity");
  if (parity == peers->end() || !parity->is_object()) return std::nullopt;
  ParityStates out;
  auto steps = parity->find("steps");
  if (steps == parity->end() || !steps->is_array()) return out;
  for (const nlohmann::json& st : *steps) {
    if (!st.is_object() || !st.value("ns", nlohmann::json()).is_string() ||
        !st.value("step", nlohmann::json()).is_number_unsigned() ||
        !st.value("state", nlohmann::json()).is_string())
      continue;
    out[{st["ns"].get<std::string>(), st["step"].get<uint64_t>()}] = st["state"].get<std::string>();
  }
  return out;
}

int RunLs(const GlobalOptions& g, const LsOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<StepListing> listing = client->Listing(o.ns);
  if (!listing.ok()) return Fail(listing.status().WithContext("listing steps"));
  const std::vector<StepSummary>* steps = &listing->steps;
  const std::optional<ParityStates> parity = ParityOf(*client);
  auto parity_of = [&](const StepSummary& s) -> std::string {
    auto it = parity->find({s.ns, s.step});
    return it == parity->end() ? "" : it->second;
  };
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
      if (parity) e["parity"] = parity_of(s);  // "" for a step the agent sent no parity of
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
    if (parity) row.push_back(OrDash(parity_of(s)));
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
