// inotify.cc — see inotify.h.
#include "os/inotify.h"

#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tierckpt {

Result<Inotify> Inotify::Open() {
  UniqueFd fd(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("inotify_init1 (raise fs.inotify.max_user_instances?)");
  return Inotify(std::move(fd));
}

Result<int> Inotify::AddWatch(const std::string& path, uint32_t mask) {
  const int wd = ::inotify_add_watch(fd_.get(), path.c_str(), mask);
  if (wd >= 0) return wd;
  const int err = errno;
  Status s =
      ErrnoStatus("watching " + path + (err == ENOSPC ? " (raise fs.inotify.max_user_watches)" : ""), err);
  if (err == ENOTDIR) return NotFound(s.message());
  return s;
}

void Inotify::RemoveWatch(int wd) { ::inotify_rm_watch(fd_.get(), wd); }

Result<std::vector<Inotify::Event>> Inotify::ReadEvents(std::string_view what) {
  std::vector<Event> out;
  alignas(inotify_event) char buf[64 * 1024];
  ssize_t n;
  do {
    n = ::read(fd_.get(), buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return out;
  if (n <= 0) return ErrnoStatus("reading inotify events of " + std::string(what));
  for (ssize_t off = 0; off < n;) {
    const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
    off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    // e->name is NUL-padded to e->len.
    out.push_back(Event{e->wd, e->mask, e->len > 0 ? std::string(e->name) : std::string()});
  }
  return out;
}

}  // namespace tierckpt
