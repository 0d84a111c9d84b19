#include "agent/reports.h"

#include <ctime>
#include <nlohmann/json.hpp>

namespace tierckpt::agent {
namespace {

using nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json StepRefs(const std::vector<std::pair<std::string, uint64_t>>& refs) {
  json arr = json::array();
  for (const auto& [ns, step] : refs) arr.push_back({{"namespace", ns}, {"step", step}});
  return arr;
}

json Verdict(const TierVerdict& v) {
  return {{"present", v.present},
          {"ok", v.ok},
          {"state", v.state},
          {"objects_checked", v.objects_checked},
          {"errors", v.errors}};
}

json Optional(const std::optional<uint64_t>& v) { return v ? json(*v) : json(nullptr); }

// "2026-11-29T07:15:18Z"
std::string FormatUtc(uint64_t unix_ms) {
  time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string ListJson(const std::vector<ListEntry>& steps, const std::string& durable_error) {
  json arr = json::array();
  for (const auto& s : steps) {
    json e = {{"namespace", s.ns},   {"step", s.step},       {"bytes", s.bytes},
              {"objects", s.objects}, {"memory", s.memory}, {"durable", s.durable}};
    if (!s.durable_error.empty()) e["durable_error"] = s.durable_error;
    if (!s.parity.empty()) e["parity"] = s.parity;
    arr.push_back(std::move(e));
  }
  json j = {{"steps", std::move(arr)}};
  if (!durable_error.empty()) j["durable_error"] = durable_error;
  return Dump(j);
}

std::string ShowJson(const Manifest& m, const std::string& memory, const std::string& durable,
                     const std::string& durable_error) {
  json manifest = json::parse(m.ToJson(), nullptr, /*allow_exceptions=*/false);
  json j = {{"manifest", std::move(manifest)}, {"memory", memory}, {"durable", durable}};
  if (!durable_error.empty()) j["durable_error"] = durable_error;
  return Dump(j);
}

std::string VerifyJson(const std::string& ns, uint64_t step, const TierVerdict& memory,
                       const TierVerdict& durable) {
  bool any = memory.present || durable.present;
  bool ok = any && (!memory.present || memory.ok) && (!durable.present || durable.ok);
  json j = {{"namespace", ns},
            {"step", step},
            {"ok", ok},
            {"tiers", {{"memory", Verdict(memory)}, {"durable", Verdict(durable)}}}};
  return Dump(j);
}

json DeletedArray(const std::vector<DeletedStep>& deleted) {
  json arr = json::array();
  for (const auto& d : deleted) arr.push_back({{"namespace", d.ns}, {"step", d.step}, {"tier", d.tier}});
  return arr;
}

std::string DeletedJson(const std::vector<DeletedStep>& deleted) {
  return Dump(json{{"deleted", DeletedArray(deleted)}});
}

std::string PruneJson(const PruneReport& r) {
  json j = {{"deleted", DeletedArray(r.deleted)},
            {"kept_pending", StepRefs(r.kept_pending)},
            {"keep_memory", r.keep_memory},
            {"keep_durable", r.keep_durable},
            {"errors", r.errors}};
  return Dump(j);
}

std::string StatsJson(const StatsInput& in) {
  json namespaces = json::array();
  for (const auto& n : in.namespaces) {
    namespaces.push_back(
        {{"namespace", n.ns},
         {"memory_steps", n.memory_steps},
         {"newest_memory", Optional(n.memory_newest)},
         {"newest_durable", Optional(n.durable_newest)},
         {"durable", n.durable_base.empty() ? json(in.info.durable_url) : json(n.durable_base)},
         {"memory_bytes", n.memory_bytes},
         {"writing_steps", n.writing_steps}});
  }
  json errors = json::array();
  for (const auto& e : in.last_errors) {
    errors.push_back(FormatUtc(e.unix_ms) + " " + e.event + ": " + e.code + ": " + e.message);
  }
  json not_persisted = json::array();
  for (const auto& f : in.not_persisted) {
    not_persisted.push_back({{"namespace", f.ns}, {"step", f.step}, {"error", f.error}});
  }
  uint64_t now = NowUnixMs();
  json j = {
      {"version", kAgentVersion},
      {"pid", in.info.pid},
      {"node_id", in.info.node_id},
      {"socket", in.info.socket_path},
      {"root", in.info.root},
      {"durable", in.info.durable_url},
      {"durable_allow", in.info.durable_allow},
      {"started_unix_ms", in.info.started_unix_ms},
      {"uptime_s", now > in.info.started_unix_ms ? (now - in.info.started_unix_ms) / 1000 : 0},
      {"retention", in.info.keep_last},
      {"persist_every", in.info.persist_every},
      {"durable_keep", in.info.durable_keep},
      {"verify_on_seal", in.info.verify_on_seal},
      {"commit_before_hash", in.info.commit_before_hash},
      {"persist_rate_bytes", in.info.persist_rate_bytes},
      {"replicate_rate_bytes", in.info.replicate_rate_bytes},
      {"background_priority", in.info.background_priority},
      {"tmpfs_huge_pages", in.info.tmpfs_huge_pages.empty() ? json(nullptr) : json(in.info.tmpfs_huge_pages)},
      {"scrub",
       {{"interval_ms", in.info.scrub_interval_ms},
        {"passes", in.scrub.passes},
        {"last_pass_unix_ms",
         in.scrub.last_pass_unix_ms != 0 ? json(in.scrub.last_pass_unix_ms) : json(nullptr)},
        {"objects", in.scrub.objects},
        {"corrupt", in.scrub.corrupt},
        {"repaired", in.scrub.repaired}}},
      {"budget_bytes", in.tier.budget_bytes},
      {"used_bytes", in.tier.used_bytes},
      {"object_bytes", in.tier.object_bytes},
      {"pool_bytes", in.tier.pool_bytes},
      {"pool_segments", in.tier.pool_segments},
      {"budget_evictions", in.tier.budget_evictions},
      {"read_mappings", in.tier.read_mappings},
      {"read_mapped_bytes", in.tier.read_mapped_bytes},
      {"tmpfs_free_bytes", in.mount ? json(in.mount->free_bytes) : json(nullptr)},
      {"tmpfs_total_bytes", in.mount ? json(in.mount->total_bytes) : json(nullptr)},
      {"committed_steps", in.tier.committed_steps},
      {"in_flight_steps", in.tier.writing_steps},
      {"persist_queue", in.persist_queued},
      {"persist_running", in.persist_running},
      {"persist_awaiting_parts", in.persist_awaiting_parts},
      {"connections", in.connections},
      {"namespaces", std::move(namespaces)},
      {"last_errors", std::move(errors)},
      {"not_persisted", std::move(not_persisted)},
  };
  json policies = json::object();
  for (const auto& [ns, p] : in.policies) {
    policies[ns] = {{"keep_memory", p.keep_memory}, {"keep_durable", p.keep_durable}, {"persist_every", p.persist_every}};
  }
  j["policies"] = std::move(policies);
  if (!in.durable_error.empty()) j["durable_error"] = in.durable_error;
  j["peers"] = nullptr;
  if (in.peers) {
    json holding = json::array();
    for (const auto& h : in.peers->held) holding.push_back({{"origin", h.origin}, {"steps", h.steps}, {"bytes", h.bytes}});
    j["peers"] = {{"listen", in.peers->listen},
                  {"replicas", in.peers->replicas},
                  {"replica_ack", in.peers->replica_ack},
                  {"holders", in.peers->holders},
                  {"holding", std::move(holding)}};
    if (in.peers->parity) {
      const ParityStatsInput& p = *in.peers->parity;
      json steps = json::array();
      for (const ParityStepState& st : p.steps) {
        steps.push_back({{"ns", st.ns},
                         {"step", st.step},
                         {"state", std::string(ParityStepState::Name(st.kind))},
                         {"redundant", st.redundant()},
                         {"detail", st.detail}});
      }
      // "recovery": a lost part of a step, on one node or spanning nodes, is rebuilt from its group's
      // survivors (decisions 139 and 141; false before them, decision 135).
      j["peers"]["parity"] = {{"scheme", p.scheme},   {"group", p.group},           {"index", p.index},
                              {"holders", p.holders}, {"held_bytes", p.held_bytes}, {"recovery", true},
                              {"ack", p.ack},         {"steps", std::move(steps)}};
    }
  }
  return Dump(j);
}

}  // namespace tierckpt::agent
