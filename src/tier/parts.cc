// parts.cc — see parts.h.
#include "tier/parts.h"

#include <algorithm>
#include <map>
#include <set>

#include "tier/step_state.h"

namespace tierckpt::agent {

PartMerger::PartMerger(const Manifest& reference)
    : ns_(reference.ns),
      step_(reference.step),
      label_(StepLabel(reference.ns, reference.step)),
      members_(reference.members),
      members_digest_(DigestMembers(members_)) {
  totals_.placement = reference.placement;
}

Result<PartMerger> PartMerger::FromCoordinatorRecord(const Manifest& own, PartRecord coordinator) {
  Manifest reference = coordinator.part;
  reference.members = coordinator.member_ids.empty() ? coordinator.part.members : coordinator.member_ids;
  reference.member_ref.reset();
  const std::string label = StepLabel(own.ns, own.step);
  if (reference.members.size() < 2) {
    return Corruption("the part record of node " + coordinator.part.node + ", the coordinator of " + label +
                      ", does not list the step's members, which node " + own.node +
                      "'s part names only by count and digest; it was written by another agent version or "
                      "damaged: have the coordinator (or a holder of its replica) upload its part again");
  }
  PartMerger merger(reference);
  TC_RETURN_IF_ERROR(merger.Add(std::move(coordinator)));
  return merger;
}

Status PartMerger::Add(PartRecord record) {
  Manifest& part = record.part;
  if (part.ns != ns_ || part.step != step_) {
    return Corruption("the part of node " + part.node + " describes " + StepLabel(part.ns, part.step) + ", not " +
                      label_);
  }
  if (!record.members_digest && part.member_ref) record.members_digest = DigestOfPart(part);
  if (record.members_digest && *record.members_digest != members_digest_) {
    return Corruption("the part record of node " + part.node + " of " + label_ + " names " +
                      DescribeMembers(*record.members_digest) + ", not the " + DescribeMembers(members_digest_) +
                      " of the part it is merged with; they come from different saves of that step number: "
                      "delete the step and save it again");
  }
  if (!record.members_digest && part.members != members_) {
    return Corruption("the part of node " + part.node + " of " + label_ +
                      " names other members than the part it is merged with; they come from different saves of "
                      "that step number: delete the step and save it again");
  }
  if (added_.count(part.node) != 0) return Corruption("two parts of " + label_ + " come from node " + part.node);
  if (std::find(members_.begin(), members_.end(), part.node) == members_.end()) {
    return FailedPrecondition(label_ + " has a part of node " + part.node + ", which is not one of its members");
  }
  for (const ObjectEntry& e : part.objects) {
    auto it = objects_.find(e.name);
    if (it != objects_.end()) {
      return Corruption("object " + e.name + " of " + label_ + " is in the parts of both node " + it->second.node +
                        " and node " + e.node + "; two ranks on different nodes wrote the same name");
    }
  }
  for (ObjectEntry& e : part.objects) {
    std::string name = e.name;
    objects_.emplace(std::move(name), std::move(e));
  }
  // The coordinator's record carries the placement (decision 116).
  if (totals_.placement.empty()) totals_.placement = std::move(part.placement);
  totals_.world_size = std::max(totals_.world_size, part.world_size);
  totals_.created_unix_ms = std::max(totals_.created_unix_ms, part.created_unix_ms);
  totals_.checksums_pending = totals_.checksums_pending || part.checksums_pending;  // a commit's answer
  added_.insert(std::move(part.node));
  return Status::Ok();  // part, with its member list, is dropped here
}

std::vector<std::string> PartMerger::Missing() const {
  std::vector<std::string> missing;
  for (const std::string& member : members_) {
    if (added_.count(member) == 0) missing.push_back(member);
  }
  return missing;
}

Result<Manifest> PartMerger::Finish(std::string_view node) const {
  std::vector<std::string> missing = Missing();
  if (!missing.empty() || added_.size() != members_.size()) {
    return FailedPrecondition(label_ + " lacks the parts of nodes " + (missing.empty() ? "(none)" : JoinIds(missing)) +
                              " (or has parts of nodes that are not members)");
  }
  Manifest merged = totals_;
  merged.ns = ns_;
  merged.step = step_;
  merged.node = std::string(node);
  merged.members = members_;
  merged.objects.reserve(objects_.size());
  for (const auto& [name, e] : objects_) merged.objects.push_back(e);
  TC_RETURN_IF_ERROR(merged.Validate().WithContext("merging the parts of " + label_));
  return merged;
}

Result<Manifest> MergeParts(const std::vector<Manifest>& parts, std::string_view node) {
  if (parts.empty()) return InvalidArgument("no parts to merge");
  PartMerger merger(parts.front());
  for (const Manifest& p : parts) TC_RETURN_IF_ERROR(merger.Add(p));
  return merger.Finish(node);
}

bool ContainsPart(const Manifest& whole, const Manifest& part) {
  if (whole.ns != part.ns || whole.step != part.step) return false;
  for (const ObjectEntry& e : part.objects) {
    const ObjectEntry* w = whole.Find(e.name);
    if (w == nullptr || w->size != e.size || w->checksum != e.checksum) return false;
  }
  return true;
}

std::string PartDifference(const Manifest& other, const Manifest& part) {
  for (const ObjectEntry& mine : part.objects) {
    const ObjectEntry* there = other.Find(mine.name);
    if (there == nullptr) return "its object " + mine.name + " is missing";
    if (there->size != mine.size || (!mine.checksum.empty() && there->checksum != mine.checksum))
      return "its object " + mine.name + " differs";
  }
  return "";
}

std::string MergerOf(const Manifest& part) {
  const size_t n = part.MemberCount();
  if (n == 0) return "";
  const size_t merger = static_cast<size_t>(part.step % n);
  if (!part.members.empty()) return part.members[merger];
  return merger == part.member_ref->index ? part.node : "";
}

size_t MergeTurn(const Manifest& part, std::string_view node) {
  const size_t n = part.MemberCount();
  if (n == 0) return kMaxMergeTurn;
  if (part.member_ref) {
    // A part without the list knows its own place only (decision 116).
    if (node != part.node) return kMaxMergeTurn;
    const size_t k = (part.member_ref->index + n - static_cast<size_t>(part.step % n)) % n;
    return std::min(k, kMaxMergeTurn);
  }
  const size_t merger = static_cast<size_t>(part.step % n);  // MergerOf's index
  for (size_t k = 0; k < n; ++k) {
    if (part.members[(merger + k) % n] == node) return std::min(k, kMaxMergeTurn);
  }
  return kMaxMergeTurn;
}

}  // namespace tierckpt::agent
