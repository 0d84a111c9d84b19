// layout.h — where the memory tier keeps things under its tmpfs root.
//
//   <root>/agent.lock                         flock'ed by the running agent; holds its pid
//   <root>/ns/<ns>/step_<10d>/<object...>     a committed step; `_tierckpt_manifest.json`
//                                             is written last, inside the step dir
//   <root>/ns/<ns>/step_<10d>/_tierckpt_persist
//                                             marker: persistence requested, not yet durable
//   <root>/ns/<ns>/step_<10d>.partial/...     a step being written (or restored)
//   <root>/pool/seg_<n>                       recycled segments (already faulted-in files)
//   <root>/trash/<n>/...                      dropped steps still read by an agent thread;
//                                             recycled into the pool once released
//   <root>/replicas/<origin>/...              replicas held for other nodes (replica_tiers.h)
//   <root>/parity/<ns>/step_<10d>/group_<g>/  parity pieces held for a group of an rs:K+M
//                                             cluster, record.json last (parity_holder.h)
//   <root>/parity_pool/seg_<n>                parity pieces being folded, and recycled ones
//                                             (replication/parity_piece_files.h)
//
// Layout: pure functions over a root path; thread-safe. Callers validate
// names with common/names.h before building paths.
//
// Nothing found under the root is trusted to be what the layout says
// (docs/agent.md, "Root directory safety"): whatever walks, recycles or
// removes there opens it from directory fds without following symbolic
// links (os/files.h), and a link found where a directory or file of the
// layout is expected is logged and removed as a link, its target untouched.
// OpenLayoutDir and RemovePlantedLink below are that rule for one entry.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr std::string_view kLockFileName = "agent.lock";
inline constexpr std::string_view kNamespacesDirName = "ns";
inline constexpr std::string_view kPoolDirName = "pool";
inline constexpr std::string_view kTrashDirName = "trash";
inline constexpr std::string_view kReplicasDirName = "replicas";
inline constexpr std::string_view kParityDirName = "parity";
inline constexpr std::string_view kParityPoolDirName = "parity_pool";
inline constexpr std::string_view kPersistMarkerName = "_tierckpt_persist";
inline constexpr std::string_view kPartialSuffix = ".partial";
inline constexpr std::string_view kPoolSegmentPrefix = "seg_";

class Layout {
 public:
  explicit Layout(std::string root) : root_(std::move(root)) {}

  const std::string& root() const { return root_; }
  std::string LockPath() const;
  std::string NamespacesDir() const;  // <root>/ns
  std::string PoolDir() const;        // <root>/pool
  std::string TrashDir() const;       // <root>/trash
  std::string NamespaceDir(std::string_view ns) const;
  std::string StepDir(std::string_view ns, uint64_t step) const;
  std::string PartialDir(std::string_view ns, uint64_t step) const;
  std::string TrashEntry(uint64_t id) const;
  // <step_dir>/<name>; name may contain '/'.
  static std::string ObjectPath(std::string_view step_dir, std::string_view name);
  static std::string ManifestPath(std::string_view step_dir);
  static std::string MarkerPath(std::string_view step_dir);

 private:
  std::string root_;
};

// Removes the entry `name` of dir_fd that is not what the layout expects
// there (`expected`, e.g. "a step directory"): a symbolic link is removed as
// a link, never followed; anything else with RemoveTreeAt. Logs what was
// found (a link with its target) and returns the warning as a
// kFailedPrecondition Status for the recovery report (ok-coded never).
Status RemovePlantedEntry(int dir_fd, const std::string& name, const std::string& path,
                          std::string_view expected);

// Opens the layout directory `name` inside parent_fd (the root, or the
// replicas dir), creating it with mode 0700 when absent. An entry there that
// is not a directory (a symbolic link above all) is removed as
// RemovePlantedEntry does and a fresh directory made in its place.
Result<UniqueFd> OpenLayoutDir(int parent_fd, const std::string& name, const std::string& path);

// Opens the layout directory `name` inside parent_fd when there is one:
// nullopt when absent, and nullopt when the entry is not a directory, which
// is then removed as RemovePlantedEntry does (`expected` names it). For walks
// that read or remove and must not create.
Result<std::optional<UniqueFd>> OpenExistingLayoutDir(int parent_fd, const std::string& name,
                                                      const std::string& path, std::string_view expected);

}  // namespace tierckpt::agent
