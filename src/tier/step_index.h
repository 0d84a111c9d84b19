// step_index.h — the memory tier's index of steps and its retention and
// eviction policy, as decisions over the index alone.
//
// Owns the StepStates (tier/step_state.h) of every (namespace, step) in
// memory. Its policy methods only read the index and say what to do (which
// step to evict, which to drop or recheck for retention, what is kept and
// why); the caller (MemoryTier) carries out the decision: it drops steps,
// which moves their files (tier/tier_files.h) outside its lock. No method
// touches a file, so the policy is tested without any (step_index_test.cc).
//
// Thread-compatible: MemoryTier guards its StepIndex with its mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tier/step_state.h"

namespace tierckpt::agent {

using StepRef = std::pair<std::string, uint64_t>;

// Who needs room: a write may evict any evictable step; a restore (a read)
// only steps with a durable copy.
enum class SpaceFor { kWrite, kRestore };

struct PruneResult {
  std::vector<std::pair<std::string, uint64_t>> evicted;
  std::vector<std::pair<std::string, uint64_t>> kept_pending;  // persistence not done yet
  // Recorded durable, kept until the durable copy is seen (also in
  // kept_pending): ConfirmDurable after checking it, then Prune again.
  std::vector<std::pair<std::string, uint64_t>> rechecking;
};

// What retention decided for one namespace: the caller drops `drop` and
// queues `recheck` for the persister (kQueued + durable_recheck + hook).
struct RetentionPlan {
  std::vector<uint64_t> drop;
  std::vector<uint64_t> recheck;
  std::vector<uint64_t> pinned;  // would be dropped but a pin holds them: retried on the last unpin
};

class StepIndex {
 public:
  using Namespaces = std::map<std::string, NamespaceState, std::less<>>;

  // has_durable: a durable tier is configured (restores evict only durable
  // steps; durable steps are rechecked before retention drops them).
  explicit StepIndex(bool has_durable = false) : has_durable_(has_durable) {}
  StepIndex(StepIndex&&) = default;
  StepIndex& operator=(StepIndex&&) = default;

  // ---- The index ----
  StepState* Find(std::string_view ns, uint64_t step) const;
  // The step of that instance, nullptr when gone or replaced since.
  StepState* FindInstance(std::string_view ns, uint64_t step, uint64_t instance) const;
  // Adds (replacing none: the caller checked Find) and returns the entry.
  StepState* Insert(std::string_view ns, uint64_t step, std::unique_ptr<StepState> state);
  // Takes the entry out; *ns_emptied tells whether its namespace went with
  // it (the caller may then remove the namespace's dir). nullptr if absent.
  std::unique_ptr<StepState> Remove(std::string_view ns, uint64_t step, bool* ns_emptied);
  bool HasNamespace(std::string_view ns) const { return namespaces_.find(ns) != namespaces_.end(); }
  // Steps being written or restored (not committed), every namespace.
  size_t WritingSteps() const;
  size_t CommittedSteps() const;
  // The namespace of the committed step whose files these are, if any.
  std::optional<std::string> CommittedNamespaceOf(const StepFiles* files) const;
  // Numbers recovered steps oldest created first (commit_seq from *next_seq).
  void OrderByCreation(uint64_t* next_seq);
  const Namespaces& namespaces() const { return namespaces_; }
  Namespaces& namespaces() { return namespaces_; }

  // ---- Policy (decisions only) ----
  // Persist queued, running or failed: asked to be durable, not durable yet.
  static bool AwaitsDurable(const StepState& s);
  // Committed, unpinned, not awaiting durability, not the namespace's newest
  // committed step; for a restore (with a durable tier) durable only.
  bool Evictable(const NamespaceState& nss, const StepState& s, SpaceFor purpose) const;
  // The step to evict next: of the oldest evictable step of each namespace,
  // the oldest commit. nullopt when nothing may be evicted.
  std::optional<StepRef> PickEviction(SpaceFor purpose) const;
  // Retention of ns keeping the newest `keep` committed steps (at least 1).
  // protect: a step kept this time even if retention would drop it.
  // caller_checks_durable: durable steps not confirmed are listed in
  // result->rechecking only, not in plan.recheck. result may be null.
  RetentionPlan PlanRetention(const std::string& ns, uint32_t keep, PruneResult* result,
                              std::optional<uint64_t> protect, bool caller_checks_durable) const;
  // Why nothing more can be evicted (steps awaiting durability), for the
  // kResourceExhausted message; at most 8 listed.
  std::string KeptSteps() const;

 private:
  bool has_durable_;
  Namespaces namespaces_;
};

}  // namespace tierckpt::agent
