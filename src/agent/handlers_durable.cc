// Handlers: per-job durable bases (BindDurable; agent/durable_bases.h) and
// save policies (SetPolicy; tier/namespace_policy.h).
#include <nlohmann/json.hpp>

#include "agent/handlers.h"
#include "common/log.h"
#include "common/names.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

Reply Handlers::BindDurable(std::string_view p) {
  wire::BindDurableRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateNamespace(req.ns); !st.ok()) return StatusReply(st.WithContext("BindDurable"));
  if (d_.bases == nullptr) {
    return StatusReply(
        FailedPrecondition("namespace " + req.ns + " asks to persist to " + req.base.substr(0, 200) +
                           " but this agent has no durable tier; start tierckptd with --durable URL "
                           "(and --durable-allow for bases other than that one)"));
  }
  // The base changes only while the namespace holds no step in memory
  // (decision 74). A step queued or being copied to the old base would land
  // half here, half there; and any step in memory was saved by a job that
  // named the old base: a second job binding the same namespace elsewhere
  // would silently move that job's later persists (and its retention, its
  // restores) into the second job's base.
  auto idle = [this, &req](const std::string& from) -> Status {
    const std::vector<StepInfo> steps = d_.tier->ListSteps(req.ns);
    for (const StepInfo& s : steps) {
      if (s.persist == PersistState::kQueued || s.persist == PersistState::kRunning) {
        return FailedPrecondition("namespace " + req.ns + " persists to " + from + " and step " +
                                  std::to_string(s.step) +
                                  " is being persisted there now; wait for it "
                                  "(`tierckpt persist " +
                                  req.ns + " " + std::to_string(s.step) + " --wait" +
                                  "`), then connect with the new base " + req.base.substr(0, 200));
      }
    }
    if (!steps.empty()) {
      return FailedPrecondition(
          "namespace " + req.ns + " persists to " + from + " and holds " + std::to_string(steps.size()) +
          " step(s) in memory (newest " + std::to_string(steps.back().step) +
          ") saved for that base; it cannot move to " + req.base.substr(0, 200) +
          " under them. Two jobs are using one namespace: give this job its own namespace, or, if the old "
          "steps are done with, remove each first (`tierckpt ls " + req.ns + "`, `tierckpt rm " + req.ns +
          " STEP`)");
    }
    return Status::Ok();
  };
  Result<std::string> bound = d_.bases->Bind(req.ns, req.base, idle);
  if (!bound.ok()) return StatusReply(bound.status().WithContext("binding namespace " + req.ns));
  return JsonReply(nlohmann::json{{"namespace", req.ns}, {"durable", *bound}}.dump());
}

Reply Handlers::SetPolicy(const ConnectionState& conn, std::string_view p) {
  wire::SetPolicyRequest req;
  if (Reply bad; !DecodeRequest(p, &req, &bad)) return bad;
  if (Status st = ValidateNamespace(req.ns); !st.ok()) return StatusReply(st.WithContext("SetPolicy"));
  const NamespacePolicy policy{req.keep_memory, req.keep_durable, req.persist_every};
  if ((policy.keep_durable > 0 || policy.persist_every > 0) && !d_.tier->options().has_durable) {
    return StatusReply(FailedPrecondition("namespace " + req.ns + " declares " + policy.ToString() +
                                          " but this agent has no durable tier; start tierckptd with --durable URL, "
                                          "or leave durable_keep and persist_every unset"));
  }
  std::string who = (conn.client.empty() ? std::string("a client") : conn.client) + " pid " +
                    std::to_string(conn.peer.pid) + (conn.writer.empty() ? "" : " writer " + conn.writer);
  if (Status st = d_.tier->policies().Declare(req.ns, policy, conn.id, std::move(who)); !st.ok()) {
    return StatusReply(st);
  }
  Log(LogLevel::kInfo, "policy").Kv("ns", req.ns).Kv("conn", conn.id).Kv("policy", policy.ToString());
  return StatusReply(Status::Ok());
}

}  // namespace tierckpt::agent
