// namespace_policy.cc — see namespace_policy.h.
#include "tier/namespace_policy.h"

#include <algorithm>

namespace tierckpt::agent {

std::string NamespacePolicy::ToString() const {
  return "keep_memory=" + std::to_string(keep_memory) + " keep_durable=" + std::to_string(keep_durable) +
         " persist_every=" + std::to_string(persist_every);
}

uint32_t EffectiveKeepMemory(uint32_t agent_keep, const NamespacePolicy& declared) {
  if (declared.keep_memory == 0) return agent_keep;
  return agent_keep == 0 ? declared.keep_memory : std::min(agent_keep, declared.keep_memory);
}

uint32_t EffectiveKeepDurable(uint32_t agent_keep, const NamespacePolicy& declared) {
  if (declared.keep_durable == 0) return agent_keep;
  return agent_keep == 0 ? declared.keep_durable : std::min(agent_keep, declared.keep_durable);
}

bool PersistsStep(uint64_t step, bool asked, uint64_t agent_every, const NamespacePolicy& declared) {
  return asked || (agent_every > 0 && step % agent_every == 0) ||
         (declared.persist_every > 0 && step % declared.persist_every == 0);
}

Status NamespacePolicies::Declare(const std::string& ns, const NamespacePolicy& policy, uint64_t conn,
                                  std::string who) {
  if (policy.Empty()) return Status::Ok();
  MutexLock lock(&mu_);
  auto it = by_ns_.find(ns);
  if (it == by_ns_.end()) {
    by_ns_.emplace(ns, Entry{policy, {conn}, std::move(who)});
    return Status::Ok();
  }
  Entry& e = it->second;
  if (e.policy == policy) {
    e.conns.insert(conn);
    return Status::Ok();
  }
  if (!e.conns.empty() && !(e.conns.size() == 1 && e.conns.count(conn) == 1)) {
    return FailedPrecondition("namespace " + ns + " already has the policy " + e.policy.ToString() +
                              ", declared by " + e.who + " over a connection still open; " + who +
                              " declares " + policy.ToString() +
                              ": give every writer of the namespace the same keep_last, durable_keep and "
                              "persist_every (CheckpointConfig), or use another namespace");
  }
  e = Entry{policy, {conn}, std::move(who)};
  return Status::Ok();
}

void NamespacePolicies::Release(uint64_t conn) {
  MutexLock lock(&mu_);
  for (auto& [ns, e] : by_ns_) e.conns.erase(conn);
}

NamespacePolicy NamespacePolicies::Get(std::string_view ns) const {
  MutexLock lock(&mu_);
  auto it = by_ns_.find(ns);
  return it == by_ns_.end() ? NamespacePolicy{} : it->second.policy;
}

std::map<std::string, NamespacePolicy> NamespacePolicies::All() const {
  MutexLock lock(&mu_);
  std::map<std::string, NamespacePolicy> out;
  for (const auto& [ns, e] : by_ns_) out.emplace(ns, e.policy);
  return out;
}

}  // namespace tierckpt::agent
