// mounts.h — which mounted file system holds a path, and its options
// (libmount, from util-linux: it parses /proc/self/mountinfo, escapes
// included).
//
// The agent reads it once at start for its --root, to say whether the
// memory tier's tmpfs hands out transparent huge pages (`huge=` of a tmpfs
// mount, tmpfs(5)): with 4 KiB pages a save copies into 512× more page-table
// entries than with 2 MiB ones, which the save's speed shows
// (docs/agent.md, "Huge pages for the memory tier").
//
// Errors: kNotFound when no mount holds path (path not absolute or gone),
// kInternal when the mount table cannot be read. Thread-safe: no state.
#pragma once

#include <string>

#include "tierckpt/status.h"

namespace tierckpt {

struct MountOfPath {
  std::string target;      // its mount point
  std::string fstype;      // "tmpfs", "ext4", ...
  std::string fs_options;  // the file system's own options ("rw,size=8g,huge=within_size")
};

// The mount whose mount point is the longest prefix of path (followed
// through symbolic links by the caller's realpath, not here).
Result<MountOfPath> FindMount(const std::string& path);

// For a tmpfs: its huge= mode ("never" when the option is absent, tmpfs's
// default), e.g. "within_size", "always", "advise". "" for any other file
// system.
std::string TmpfsHugePages(const MountOfPath& mount);

}  // namespace tierckpt
