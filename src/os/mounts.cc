// mounts.cc — see mounts.h.
#include "os/mounts.h"

#include <libmount.h>

#include <memory>

namespace tierckpt {
namespace {

struct TableUnref {
  void operator()(libmnt_table* t) const { mnt_unref_table(t); }
};
using Table = std::unique_ptr<libmnt_table, TableUnref>;

std::string OrEmpty(const char* s) { return s == nullptr ? std::string() : std::string(s); }

}  // namespace

Result<MountOfPath> FindMount(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return NotFound("no mount holds " + path + ": the path is not absolute");
  }
  Table table(mnt_new_table());
  if (table == nullptr) return Internal("reading the mount table: out of memory");
  if (int rc = mnt_table_parse_mtab(table.get(), nullptr); rc != 0) {
    return Internal("reading the mount table (/proc/self/mountinfo) failed (libmount error " +
                    std::to_string(rc) + ")");
  }
  libmnt_fs* fs = mnt_table_find_mountpoint(table.get(), path.c_str(), MNT_ITER_BACKWARD);
  if (fs == nullptr) return NotFound("no mount holds " + path);
  return MountOfPath{OrEmpty(mnt_fs_get_target(fs)), OrEmpty(mnt_fs_get_fstype(fs)),
                     OrEmpty(mnt_fs_get_fs_options(fs))};
}

std::string TmpfsHugePages(const MountOfPath& mount) {
  if (mount.fstype != "tmpfs") return "";
  char* value = nullptr;
  size_t size = 0;
  if (mnt_optstr_get_option(mount.fs_options.c_str(), "huge", &value, &size) != 0 || value == nullptr) {
    return "never";
  }
  return std::string(value, size);
}

}  // namespace tierckpt
