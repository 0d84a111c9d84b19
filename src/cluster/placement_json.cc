#include "cluster/placement_json.h"

#include <utility>
#include <vector>

#include "common/names.h"

namespace tierckpt::cluster {
namespace {

using nlohmann::json;

Status BadJson(std::string_view source, const std::string& what) {
  return Corruption("placement " + std::string(source) + ": " + what +
                    "; the step's placement cannot be trusted, place it again from the current membership");
}

Status GetString(const json& obj, const char* key, std::string_view source, std::string_view where,
                 std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return BadJson(source, std::string(where) + "field \"" + key + "\" must be a string");
  }
  *out = it->get<std::string>();
  return Status::Ok();
}

Status GetUint32(const json& obj, const char* key, std::string_view source, uint32_t* out) {
  // A value built in memory holds signed integers; parsed text, unsigned ones.
  auto it = obj.find(key);
  bool ok = it != obj.end() && it->is_number_integer() &&
            (it->is_number_unsigned() ? it->get<uint64_t>() <= 0xffffffffULL
                                      : it->get<int64_t>() >= 0 && it->get<int64_t>() <= 0xffffffffLL);
  if (!ok) return BadJson(source, std::string("field \"") + key + "\" must be an integer 0..4294967295");
  *out = static_cast<uint32_t>(it->is_number_unsigned() ? it->get<uint64_t>()
                                                        : static_cast<uint64_t>(it->get<int64_t>()));
  return Status::Ok();
}

Status GetStrings(const json& obj, const char* key, std::string_view source, std::string_view where,
                  std::vector<std::string>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) {
    return BadJson(source, std::string(where) + "field \"" + key + "\" must be an array of node ids");
  }
  out->reserve(it->size());
  for (const json& v : *it) {
    if (!v.is_string())
      return BadJson(source, std::string(where) + "field \"" + key + "\" has an entry that is not a string");
    out->push_back(v.get<std::string>());
  }
  return Status::Ok();
}

}  // namespace

json PlacementToJson(const Placement& placement) {
  json j;
  j["format"] = kPlacementFormat;
  j["version"] = static_cast<uint32_t>(kPlacementVersion);
  j["replicas"] = placement.policy.replicas;
  j["spacing"] = placement.policy.spacing;
  j["ring"] = placement.ring;
  json nodes = json::array();
  for (const PlacedNode& n : placement.nodes) {
    json node;
    node["node"] = n.node_id;
    if (!n.failure_domain.empty()) node["domain"] = n.failure_domain;
    node["replicas"] = n.replica_holders;
    nodes.push_back(std::move(node));
  }
  j["nodes"] = std::move(nodes);
  return j;
}

std::string PlacementToJsonText(const Placement& placement) {
  return PlacementToJson(placement).dump(-1, ' ', false, json::error_handler_t::replace);
}

Result<Placement> PlacementFromJson(const json& j, std::string_view source) {
  if (!j.is_object()) return BadJson(source, "is not a JSON object");
  std::string format;
  TC_RETURN_IF_ERROR(GetString(j, "format", source, "", &format));
  if (format != kPlacementFormat) {
    return BadJson(source,
               "format is " + QuoteForMessage(format) + ", not \"" + std::string(kPlacementFormat) + "\"");
  }
  uint32_t version = 0;
  TC_RETURN_IF_ERROR(GetUint32(j, "version", source, &version));
  if (version != static_cast<uint32_t>(kPlacementVersion)) {
    return BadJson(source, "has version " + std::to_string(version) + " but this build reads version " +
                           std::to_string(kPlacementVersion) +
                           " (upgrade tierckpt to read newer placements)");
  }
  Placement p;
  TC_RETURN_IF_ERROR(GetUint32(j, "replicas", source, &p.policy.replicas));
  TC_RETURN_IF_ERROR(GetUint32(j, "spacing", source, &p.policy.spacing));
  TC_RETURN_IF_ERROR(GetStrings(j, "ring", source, "", &p.ring));
  auto nodes = j.find("nodes");
  if (nodes == j.end() || !nodes->is_array()) return BadJson(source, "field \"nodes\" must be an array");
  p.nodes.reserve(nodes->size());
  for (size_t i = 0; i < nodes->size(); ++i) {
    const json& n = (*nodes)[i];
    std::string where = "nodes[" + std::to_string(i) + "]: ";
    if (!n.is_object()) return BadJson(source, where + "is not an object");
    PlacedNode node;
    TC_RETURN_IF_ERROR(GetString(n, "node", source, where, &node.node_id));
    if (n.contains("domain")) {
      TC_RETURN_IF_ERROR(GetString(n, "domain", source, where, &node.failure_domain));
      if (node.failure_domain.empty())
        return BadJson(source, where + "field \"domain\" is empty; omit it instead");
    }
    TC_RETURN_IF_ERROR(GetStrings(n, "replicas", source, where, &node.replica_holders));
    p.nodes.push_back(std::move(node));
  }
  Status s = p.Validate();
  if (!s.ok()) return s.WithContext("placement " + std::string(source));
  return p;
}

Result<Placement> ParsePlacementJson(std::string_view text, std::string_view source) {
  if (text.size() > kMaxPlacementJsonBytes) {
    return BadJson(source, "is " + std::to_string(text.size()) + " bytes, above the " +
                           std::to_string(kMaxPlacementJsonBytes) + "-byte limit");
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return BadJson(source, "is not valid JSON");
  return PlacementFromJson(j, source);
}

}  // namespace tierckpt::cluster
