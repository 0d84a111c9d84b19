#include "tierckpt/manifest.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>

#include "common/checksum.h"
#include "common/names.h"

namespace tierckpt {
namespace {

using nlohmann::json;

Status Bad(std::string_view source, const std::string& what) {
  return Corruption("manifest " + std::string(source) + ": " + what +
                    "; the step cannot be trusted in this tier, restore it from another tier");
}

}  // namespace

uint64_t Manifest::TotalBytes() const {
  uint64_t total = 0;
  for (const auto& o : objects) total += o.size;
  return total;
}

const ObjectEntry* Manifest::Find(std::string_view name) const {
  auto it = std::lower_bound(objects.begin(), objects.end(), name,
                             [](const ObjectEntry& e, std::string_view n) { return e.name < n; });
  if (it == objects.end() || it->name != name) return nullptr;
  return &*it;
}

std::string SpanNamesDigest(const std::vector<std::string>& names) {
  uint64_t sum = 0;
  for (const std::string& n : names) sum += XXH3_64bits(n.data(), n.size());
  return FormatSpanNamesDigest(sum);
}

std::string FormatSpanNamesDigest(uint64_t sum) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "sum64:%016llx", static_cast<unsigned long long>(sum));
  return buf;
}

std::string Manifest::ToJson() const {
  json j;
  j["format"] = kManifestFormat;
  j["version"] = kManifestVersion;
  j["namespace"] = ns;
  j["step"] = step;
  j["world_size"] = world_size;
  j["created_unix_ms"] = created_unix_ms;
  j["node"] = node;
  if (!members.empty()) j["members"] = members;
  if (member_ref) {
    char digest[32];
    std::snprintf(digest, sizeof(digest), "xxh3-64:%016llx", static_cast<unsigned long long>(member_ref->digest));
    j["member_ref"] = {{"count", member_ref->count},
                       {"index", member_ref->index},
                       {"digest", digest},
                       {"coordinator", member_ref->coordinator}};
  }
  if (!placement.empty()) {
    json pl = json::parse(placement, nullptr, /*allow_exceptions=*/false);
    if (!pl.is_discarded()) j["placement"] = std::move(pl);
  }
  j["total_bytes"] = TotalBytes();
  if (checksums_pending) j["checksums_pending"] = true;
  if (span) {
    j["span"] = {{"parts", span->parts},
                 {"objects", span->objects},
                 {"bytes", span->bytes},
                 {"names_digest", span->names_digest}};
  }
  json objs = json::array();
  for (const auto& o : objects) {
    objs.push_back({{"name", o.name}, {"size", o.size}, {"checksum", o.checksum}, {"node", o.node}});
  }
  j["objects"] = std::move(objs);
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Status Manifest::Validate() const {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateStep(step));
  std::string prev;
  for (size_t i = 0; i < objects.size(); ++i) {
    const auto& o = objects[i];
    TC_RETURN_IF_ERROR(ValidateObjectName(o.name).WithContext("object " + std::to_string(i)));
    if (!(checksums_pending && o.checksum.empty())) {
      TC_RETURN_IF_ERROR(Checksum::Parse(o.checksum).status().WithContext("object " + o.name));
    }
    if (i > 0 && o.name <= prev) {
      return InvalidArgument("objects are not sorted by name or repeat \"" + o.name + "\"");
    }
    prev = o.name;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    // Node ids follow the namespace rule (cluster/address.h).
    TC_RETURN_IF_ERROR(ValidateNamespace(members[i]).WithContext("member " + std::to_string(i) + " (a node id)"));
    if (i > 0 && members[i] <= members[i - 1]) {
      return InvalidArgument("members are not sorted or repeat \"" + members[i] + "\"");
    }
  }
  if (!placement.empty()) {
    json pl = json::parse(placement, nullptr, /*allow_exceptions=*/false);
    if (pl.is_discarded() || !pl.is_object()) return InvalidArgument("placement is not a JSON object");
  }
  if (member_ref) {
    if (!members.empty()) return InvalidArgument("member_ref is set beside a member list");
    if (member_ref->count < 2 || member_ref->index >= member_ref->count) {
      return InvalidArgument("member_ref names place " + std::to_string(member_ref->index) + " of " +
                             std::to_string(member_ref->count) + " members");
    }
    TC_RETURN_IF_ERROR(ValidateNamespace(member_ref->coordinator).WithContext("member_ref.coordinator (a node id)"));
    if (member_ref->coordinator == node) return InvalidArgument("member_ref names this part's own node as coordinator");
    for (const auto& o : objects) {
      if (o.node != node) {
        return InvalidArgument("object " + o.name + " of node \"" + node + "\"'s part was written by node \"" +
                               o.node + "\"");
      }
    }
  }
  if (span && span->parts != MemberCount()) {
    return InvalidArgument("span names " + std::to_string(span->parts) + " parts but the step has " +
                           std::to_string(MemberCount()) + " members");
  }
  if (!members.empty() && !std::binary_search(members.begin(), members.end(), node)) {
    return InvalidArgument("node \"" + node + "\" is not among the step's members");
  }
  if (!members.empty()) {
    for (const auto& o : objects) {
      if (!std::binary_search(members.begin(), members.end(), o.node)) {
        return InvalidArgument("object " + o.name + " was written by node \"" + o.node +
                               "\", which is not among the step's members");
      }
    }
  }
  return Status::Ok();
}

