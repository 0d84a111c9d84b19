// parts.cc — see parts.h.
#include "tier/parts.h"

#include <algorithm>
#include <map>
#include <set>

#include "tier/step_state.h"

namespace tierckpt::agent {

Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node) {
  if (parts.empty()) return InvalidArgument("no parts to merge");
  const Manifest& first = parts.front();
  const std::string label = StepLabel(first.ns, first.step);
  std::set<std::string> seen;
  for (const Manifest& p : parts) {
    if (p.ns != first.ns || p.step != first.step) {
      return Corruption("the part of node " + p.node + " describes " + StepLabel(p.ns, p.step) + ", not " + label);
    }
    if (p.members != first.members) {
      return Corruption("the parts of nodes " + first.node + " and " + p.node + " of " + label +
                        " name different members; they come from different saves of that step number: "
                        "delete the step and save it again");
    }
    if (!seen.insert(p.node).second) return Corruption("two parts of " + label + " come from node " + p.node);
  }
  std::vector<std::string> missing;
  for (const std::string& member : first.members) {
    if (seen.count(member) == 0) missing.push_back(member);
  }
  if (!missing.empty() || seen.size() != first.members.size()) {
    return FailedPrecondition(label + " lacks the parts of nodes " + (missing.empty() ? "(none)" : JoinIds(missing)) +
                              " (or has parts of nodes that are not members)");
  }
  Manifest merged;
  merged.ns = first.ns;
  merged.step = first.step;
  merged.node = std::string(node);
  merged.members = first.members;
  merged.placement = first.placement;
  std::map<std::string, const ObjectEntry*> objects;
  for (const Manifest& p : parts) {
    merged.world_size = std::max(merged.world_size, p.world_size);
    merged.created_unix_ms = std::max(merged.created_unix_ms, p.created_unix_ms);
    merged.checksums_pending = merged.checksums_pending || p.checksums_pending;  // a commit's answer
    for (const ObjectEntry& e : p.objects) {
      auto [it, fresh] = objects.emplace(e.name, &e);
      if (!fresh) {
        return Corruption("object " + e.name + " of " + label + " is in the parts of both node " + it->second->node +
                          " and node " + e.node + "; two ranks on different nodes wrote the same name");
      }
    }
  }
  merged.objects.reserve(objects.size());
  for (const auto& [name, e] : objects) merged.objects.push_back(*e);
  TC_RETURN_IF_ERROR(merged.Validate().WithContext("merging the parts of " + label));
  return merged;
}

bool ContainsPart(const Manifest& whole, const Manifest& part) {
  if (whole.ns != part.ns || whole.step != part.step) return false;
  for (const ObjectEntry& e : part.objects) {
    const ObjectEntry* w = whole.Find(e.name);
    if (w == nullptr || w->size != e.size || w->checksum != e.checksum) return false;
  }
  return true;
}

const std::string& MergerOf(const Manifest& part) { return part.members[part.step % part.members.size()]; }

size_t MergeTurn(const Manifest& part, std::string_view node) {
  const size_t n = part.members.size();
  if (n == 0) return kMaxMergeTurn;
  const size_t merger = static_cast<size_t>(part.step % n);  // MergerOf's index
  for (size_t k = 0; k < n; ++k) {
    if (part.members[(merger + k) % n] == node) return std::min(k, kMaxMergeTurn);
  }
  return kMaxMergeTurn;
}

}  // namespace tierckpt::agent
