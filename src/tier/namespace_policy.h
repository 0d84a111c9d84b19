// namespace_policy.h — the save policy a writer declares for its namespace
// (SetPolicy, docs/protocol.md): how many committed steps memory keeps, how
// many durable steps the durable tier keeps, and the persist cadence; and the
// one place that combines it with the agent's own flags (decision 118).
//
// The agent's flags (--keep-last, --durable-keep, --persist-every, and an
// HTTP namespace's steps_retained) are its defaults; a declared policy
// combines with them as the writers' own Prune after each commit did before:
//   memory keep   the smaller of the agent's and the declared (0 = none declared)
//   durable keep  the smaller of the nonzero ones (0 = keep all)
//   persist       a step on either cadence, or one a commit asks for
// so a writer can make retention stricter and persistence more frequent, and
// never undo the agent's.
//
// A namespace has at most one declared policy. A declaration equal to it joins
// it; a different one replaces it only when no other connection that declared
// it is still open (its only declarer may change it), and is refused otherwise
// (kFailedPrecondition naming both policies and who declared the standing one). A policy outlives its
// declarers' connections (a persist they queued finishes, and its durable
// retention applies, after the writer is gone) until it is replaced or the
// agent stops; writers declare again on every new connection.
//
// Thread-safe: one leaf mutex, never held across a call out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

struct NamespacePolicy {
  uint32_t keep_memory = 0;    // committed steps kept in memory; 0 = none declared
  uint32_t keep_durable = 0;   // durable steps kept; 0 = none declared
  uint64_t persist_every = 0;  // persist steps whose number % N == 0; 0 = none declared

  bool operator==(const NamespacePolicy&) const = default;
  bool Empty() const { return keep_memory == 0 && keep_durable == 0 && persist_every == 0; }
  // "keep_memory=2 keep_durable=0 persist_every=5"
  std::string ToString() const;
};

// The combination rules above (pure).
uint32_t EffectiveKeepMemory(uint32_t agent_keep, const NamespacePolicy& declared);
uint32_t EffectiveKeepDurable(uint32_t agent_keep, const NamespacePolicy& declared);
bool PersistsStep(uint64_t step, bool asked, uint64_t agent_every, const NamespacePolicy& declared);

class NamespacePolicies {
 public:
  // Declares policy for ns on connection conn (>= 1); who describes the
  // declarer for errors ("python pid 12 writer job-1"). An empty policy is
  // accepted and changes nothing.
  Status Declare(const std::string& ns, const NamespacePolicy& policy, uint64_t conn, std::string who)
      EXCLUDES(mu_);
  // conn closed: its declarations no longer hold their policies in place.
  void Release(uint64_t conn) EXCLUDES(mu_);
  // The declared policy of ns (empty when none).
  NamespacePolicy Get(std::string_view ns) const EXCLUDES(mu_);
  std::map<std::string, NamespacePolicy> All() const EXCLUDES(mu_);

 private:
  struct Entry {
    NamespacePolicy policy;
    std::set<uint64_t> conns;  // open connections that declared it
    std::string who;           // its first declarer
  };
  mutable Mutex mu_;
  std::map<std::string, Entry, std::less<>> by_ns_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
