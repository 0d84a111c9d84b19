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
//
// Pure functions over a root path; thread-safe. Callers validate names with
// common/names.h before building paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tierckpt::agent {

inline constexpr std::string_view kLockFileName = "agent.lock";
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

}  // namespace tierckpt::agent
