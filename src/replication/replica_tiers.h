// replica_tiers.h — the replicas this agent holds for other nodes: one
// MemoryTier per origin node, rooted at <root>/replicas/<origin>, created at
// the first replica of that origin and recovered at start like the agent's
// own tier (the same layout under its own root, so a SIGKILLed agent keeps
// the replicas it had).
//
// Each origin's tier gets the agent's budget and keep_last and no durable
// tier (replicas are not persisted from here yet). With R replicas and ring
// placement an agent holds replicas of R-1 origins, so its tmpfs use is
// bounded by R × --memory-budget (docs/replication.md).
//
// Origins' roots are under the agent's root and are made and walked without
// following symbolic links: a link in place of <root>/replicas or of an
// origin's root is logged and removed as a link (tier/layout.h).
//
// Thread-safe. Tiers live until the ReplicaTiers is destroyed.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "common/work_queue.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {

class ReplicaTiers {
 public:
  // base: the agent's own tier options (root, budget, keep_last);
  // verifier must outlive this.
  ReplicaTiers(MemoryTierOptions base, WorkQueue* verifier);

  // <base.root>/replicas
  const std::string& dir() const { return dir_; }

  // Recovers the tier of every origin found under dir(). Errors of single
  // tiers are returned together; the others still load.
  Status RecoverAll();
  // The origin's tier; with create, makes (and recovers) it when absent,
  // else kNotFound. Validates origin as a node id.
  Result<MemoryTier*> Get(std::string_view origin, bool create);
  std::vector<std::string> Origins() const;
  // Shutdown() on every tier.
  void Shutdown();

 private:
  Result<MemoryTier*> CreateLocked(const std::string& origin) REQUIRES(mu_);

  const MemoryTierOptions base_;
  WorkQueue* const verifier_;
  const std::string dir_;

  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<MemoryTier>, std::less<>> tiers_ GUARDED_BY(mu_);
  bool shut_down_ GUARDED_BY(mu_) = false;
};

}  // namespace tierckpt::agent
