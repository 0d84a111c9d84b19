// tierckpt prune [NS] [--keep-memory K] [--keep-durable M].
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

struct PruneOptions {
  std::string ns;
  uint32_t keep_memory = 0;
  uint32_t keep_durable = 0;
};

int RunPrune(const GlobalOptions& g, const PruneOptions& o) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<std::string> result = client->Prune(o.ns, o.keep_memory, o.keep_durable);
  if (!result.ok()) return Fail(result.status().WithContext("pruning" + (o.ns.empty() ? "" : " namespace " + o.ns)));
  nlohmann::json j = ParseJson(*result);
  if (j.is_discarded()) return Fail("tierckptd answered prune with a document that is not JSON");
  if (g.json) {
    PrintJson(j);
    return kExitOk;
  }
  // docs/protocol.md: {"deleted":[{"namespace","step","tier"}]}. Agents of
  // 0.1 send {"memory":{"evicted":[..],"kept_pending":[..]},
  // "durable":{"deleted":[..],"errors":[s]}}. Both are read.
  if (!j.is_object()) return Fail("tierckptd answered prune with a document that is not a JSON object");
  Table t({"NAMESPACE", "STEP", "TIER", "ACTION"}, {false, true, false, false});
  size_t rows = 0;
  auto add = [&](const nlohmann::json* list, const std::string& tier, const std::string& action) {
    if (list == nullptr || !list->is_array()) return;
    for (const nlohmann::json& d : *list) {
      auto field = [&](const char* key) -> std::string {
        auto it = d.is_object() ? d.find(key) : d.end();
        if (it == d.end()) return "";
        return it->is_string() ? it->get<std::string>() : it->dump();
      };
      std::string ns = d.is_object() ? field("namespace") : o.ns;
      std::string step = d.is_object() ? field("step") : d.dump();
      std::string row_tier = d.is_object() && !field("tier").empty() ? field("tier") : tier;
      t.AddRow({OrDash(ns), OrDash(step), row_tier, action});
      ++rows;
    }
  };
  auto find = [](const nlohmann::json& obj, const char* key) -> const nlohmann::json* {
    auto it = obj.is_object() ? obj.find(key) : obj.end();
    return it == obj.end() ? nullptr : &*it;
  };
  add(find(j, "deleted"), "", "deleted");
  const nlohmann::json* memory = find(j, "memory");
  const nlohmann::json* durable = find(j, "durable");
  if (memory != nullptr) {
    add(find(*memory, "evicted"), "memory", "deleted");
    add(find(*memory, "kept_pending"), "memory", "kept: persist pending");
  }
  if (durable != nullptr) add(find(*durable, "deleted"), "durable", "deleted");
  bool failed = false;
  if (durable != nullptr) {
    if (const nlohmann::json* errors = find(*durable, "errors"); errors != nullptr && errors->is_array()) {
      for (const nlohmann::json& e : *errors) {
        Fail("pruning the durable tier: " + (e.is_string() ? e.get<std::string>() : e.dump()));
        failed = true;
      }
    }
  }
  if (rows == 0) {
    std::printf("nothing to prune%s\n", o.ns.empty() ? "" : (" in namespace " + o.ns).c_str());
  } else {
    t.Print();
  }
  return failed ? kExitFailure : kExitOk;
}

}  // namespace

void AddPruneCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<PruneOptions>();
  CLI::App* sub = app.add_subcommand(
      "prune", "delete old committed steps now (the newest committed step of a namespace is always kept)");
  sub->add_option("namespace", o->ns, "only this namespace (default: all)");
  sub->add_option("--keep-memory", o->keep_memory,
                  "committed steps to keep in memory per namespace (0 = the agent's --keep-last)")
      ->transform(DecimalOnly());
  sub->add_option("--keep-durable", o->keep_durable, "steps to keep in the durable tier per namespace (0 = leave it alone)")
      ->transform(DecimalOnly());
  sub->callback([&cli, o] { cli.exit_code = RunPrune(cli.global, *o); });
}

}  // namespace tierckpt::cli