Result<Manifest> Manifest::Parse(std::string_view text, std::string_view source) {
  if (text.size() > kMaxManifestBytes) {
    return Bad(source, "is " + std::to_string(text.size()) + " bytes, above the " +
                           std::to_string(kMaxManifestBytes) + "-byte limit");
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad(source, "is not a JSON object");
  auto str = [&](const char* key, std::string* out) -> Status {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return Bad(source, std::string("field \"") + key + "\" must be a string");
    *out = it->get<std::string>();
    return Status::Ok();
  };
  auto num = [&](const json& obj, const char* key, uint64_t* out) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number_unsigned()) {
      return Bad(source, std::string("field \"") + key + "\" must be a non-negative integer");
    }
    *out = it->get<uint64_t>();
    return Status::Ok();
  };
  std::string format;
  TC_RETURN_IF_ERROR(str("format", &format));
  if (format != kManifestFormat) return Bad(source, "format is \"" + format.substr(0, 40) + "\", not tierckpt.manifest");
  uint64_t version = 0;
  TC_RETURN_IF_ERROR(num(j, "version", &version));
  if (version != static_cast<uint64_t>(kManifestVersion)) {
    return Bad(source, "has version " + std::to_string(version) + " but this build reads version " +
                           std::to_string(kManifestVersion) + " (upgrade tierckpt to read newer manifests)");
  }
  Manifest m;
  TC_RETURN_IF_ERROR(str("namespace", &m.ns));
  TC_RETURN_IF_ERROR(num(j, "step", &m.step));
  uint64_t ws = 0;
  TC_RETURN_IF_ERROR(num(j, "world_size", &ws));
  if (ws > 0xffffffffULL) return Bad(source, "world_size is out of range");
  m.world_size = static_cast<uint32_t>(ws);
  TC_RETURN_IF_ERROR(num(j, "created_unix_ms", &m.created_unix_ms));
  TC_RETURN_IF_ERROR(str("node", &m.node));
  if (auto mem = j.find("members"); mem != j.end()) {
    if (!mem->is_array()) return Bad(source, "field \"members\" must be an array of node ids");
    for (const auto& n : *mem) {
      if (!n.is_string()) return Bad(source, "field \"members\" must be an array of node ids");
      m.members.push_back(n.get<std::string>());
    }
  }
  if (auto mr = j.find("member_ref"); mr != j.end()) {
    if (!mr->is_object()) return Bad(source, "field \"member_ref\" must be an object");
    MemberRef r;
    uint64_t count = 0, index = 0;
    TC_RETURN_IF_ERROR(num(*mr, "count", &count));
    TC_RETURN_IF_ERROR(num(*mr, "index", &index));
    if (count > 0xffffffffULL || index > 0xffffffffULL) return Bad(source, "member_ref.count is out of range");
    r.count = static_cast<uint32_t>(count);
    r.index = static_cast<uint32_t>(index);
    auto d = mr->find("digest");
    auto c = mr->find("coordinator");
    if (d == mr->end() || !d->is_string() || c == mr->end() || !c->is_string()) {
      return Bad(source, "fields \"member_ref.digest\" and \"member_ref.coordinator\" must be strings");
    }
    const std::string hex = d->get<std::string>();
    constexpr std::string_view kPrefix = "xxh3-64:";
    if (hex.size() != kPrefix.size() + 16 || hex.compare(0, kPrefix.size(), kPrefix) != 0 ||
        hex.find_first_not_of("0123456789abcdef", kPrefix.size()) != std::string::npos) {
      return Bad(source, "member_ref.digest is not xxh3-64:<16 hex digits>");
    }
    r.digest = std::stoull(hex.substr(kPrefix.size()), nullptr, 16);
    r.coordinator = c->get<std::string>();
    m.member_ref = std::move(r);
  }
  if (auto pl = j.find("placement"); pl != j.end()) {
    if (!pl->is_object()) return Bad(source, "field \"placement\" must be an object");
    m.placement = pl->dump();
  }
  if (auto cp = j.find("checksums_pending"); cp != j.end()) {
    if (!cp->is_boolean()) return Bad(source, "field \"checksums_pending\" must be true or false");
    m.checksums_pending = cp->get<bool>();
  }
  if (auto sp = j.find("span"); sp != j.end()) {
    if (!sp->is_object()) return Bad(source, "field \"span\" must be an object");
    SpanSummary s;
    uint64_t parts = 0;
    TC_RETURN_IF_ERROR(num(*sp, "parts", &parts));
    if (parts > 0xffffffffULL) return Bad(source, "span.parts is out of range");
    s.parts = static_cast<uint32_t>(parts);
    TC_RETURN_IF_ERROR(num(*sp, "objects", &s.objects));
    TC_RETURN_IF_ERROR(num(*sp, "bytes", &s.bytes));
    auto d = sp->find("names_digest");
    if (d == sp->end() || !d->is_string()) return Bad(source, "field \"span.names_digest\" must be a string");
    s.names_digest = d->get<std::string>();
    m.span = std::move(s);
  }
  auto objs = j.find("objects");
  if (objs == j.end() || !objs->is_array()) return Bad(source, "field \"objects\" must be an array");
  m.objects.reserve(objs->size());
  for (const auto& o : *objs) {
    if (!o.is_object()) return Bad(source, "an entry of \"objects\" is not an object");
    ObjectEntry e;
    auto get_s = [&](const char* key, std::string* out) -> Status {
      auto it = o.find(key);
      if (it == o.end() || !it->is_string()) return Bad(source, std::string("object field \"") + key + "\" must be a string");
      *out = it->get<std::string>();
      return Status::Ok();
    };
    TC_RETURN_IF_ERROR(get_s("name", &e.name));
    TC_RETURN_IF_ERROR(num(o, "size", &e.size));
    TC_RETURN_IF_ERROR(get_s("checksum", &e.checksum));
    TC_RETURN_IF_ERROR(get_s("node", &e.node));
    m.objects.push_back(std::move(e));
  }
  uint64_t total = 0;
  if (j.contains("total_bytes")) {
    TC_RETURN_IF_ERROR(num(j, "total_bytes", &total));
    if (total != m.TotalBytes()) return Bad(source, "total_bytes does not match the sum of object sizes");
  }
  Status v = m.Validate();
  if (!v.ok()) return Bad(source, v.message());
  return m;
}

}  // namespace tierckpt
