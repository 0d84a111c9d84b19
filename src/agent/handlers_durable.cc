// Handlers: per-job durable bases (BindDurable; agent/durable_bases.h).
#include <nlohmann/json.hpp>

#include "agent/handlers.h"
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
  // A step queued or being copied to the old base would land half here, half
  // there: the base changes only when none is.
  auto idle = [this, &req](const std::string& from) -> Status {
    for (const StepInfo& s : d_.tier->ListSteps(req.ns)) {
      if (s.persist == PersistState::kQueued || s.persist == PersistState::kRunning) {
        return FailedPrecondition("namespace " + req.ns + " persists to " + from + " and step " +
                                  std::to_string(s.step) +
                                  " is being persisted there now; wait for it "
                                  "(`tierckpt persist " +
                                  req.ns + " " + std::to_string(s.step) + " --wait" +
                                  "`), then connect with the new base " + req.base.substr(0, 200));
      }
    }
    return Status::Ok();
  };
  Result<std::string> bound = d_.bases->Bind(req.ns, req.base, idle);
  if (!bound.ok()) return StatusReply(bound.status().WithContext("binding namespace " + req.ns));
  return JsonReply(nlohmann::json{{"namespace", req.ns}, {"durable", *bound}}.dump());
}

}  // namespace tierckpt::agent
