#include "tier/step_index.h"

#include <algorithm>
#include <tuple>

namespace tierckpt::agent {

StepState* StepIndex::Find(std::string_view ns, uint64_t step) const {
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) return nullptr;
  auto st = it->second.steps.find(step);
  return st == it->second.steps.end() ? nullptr : st->second.get();
}

StepState* StepIndex::FindInstance(std::string_view ns, uint64_t step, uint64_t instance) const {
  StepState* s = Find(ns, step);
  return s != nullptr && s->instance == instance ? s : nullptr;
}

StepState* StepIndex::Insert(std::string_view ns, uint64_t step, std::unique_ptr<StepState> state) {
  StepState* raw = state.get();
  auto nit = namespaces_.find(ns);
  if (nit == namespaces_.end()) nit = namespaces_.emplace(std::string(ns), NamespaceState{}).first;
  nit->second.steps[step] = std::move(state);
  return raw;
}

std::unique_ptr<StepState> StepIndex::Remove(std::string_view ns, uint64_t step, bool* ns_emptied) {
  *ns_emptied = false;
  auto nit = namespaces_.find(ns);
  if (nit == namespaces_.end()) return nullptr;
  auto sit = nit->second.steps.find(step);
  if (sit == nit->second.steps.end()) return nullptr;
  std::unique_ptr<StepState> s = std::move(sit->second);
  nit->second.steps.erase(sit);
  if (nit->second.steps.empty()) {
    namespaces_.erase(nit);
    *ns_emptied = true;
  }
  return s;
}

size_t StepIndex::WritingSteps() const {
  size_t n = 0;
  for (const auto& [name, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) n += s->committed ? 0 : 1;
  }
  return n;
}

size_t StepIndex::CommittedSteps() const {
  size_t n = 0;
  for (const auto& [name, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) n += s->committed ? 1 : 0;
  }
  return n;
}

std::optional<std::string> StepIndex::CommittedNamespaceOf(const StepFiles* files) const {
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (s->files.get() == files) return s->committed ? std::optional<std::string>(ns) : std::nullopt;
    }
  }
  return std::nullopt;
}

void StepIndex::OrderByCreation(uint64_t* next_seq) {
  std::vector<std::tuple<uint64_t, std::string, uint64_t>> order;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) order.emplace_back(s->manifest.created_unix_ms, ns, step);
  }
  std::sort(order.begin(), order.end());
  for (const auto& [ms, ns, step] : order) Find(ns, step)->commit_seq = (*next_seq)++;
}

bool StepIndex::AwaitsDurable(const StepState& s) {
  // A durable step queued only to have its durable copy checked is still
  // recorded durable: the budget may evict it, as any durable step.
  if (s.persist == PersistState::kQueued && s.durable_recheck) return false;
  return s.persist == PersistState::kQueued || s.persist == PersistState::kRunning ||
         s.persist == PersistState::kFailed;
}

bool StepIndex::Evictable(const NamespaceState& nss, const StepState& s, SpaceFor purpose) const {
  if (!s.committed || s.files->pins > 0) return false;
  // Asked to be durable and not durable yet: memory holds the only copy.
  if (AwaitsDurable(s)) return false;
  // A read never destroys the only copy of another step.
  if (purpose == SpaceFor::kRestore && has_durable_ && s.persist != PersistState::kDurable &&
      !s.durable_recheck) {
    return false;
  }
  // Never the newest committed step of the namespace.
  for (auto it = nss.steps.rbegin(); it != nss.steps.rend(); ++it) {
    if (it->second->committed) return it->second.get() != &s;
  }
  return false;
}

std::optional<StepRef> StepIndex::PickEviction(SpaceFor purpose) const {
  const std::string* best_ns = nullptr;
  uint64_t best_step = 0;
  uint64_t best_seq = 0;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (!Evictable(nss, *s, purpose)) continue;
      if (best_ns == nullptr || s->commit_seq < best_seq) {
        best_ns = &ns;
        best_step = step;
        best_seq = s->commit_seq;
      }
      break;  // only the oldest evictable step of each namespace competes
    }
  }
  if (best_ns == nullptr) return std::nullopt;
  return StepRef{*best_ns, best_step};
}

RetentionPlan StepIndex::PlanRetention(const std::string& ns, uint32_t keep, PruneResult* result,
                                       std::optional<uint64_t> protect, bool caller_checks_durable) const {
  RetentionPlan plan;
  if (keep < 1) keep = 1;
  auto it = namespaces_.find(ns);
  if (it == namespaces_.end()) return plan;
  uint32_t kept = 0;
  for (auto st = it->second.steps.rbegin(); st != it->second.steps.rend(); ++st) {
    const StepState& s = *st->second;
    if (!s.committed) continue;
    if (kept < keep) {
      ++kept;
      continue;
    }
    if (AwaitsDurable(s) || s.durable_recheck) {  // memory may hold the only copy
      if (result != nullptr) result->kept_pending.emplace_back(ns, st->first);
      if (result != nullptr && s.durable_recheck) result->rechecking.emplace_back(ns, st->first);
      continue;
    }
    if (s.files->pins > 0) {  // retried on the last unpin
      plan.pinned.push_back(st->first);
      continue;
    }
    if (protect && *protect == st->first) continue;  // just committed out of order
    if (s.persist == PersistState::kDurable && has_durable_ && !s.durable_confirmed) {
      // Recorded durable, but the durable copy may have been deleted since:
      // the persister checks it (writing it again if it is gone) before
      // this copy, perhaps the last one, goes (FinishPersist re-applies).
      if (!caller_checks_durable) plan.recheck.push_back(st->first);
      if (result != nullptr) result->kept_pending.emplace_back(ns, st->first);
      if (result != nullptr) result->rechecking.emplace_back(ns, st->first);
      continue;
    }
    plan.drop.push_back(st->first);
  }
  return plan;
}

std::string StepIndex::KeptSteps() const {
  std::string out;
  size_t listed = 0;
  for (const auto& [ns, nss] : namespaces_) {
    for (const auto& [step, s] : nss.steps) {
      if (!s->committed || !AwaitsDurable(*s)) continue;
      if (++listed > 8) return out + ", ...";
      out += (out.empty() ? "" : ", ") + StepLabel(ns, step) + " " + PersistStateName(s->persist);
      if (s->persist == PersistState::kFailed) out += " to persist: " + s->persist_error.message();
    }
  }
  return out;
}

}  // namespace tierckpt::agent
