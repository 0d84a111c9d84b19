// replica_tiers.cc — see replica_tiers.h.
#include "replication/replica_tiers.h"

#include "cluster/address.h"
#include "common/log.h"
#include "os/files.h"
#include "tier/layout.h"

namespace tierckpt::agent {

ReplicaTiers::ReplicaTiers(MemoryTierOptions base, WorkQueue* verifier)
    : base_(std::move(base)), verifier_(verifier), dir_(JoinPath(base_.root, kReplicasDirName)) {}

Result<MemoryTier*> ReplicaTiers::CreateLocked(const std::string& origin) {
  MemoryTierOptions o = base_;
  o.root = JoinPath(dir_, origin);
  o.has_durable = false;
  o.persist_every = 0;
  o.node_id = origin;
  {
    // <root>/replicas/<origin>, made without following links: a link in
    // place of either is removed as a link (layout.h).
    Result<UniqueFd> made = OpenDirNoFollow(base_.root);
    if (made.ok()) made = OpenLayoutDir(made->get(), std::string(kReplicasDirName), dir_);
    if (made.ok()) made = OpenLayoutDir(made->get(), origin, o.root);
    if (!made.ok()) return made.status().WithContext("creating the replica root of node " + origin);
  }
  auto tier = std::make_unique<MemoryTier>(o, verifier_);
  TC_ASSIGN_OR_RETURN(RecoveryReport report, tier->Recover());
  for (const Status& e : report.errors) {
    Log(LogLevel::kWarn, "replica_recovery").Kv("origin", origin).Err(e);
  }
  if (report.committed_steps > 0) {
    Log(LogLevel::kInfo, "replicas_recovered")
        .Kv("origin", origin)
        .Kv("steps", static_cast<uint64_t>(report.committed_steps))
        .Kv("bytes", report.bytes);
  }
  if (shut_down_) tier->Shutdown();
  MemoryTier* raw = tier.get();
  tiers_.emplace(origin, std::move(tier));
  return raw;
}

Status ReplicaTiers::RecoverAll() {
  // Walked without following links: a link as the replicas dir or as an
  // origin's root is removed as a link and never becomes a tier's root.
  TC_ASSIGN_OR_RETURN(UniqueFd root, OpenDirNoFollow(base_.root));
  const std::string name(kReplicasDirName);
  TC_ASSIGN_OR_RETURN(DirEntry top, StatAt(root.get(), name, dir_));
  if (top.type == EntryType::kMissing) return Status::Ok();
  if (top.type != EntryType::kDirectory) {
    RemovePlantedEntry(root.get(), name, dir_, "the replicas directory").IgnoreError();
    return Status::Ok();
  }
  TC_ASSIGN_OR_RETURN(UniqueFd dir, OpenDirAt(root.get(), name, dir_));
  TC_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDirAt(dir.get(), dir_));
  std::vector<std::string> origins;
  for (const DirEntry& e : entries) {
    if (e.type == EntryType::kSymlink) {
      RemovePlantedEntry(dir.get(), e.name, JoinPath(dir_, e.name), "the replica root of a node")
          .IgnoreError();
    } else if (e.type == EntryType::kDirectory) {
      origins.push_back(e.name);
    }
  }
  Status first = Status::Ok();
  MutexLock lock(&mu_);
  for (const std::string& origin : origins) {
    if (Status v = cluster::ValidateNodeId(origin); !v.ok()) {
      Log(LogLevel::kWarn, "replica_dir_ignored").Kv("dir", JoinPath(dir_, origin)).Err(v);
      continue;
    }
    if (tiers_.count(origin) != 0) continue;
    Result<MemoryTier*> t = CreateLocked(origin);
    if (!t.ok() && first.ok()) first = t.status();
  }
  return first;
}

Result<MemoryTier*> ReplicaTiers::Get(std::string_view origin, bool create) {
  TC_RETURN_IF_ERROR(cluster::ValidateNodeId(origin));
  MutexLock lock(&mu_);
  if (auto it = tiers_.find(origin); it != tiers_.end()) return it->second.get();
  if (!create) return NotFound("this agent holds no replica of node " + std::string(origin));
  if (shut_down_) return Unavailable("tierckptd is shutting down");
  return CreateLocked(std::string(origin));
}

std::vector<std::string> ReplicaTiers::Origins() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [origin, tier] : tiers_) out.push_back(origin);
  return out;
}

void ReplicaTiers::Shutdown() {
  MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [origin, tier] : tiers_) tier->Shutdown();
}

}  // namespace tierckpt::agent
