// tier_io.h — the directory-fd file calls of the memory tier (tier/tier_files.h).
//
// Each call works beneath an open directory fd, never following a symbolic
// link on the way (as OpenBeneath in os/files.h), so that a file meant for
// one directory lands in that directory even if its path has since been
// given to another (a dropped step's .partial dir renamed aside while a
// creator was still at work). `path` is only for messages.
//
// Thread-safe (no shared state); errors name the path and the call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"

namespace tierckpt {

// Creates the regular file `rel` (it may contain '/': missing directories
// on the way are made, mode 0700) beneath dir_fd, exclusively (kAlreadyExists
// if anything is there), opened O_RDWR, mode 0600 whatever the umask, sized
// to exactly size bytes. On failure no file is left at rel (directories it
// made stay).
Result<UniqueFd> CreateFileBeneath(int dir_fd, std::string_view rel, uint64_t size, const std::string& path);

// Renames the file at `from` to `rel` beneath dir_fd (directories on the way
// made as CreateFileBeneath does), replacing a file there.
Status RenameBeneath(const std::string& from, int dir_fd, std::string_view rel, const std::string& path);

// Removes the directory `name` of dir_fd if it is empty; ok when it is
// missing or not empty (the caller only tidies up).
Status RemoveDirIfEmptyAt(int dir_fd, const std::string& name, const std::string& path);
// The same for a path (its last component is not followed).
Status RemoveDirIfEmpty(const std::string& path);

}  // namespace tierckpt
