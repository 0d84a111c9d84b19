#include "cluster/step_agreement.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/names.h"

namespace tierckpt::cluster {
namespace {

std::string Q(std::string_view s) { return QuoteForMessage(s); }

class StepView {
 public:
  StepView(const StepCandidate& candidate, const TierHoldings& holdings, const Membership& membership,
           std::string_view reader)
      : c_(candidate), holdings_(holdings), membership_(membership), reader_(reader) {
    // Which live members hold each object of this step, in node-id order: one
    // pass over the holdings, so the cost does not grow with objects x members.
    for (const Member& m : membership_.members()) {
      auto node = holdings_.memory.find(m.node_id);
      if (node == holdings_.memory.end()) continue;
      auto step = node->second.find(c_.step);
      if (step == node->second.end()) continue;
      for (const std::string& object : step->second) live_holders_[object].push_back(&m);
    }
  }

  // Where reader_ reads o from; nullopt when no live memory and no durable copy.
  std::optional<ObjectSource> Source(const StepObject& o) const {
    ObjectSource src;
    src.object = o.name;
    src.primary = o.primary;
    if (!reader_.empty() && InMemory(reader_, o.name)) {
      src.kind = SourceKind::kLocal;
      src.node = std::string(reader_);
      return src;
    }
    const Member* peer = nullptr;
    for (const std::string& id : PlannedHolders(o)) {
      if (id != reader_ && InMemory(id, o.name)) {
        peer = membership_.Find(id);
        break;
      }
    }
    if (peer == nullptr) {
      for (const Member* m : LiveHolders(o.name)) {
        if (m->node_id != reader_) {
          peer = m;
          break;
        }
      }
    }
    if (peer != nullptr) {
      src.kind = SourceKind::kPeer;
      src.node = peer->node_id;
      src.address = peer->address;
      return src;
    }
    auto durable = holdings_.durable.find(c_.step);
    if (durable == holdings_.durable.end() || durable->second.find(o.name) == durable->second.end()) {
      return std::nullopt;
    }
    src.kind = SourceKind::kDurable;
    src.why = "no live memory copy: " + DescribeHolders(o);
    return src;
  }

  // "primary \"b\" (not a member), replica holder \"c\" (no copy in memory)".
  std::string DescribeHolders(const StepObject& o) const {
    std::vector<std::string> holders = PlannedHolders(o);
    if (holders.empty()) return "no primary node recorded and no member holds it";
    std::string out;
    for (size_t i = 0; i < holders.size(); ++i) {
      if (i > 0) out += ", ";
      out += (i == 0 ? "primary " : "replica holder ") + Q(holders[i]);
      out += membership_.Contains(holders[i]) ? " (no copy in memory)" : " (not a member)";
    }
    return out;
  }

 private:
  std::vector<std::string> PlannedHolders(const StepObject& o) const {
    if (c_.placement.has_value()) {
      std::vector<std::string> h = c_.placement->HoldersOf(o.primary);
      if (!h.empty()) return h;
    }
    if (o.primary.empty()) return {};
    return {o.primary};
  }

  const std::vector<const Member*>& LiveHolders(std::string_view object) const {
    static const std::vector<const Member*> kNone;
    auto it = live_holders_.find(object);
    return it == live_holders_.end() ? kNone : it->second;
  }

  // True when node is a live member whose memory tier holds object.
  bool InMemory(std::string_view node, std::string_view object) const {
    for (const Member* m : LiveHolders(object)) {
      if (m->node_id == node) return true;
    }
    return false;
  }

  const StepCandidate& c_;
  const TierHoldings& holdings_;
  const Membership& membership_;
  std::string_view reader_;
  std::map<std::string_view, std::vector<const Member*>> live_holders_;
};

Status CheckCandidate(const StepCandidate& c) {
  std::set<std::string_view> names;
  for (const StepObject& o : c.objects) {
    if (!names.insert(o.name).second) {
      return InvalidArgument("step " + std::to_string(c.step) + " lists object " + Q(o.name) +
                             " twice; pass each object of a step once");
    }
  }
  if (c.placement.has_value()) {
    Status s = c.placement->Validate();
    if (!s.ok()) return InvalidArgument("step " + std::to_string(c.step) + ": " + s.message());
  }
  return Status::Ok();
}

}  // namespace

std::string_view ToString(SourceKind kind) {
  switch (kind) {
    case SourceKind::kLocal:
      return "local";
    case SourceKind::kPeer:
      return "peer";
    case SourceKind::kDurable:
      return "durable";
  }
  return "unknown";
}

Result<LoadPlan> NewestLoadableStep(const std::vector<StepCandidate>& candidates,
                                    const TierHoldings& holdings, const Membership& membership,
                                    std::string_view reader) {
  if (!reader.empty() && !membership.Contains(reader)) {
    return InvalidArgument("reader node " + Q(reader) + " is not in the current membership (" +
                           membership.Describe() +
                           "); pass a member's node id, or \"\" for a reader without a memory tier");
  }
  std::vector<const StepCandidate*> order;
  order.reserve(candidates.size());
  for (const StepCandidate& c : candidates) {
    TC_RETURN_IF_ERROR(CheckCandidate(c));
    order.push_back(&c);
  }
  std::sort(order.begin(), order.end(),
            [](const StepCandidate* a, const StepCandidate* b) { return a->step > b->step; });
  for (size_t i = 1; i < order.size(); ++i) {
    if (order[i - 1]->step == order[i]->step) {
      return InvalidArgument("step " + std::to_string(order[i]->step) +
                             " is listed twice among the candidates; pass one candidate per step");
    }
  }
  LoadPlan plan;
  for (const StepCandidate* c : order) {
    const std::string step = "step " + std::to_string(c->step);
    if (c->objects.empty()) {
      plan.skipped.push_back(step + ": its manifest lists no objects");
      continue;
    }
    StepView view(*c, holdings, membership, reader);
    std::vector<ObjectSource> sources;
    size_t missing = 0;
    const StepObject* first_missing = nullptr;
    for (const StepObject& o : c->objects) {
      std::optional<ObjectSource> src = view.Source(o);
      if (src.has_value()) {
        sources.push_back(std::move(*src));
      } else if (missing++ == 0) {
        first_missing = &o;
      }
    }
    if (missing == 0) {
      plan.step = c->step;
      plan.sources = std::move(sources);
      return plan;
    }
    plan.skipped.push_back(step + ": " + std::to_string(missing) + " of " +
                           std::to_string(c->objects.size()) +
                           " objects are in no live memory and not durable, e.g. " + Q(first_missing->name) +
                           " (" + view.DescribeHolders(*first_missing) + ")");
  }
  if (order.empty()) {
    return NotFound("no committed step is known in any tier (memory of " + membership.Describe() +
                    ", or durable); there is nothing to restore");
  }
  constexpr size_t kShown = 5;
  std::string why;
  for (size_t i = 0; i < plan.skipped.size() && i < kShown; ++i)
    why += (i == 0 ? "" : "; ") + plan.skipped[i];
  if (plan.skipped.size() > kShown)
    why += "; and " + std::to_string(plan.skipped.size() - kShown) + " older steps";
  return NotFound(
      "no step is loadable with the current membership (" + membership.Describe() + "): " + why +
      ". Bring back an agent that holds the missing objects, or persist a step to the durable tier");
}

}  // namespace tierckpt::cluster
