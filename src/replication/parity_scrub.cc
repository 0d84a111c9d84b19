// parity_scrub.cc — ParityHolder::Scrub (parity_holder.h, decision 160): the
// sealed groups' pieces re-hashed while the agent runs, as Recover checks
// them at start; a group that no longer checks out is dropped.
#include <fcntl.h>

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "replication/parity_holder.h"
#include "tier/layout.h"

namespace tierckpt::agent {

Result<ParityScrubReport> ParityHolder::Scrub(const std::function<bool()>& stopping) {
  std::vector<Key> sealed;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, g] : groups_) {
      if (g->sealed && !g->dropped) sealed.push_back(key);
    }
  }
  ParityScrubReport report;
  TC_ASSIGN_OR_RETURN(std::optional<UniqueFd> root, OpenRoot(/*create=*/false));
  if (!root.has_value()) return report;
  for (const auto& [ns, step, group] : sealed) {
    if (stopping && stopping()) break;
    const std::string dir = GroupDir(ns, step, group);
    Result<UniqueFd> fd = OpenBeneath(root->get(), GroupRel(ns, step, group), O_RDONLY | O_DIRECTORY, dir);
    Result<ec::ParityRecord> record = fd.ok() ? CheckGroup(fd->get(), ns, step, group)
                                              : Result<ec::ParityRecord>(fd.status());
    if (record.ok()) {
      ++report.groups;
      report.bytes += record->PieceLength() * record->parity.size();
      continue;
    }
    {
      // Dropped while it was checked (a delete, retention): its files went with it.
      MutexLock lock(&mu_);
      auto it = groups_.find(Key{ns, step, group});
      if (it == groups_.end() || !it->second->sealed || it->second->dropped) continue;
    }
    Log(LogLevel::kWarn, "parity_scrub_corrupt")
        .Kv("ns", ns)
        .Kv("step", step)
        .Kv("group", group)
        .Err(record.status());
    Result<bool> dropped = DropGroup(ns, step, group);
    report.dropped.push_back(Corruption(
        "parity group " + std::to_string(group) + " of " + ns + " step " + std::to_string(step) + " held here: " +
        record.status().message() +
        (dropped.ok() ? "; dropped, so its members count the step as missing these pieces (their next commit asks "
                        "the holders again)"
                      : "; dropping it failed: " + dropped.status().ToString())));
  }
  return report;
}

}  // namespace tierckpt::agent
