#include "tier/layout.h"

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "tierckpt/manifest.h"

namespace tierckpt::agent {

std::string Layout::LockPath() const { return JoinPath(root_, kLockFileName); }
std::string Layout::NamespacesDir() const { return JoinPath(root_, kNamespacesDirName); }
std::string Layout::PoolDir() const { return JoinPath(root_, kPoolDirName); }
std::string Layout::TrashDir() const { return JoinPath(root_, kTrashDirName); }

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

Status RemovePlantedEntry(int dir_fd, const std::string& name, const std::string& path,
                          std::string_view expected) {
  Result<DirEntry> e = StatAt(dir_fd, name, path);
  std::string what = e.ok() ? std::string(EntryTypeName(e->type)) : "entry";
  if (e.ok() && e->type == EntryType::kSymlink) what += " (to " + LinkTargetAt(dir_fd, name) + ")";
  Status removed = RemoveTreeAt(dir_fd, name, path);
  std::string done = removed.ok() ? "removed it" : "could not remove it: " + removed.ToString();
  if (e.ok() && e->type == EntryType::kSymlink) done += " as a link, its target untouched";
  Status warning =
      FailedPrecondition(path + " is a " + what + " where " + std::string(expected) +
                         " was expected; tierckptd never follows links under its root and " + done);
  Log(LogLevel::kWarn, "root_safety")
      .Kv("path", path)
      .Kv("found", what)
      .Kv("expected", expected)
      .Kv("action", done);
  return warning;
}

Result<UniqueFd> OpenLayoutDir(int parent_fd, const std::string& name, const std::string& path) {
  TC_ASSIGN_OR_RETURN(DirEntry e, StatAt(parent_fd, name, path));
  if (e.type != EntryType::kMissing && e.type != EntryType::kDirectory) {
    RemovePlantedEntry(parent_fd, name, path, "a directory of tierckptd's layout").IgnoreError();
  }
  return MakeDirAt(parent_fd, name, 0700, path);
}

Result<std::optional<UniqueFd>> OpenExistingLayoutDir(int parent_fd, const std::string& name,
                                                      const std::string& path, std::string_view expected) {
  TC_ASSIGN_OR_RETURN(DirEntry e, StatAt(parent_fd, name, path));
  if (e.type == EntryType::kMissing) return std::optional<UniqueFd>();
  if (e.type != EntryType::kDirectory) {
    RemovePlantedEntry(parent_fd, name, path, expected).IgnoreError();
    return std::optional<UniqueFd>();
  }
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenDirAt(parent_fd, name, path));
  return std::optional<UniqueFd>(std::move(fd));
}

}  // namespace tierckpt::agent
