#include "agent/layout.h"

#include "common/names.h"
#include "os/files.h"
#include "tierckpt/manifest.h"

namespace tierckpt::agent {

std::string Layout::LockPath() const { return JoinPath(root_, kLockFileName); }
std::string Layout::NamespacesDir() const { return JoinPath(root_, "ns"); }
std::string Layout::PoolDir() const { return JoinPath(root_, "pool"); }
std::string Layout::TrashDir() const { return JoinPath(root_, "trash"); }

std::string Layout::NamespaceDir(std::string_view ns) const { return JoinPath(NamespacesDir(), ns); }

std::string Layout::StepDir(std::string_view ns, uint64_t step) const {
  return JoinPath(NamespaceDir(ns), StepDirName(step));
}

std::string Layout::PartialDir(std::string_view ns, uint64_t step) const {
  return StepDir(ns, step) + std::string(kPartialSuffix);
}

std::string Layout::TrashEntry(uint64_t id) const { return JoinPath(TrashDir(), std::to_string(id)); }

std::string Layout::ObjectPath(std::string_view step_dir, std::string_view name) {
  return JoinPath(step_dir, name);
}

std::string Layout::ManifestPath(std::string_view step_dir) { return JoinPath(step_dir, kManifestName); }

std::string Layout::MarkerPath(std::string_view step_dir) { return JoinPath(step_dir, kPersistMarkerName); }

}  // namespace tierckpt::agent
