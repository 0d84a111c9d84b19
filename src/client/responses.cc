#include "client/responses.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "wire/protocol.h"

namespace tierckpt::client {
namespace {

using json = nlohmann::json;

Status Bad(std::string_view what, const std::string& why) {
  return ProtocolError("tierckptd's " + std::string(what) + " response " + why +
                       " (client and agent disagree on the format; check both are the same version)");
}

}  // namespace

Result<std::string> JsonFromBody(std::string_view body, std::string_view request) {
  Result<wire::JsonBody> decoded = wire::JsonBody::Decode(body);
  if (!decoded.ok()) return decoded.status().WithContext("tierckptd's " + std::string(request) + " response");
  return std::move(decoded->json);
}

Result<StepListing> ParseStepList(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("List", "is not a JSON object");
  auto steps = j.find("steps");
  if (steps == j.end() || !steps->is_array()) return Bad("List", "has no \"steps\" array");
  StepListing listing;
  if (auto err = j.find("durable_error"); err != j.end() && !err->is_null()) {
    if (!err->is_string()) return Bad("List", "has a non-string \"durable_error\"");
    listing.durable_error = err->get<std::string>();
  }
  std::vector<StepSummary>& out = listing.steps;
  out.reserve(steps->size());
  for (size_t i = 0; i < steps->size(); ++i) {
    const json& e = (*steps)[i];
    const std::string where = "entry " + std::to_string(i) + " of \"steps\"";
    if (!e.is_object()) return Bad("List", where + " is not an object");
    StepSummary s;
    auto str = [&](const char* key, std::string* v, bool required) -> Status {
      auto it = e.find(key);
      if (it == e.end() || it->is_null()) {
        return required ? Bad("List", where + " lacks the string \"" + key + "\"") : Status::Ok();
      }
      if (!it->is_string()) return Bad("List", where + " has a non-string \"" + key + "\"");
      *v = it->get<std::string>();
      return Status::Ok();
    };
    auto num = [&](const char* key, uint64_t* v) -> Status {
      auto it = e.find(key);
      if (it == e.end() || !it->is_number_unsigned()) {
        return Bad("List", where + " lacks the non-negative integer \"" + key + "\"");
      }
      *v = it->get<uint64_t>();
      return Status::Ok();
    };
    uint64_t objects = 0;
    TC_RETURN_IF_ERROR(str("namespace", &s.ns, true));
    TC_RETURN_IF_ERROR(num("step", &s.step));
    TC_RETURN_IF_ERROR(num("bytes", &s.bytes));
    TC_RETURN_IF_ERROR(num("objects", &objects));
    if (objects > UINT32_MAX) return Bad("List", where + " has an object count above 2^32");
    s.objects = static_cast<uint32_t>(objects);
    TC_RETURN_IF_ERROR(str("memory", &s.memory, false));
    TC_RETURN_IF_ERROR(str("durable", &s.durable, false));
    TC_RETURN_IF_ERROR(str("durable_error", &s.durable_error, false));
    TC_RETURN_IF_ERROR(str("parity", &s.parity, false));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(), [](const StepSummary& a, const StepSummary& b) {
    return std::tie(a.ns, a.step) < std::tie(b.ns, b.step);
  });
  return listing;
}

Result<Manifest> ParseShowBody(std::string_view text, std::string_view ns, uint64_t step) {
  const std::string what = "Show " + std::string(ns) + "/" + std::to_string(step);
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(what, "is not a JSON object");
  auto m = j.find("manifest");
  if (m == j.end() || !m->is_object()) return Bad(what, "has no \"manifest\" object");
  TC_ASSIGN_OR_RETURN(Manifest manifest,
                      Manifest::Parse(m->dump(), "the manifest of " + std::string(ns) + "/" +
                                                     std::to_string(step) + " sent by tierckptd"));
  if (manifest.ns != ns || manifest.step != step) {
    return Bad(what, "carries the manifest of " + manifest.ns + "/" + std::to_string(manifest.step));
  }
  return manifest;
}

Result<std::string> ParseBindDurable(std::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("BindDurable", "is not a JSON object");
  auto durable = j.find("durable");
  if (durable == j.end() || !durable->is_string()) return Bad("BindDurable", "has no \"durable\" string");
  return durable->get<std::string>();
}

Result<uint64_t> NewestCommittedStep(const std::vector<StepSummary>& steps, std::string_view ns) {
  std::optional<uint64_t> newest;
  for (const StepSummary& s : steps) {
    if (s.ns != ns) continue;
    // "peer": committed in a replica holder's memory (a replaced node's steps).
    if (s.memory != "committed" && s.memory != "peer" && s.durable != "committed") continue;
    if (!newest || s.step > *newest) newest = s.step;
  }
  if (!newest) return NotFound("no committed step of namespace " + std::string(ns) + " in any tier");
  return *newest;
}

}  // namespace tierckpt::client
