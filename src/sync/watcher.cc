// watcher.cc — see watcher.h.
#include "sync/watcher.h"

#include <filesystem>

#include "os/files.h"

namespace tierckpt::sync {
namespace {

constexpr uint32_t kDirMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ONLYDIR;

bool InOrUnder(const std::string& path, const std::string& dir) {
  return dir.empty() || path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                                        path[dir.size()] == '/');
}

}  // namespace

Result<std::unique_ptr<DirectoryWatcher>> DirectoryWatcher::Create(const std::string& root) {
  TC_ASSIGN_OR_RETURN(Inotify inotify, Inotify::Open());
  std::unique_ptr<DirectoryWatcher> w(new DirectoryWatcher(root, std::move(inotify)));
  TC_RETURN_IF_ERROR(w->AddTree(""));
  return w;
}

std::string DirectoryWatcher::Join(const std::string& dir, const std::string& name) const {
  return dir.empty() ? name : dir + "/" + name;
}

Status DirectoryWatcher::AddTree(const std::string& rel) {
  const std::string full = rel.empty() ? root_ : JoinPath(root_, rel);
  Result<int> wd = inotify_.AddWatch(full, kDirMask);
  if (!wd.ok()) {
    if (wd.status().code() == Code::kNotFound) return Status::Ok();  // gone meanwhile
    return wd.status();
  }
  dirs_[*wd] = rel;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(full, ec)) {
    if (entry.is_directory(ec) && !entry.is_symlink(ec)) {
      TC_RETURN_IF_ERROR(AddTree(Join(rel, entry.path().filename().string())));
    }
  }
  return Status::Ok();
}

void DirectoryWatcher::DropTree(const std::string& rel) {
  for (auto it = dirs_.begin(); it != dirs_.end();) {
    if (InOrUnder(it->second, rel)) {
      inotify_.RemoveWatch(it->first);
      it = dirs_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<std::vector<WatchEvent>> DirectoryWatcher::Read() {
  std::vector<WatchEvent> out;
  for (;;) {
    // One read(2) at a time: a watch AddTree adds here reports in a later read.
    TC_ASSIGN_OR_RETURN(std::vector<Inotify::Event> events, inotify_.ReadEvents(root_));
    if (events.empty()) return out;
    for (const Inotify::Event& e : events) {
      if (e.mask & IN_Q_OVERFLOW) {
        out.push_back({WatchEvent::Kind::kOverflow, ""});
        continue;
      }
      if (e.mask & IN_IGNORED) {
        dirs_.erase(e.wd);
        continue;
      }
      auto dir = dirs_.find(e.wd);
      if (dir == dirs_.end() || e.name.empty()) continue;
      const std::string path = Join(dir->second, e.name);
      const bool is_dir = (e.mask & IN_ISDIR) != 0;
      if (is_dir && (e.mask & (IN_CREATE | IN_MOVED_TO))) {
        TC_RETURN_IF_ERROR(AddTree(path));
        out.push_back({WatchEvent::Kind::kDirAppeared, path});
      } else if (is_dir && (e.mask & (IN_DELETE | IN_MOVED_FROM))) {
        DropTree(path);
        out.push_back({WatchEvent::Kind::kDirGone, path});
      } else if (!is_dir && (e.mask & (IN_CLOSE_WRITE | IN_MOVED_TO))) {
        out.push_back({WatchEvent::Kind::kFileReady, path});
      } else if (!is_dir && (e.mask & (IN_DELETE | IN_MOVED_FROM))) {
        out.push_back({WatchEvent::Kind::kFileGone, path});
      }
    }
  }
}

}  // namespace tierckpt::sync
