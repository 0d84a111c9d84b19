// http_namespaces.cc — see http_namespaces.h.
#include "agent/http_namespaces.h"

#include <nlohmann/json.hpp>

#include "common/names.h"
#include "os/files.h"
#include "os/fs_stat.h"

namespace tierckpt::agent {

Result<std::unique_ptr<HttpNamespaces>> HttpNamespaces::Open(std::string path) {
  std::unique_ptr<HttpNamespaces> n(new HttpNamespaces(path));
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  if (!info.exists) return n;
  TC_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 64u << 20));
  auto bad = [&](std::string_view why) {
    return Corruption("the HTTP API's namespaces file " + path + " " + std::string(why) +
                      "; fix or remove it (its namespaces are then created again by their jobs)");
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("namespaces") || !j["namespaces"].is_object()) {
    return bad("is not {\"namespaces\": {...}}");
  }
  MutexLock lock(&n->mu_);
  for (const auto& [ns, v] : j["namespaces"].items()) {
    if (!ValidateNamespace(ns).ok() || !v.is_object() || !v.contains("num_ranks") ||
        !v["num_ranks"].is_number_unsigned() || !v.contains("steps_retained") ||
        !v["steps_retained"].is_number_unsigned()) {
      return bad("has a bad entry " + QuoteForMessage(ns.substr(0, 200)));
    }
    HttpNamespace c{v["num_ranks"].get<uint32_t>(), v["steps_retained"].get<uint32_t>()};
    if (c.num_ranks == 0 || c.num_ranks > kMaxHttpRanks || c.steps_retained == 0 ||
        c.steps_retained > kMaxHttpStepsRetained) {
      return bad("has values out of range for " + QuoteForMessage(ns));
    }
    n->map_[ns] = c;
  }
  return n;
}

std::optional<HttpNamespace> HttpNamespaces::Get(const std::string& ns) const {
  MutexLock lock(&mu_);
  auto it = map_.find(ns);
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, HttpNamespace> HttpNamespaces::All() const {
  MutexLock lock(&mu_);
  return map_;
}

Status HttpNamespaces::Create(const std::string& ns, HttpNamespace c) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  if (c.num_ranks == 0 || c.num_ranks > kMaxHttpRanks) {
    return InvalidArgument("num_ranks " + std::to_string(c.num_ranks) + " of namespace " + ns +
                           " is out of range; give 1 to " + std::to_string(kMaxHttpRanks) +
                           " (the data ranks plus the metadata ranks)");
  }
  if (c.steps_retained == 0 || c.steps_retained > kMaxHttpStepsRetained) {
    return InvalidArgument("steps_retained " + std::to_string(c.steps_retained) + " of namespace " + ns +
                           " is out of range; give 1 to " + std::to_string(kMaxHttpStepsRetained));
  }
  MutexLock lock(&mu_);
  if (map_.count(ns) != 0) {
    const HttpNamespace& e = map_[ns];
    return AlreadyExists("namespace '" + ns + "' already exists (num_ranks " + std::to_string(e.num_ranks) +
                         ", steps_retained " + std::to_string(e.steps_retained) +
                         "); delete it first to change them");
  }
  map_[ns] = c;
  Status saved = SaveLocked();
  if (!saved.ok()) map_.erase(ns);
  return saved;
}

Result<bool> HttpNamespaces::Remove(const std::string& ns) {
  MutexLock lock(&mu_);
  auto it = map_.find(ns);
  if (it == map_.end()) return false;
  const HttpNamespace old = it->second;
  map_.erase(it);
  Status saved = SaveLocked();
  if (!saved.ok()) {
    map_[ns] = old;
    return saved;
  }
  return true;
}

Status HttpNamespaces::SaveLocked() const {
  nlohmann::json j;
  j["namespaces"] = nlohmann::json::object();
  for (const auto& [ns, c] : map_) {
    j["namespaces"][ns] = {{"num_ranks", c.num_ranks}, {"steps_retained", c.steps_retained}};
  }
  return WriteFileAtomic(path_, j.dump(1) + "\n", /*durable=*/false)
      .WithContext("saving the HTTP API's namespaces");
}

}  // namespace tierckpt::agent
