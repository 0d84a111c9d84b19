// tierckpt verify NS STEP: re-check every object's checksum in every tier
// holding the step. Exit 1 when a tier holding it is not intact, or when no
// tier holds it.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "output.h"

namespace tierckpt::cli {
namespace {

using nlohmann::json;

struct VerifyOptions {
  std::string ns;
  uint64_t step = 0;
};

struct TierVerdict {
  std::string tier;
  bool present = false;
  bool ok = false;
  uint64_t objects_checked = 0;
  std::string state;
  std::vector<std::string> errors;
};

std::string ErrorText(const json& e) {
  if (e.is_string()) return e.get<std::string>();
  return e.dump(-1, ' ', false, json::error_handler_t::replace);
}

// One tier's entry of the Verify document.
Result<TierVerdict> ParseTier(const json& t, std::string name) {
  if (!t.is_object()) return ProtocolError("tierckptd's verify answer for tier " + name + " is not an object");
  if (auto n = t.find("tier"); n != t.end() && n->is_string()) name = n->get<std::string>();
  if (name.empty()) return ProtocolError("tierckptd's verify answer has a tier entry without a \"tier\" name");
  TierVerdict v;
  v.tier = std::move(name);
  auto flag = [&](const char* key) {
    auto it = t.find(key);
    return it != t.end() && it->is_boolean() && it->get<bool>();
  };
  v.present = flag("present");
  v.ok = flag("ok");
  if (auto n = t.find("objects_checked"); n != t.end() && n->is_number_unsigned()) {
    v.objects_checked = n->get<uint64_t>();
  }
  if (auto st = t.find("state"); st != t.end() && st->is_string()) v.state = st->get<std::string>();
  if (auto e = t.find("errors"); e != t.end() && e->is_array()) {
    for (const json& x : *e) v.errors.push_back(ErrorText(x));
  }
  return v;
}

// The Verify document (docs/protocol.md): {"namespace","step","ok","tiers":T}
// where T lists {"tier","present","ok","objects_checked","errors":[s]} as an
// array, or as an object keyed by tier name (what agents of 0.1 send).
Result<std::vector<TierVerdict>> ParseVerdicts(const json& j) {
  auto tiers = j.find("tiers");
  std::vector<TierVerdict> out;
  if (tiers != j.end() && tiers->is_array()) {
    for (const json& t : *tiers) {
      TC_ASSIGN_OR_RETURN(TierVerdict v, ParseTier(t, ""));
      out.push_back(std::move(v));
    }
  } else if (tiers != j.end() && tiers->is_object()) {
    for (auto it = tiers->begin(); it != tiers->end(); ++it) {
      TC_ASSIGN_OR_RETURN(TierVerdict v, ParseTier(*it, it.key()));
      out.push_back(std::move(v));
    }
  } else {
    return ProtocolError("tierckptd's verify answer has no \"tiers\" list");
  }
  // Memory first: the order a reader tries the tiers.
  std::stable_sort(out.begin(), out.end(),
                   [](const TierVerdict& a, const TierVerdict& b) { return a.tier == "memory" && b.tier != "memory"; });
  return out;
}

int RunVerify(const GlobalOptions& g, const VerifyOptions& o) {
  const std::string step_name = o.ns + "/" + std::to_string(o.step);
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<std::string> text = client->Verify(o.ns, o.step);
  if (!text.ok()) return Fail(text.status().WithContext("verifying " + step_name));
  json j = ParseJson(*text);
  if (!j.is_object()) return Fail("tierckptd answered verify " + step_name + " with a document that is not a JSON object");
  Result<std::vector<TierVerdict>> verdicts = ParseVerdicts(j);
  if (!verdicts.ok()) return Fail(verdicts.status());
  bool any_present = false, all_ok = true;
  for (const TierVerdict& v : *verdicts) {
    if (!v.present) continue;
    any_present = true;
    all_ok = all_ok && v.ok;
  }
  const int exit_code = any_present && all_ok ? kExitOk : kExitFailure;
  if (g.json) {
    PrintJson(j);
  } else {
    for (const TierVerdict& v : *verdicts) {
      if (!v.present) {
        std::printf("%-8s absent\n", v.tier.c_str());
      } else {
        std::printf("%-8s %s (%llu objects checked%s)\n", v.tier.c_str(), v.ok ? "ok" : "MISMATCH",
                    static_cast<unsigned long long>(v.objects_checked), v.state.empty() ? "" : (", " + v.state).c_str());
      }
      for (const std::string& e : v.errors) std::printf("  %s\n", e.c_str());
    }
  }
  if (!any_present) {
    std::fprintf(stderr, "tierckpt: step %s is in no tier (see `tierckpt ls %s`)\n", step_name.c_str(), o.ns.c_str());
  } else if (!all_ok) {
    std::fprintf(stderr, "tierckpt: step %s failed verification; restore from a tier that is ok\n", step_name.c_str());
  } else if (!g.json) {
    std::printf("%s verified\n", step_name.c_str());
  }
  return exit_code;
}

}  // namespace

void AddVerifyCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* sub = app.add_subcommand("verify", "re-check every object's checksum in every tier holding a step");
  sub->add_option("namespace", o->ns, "namespace")->required();
  AddStepArgument(sub, &o->step);
  sub->callback([&cli, o] { cli.exit_code = RunVerify(cli.global, *o); });
}

}  // namespace tierckpt::cli
