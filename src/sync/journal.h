// journal.h — what sync has put on the remote, by local file version, kept
// in the local directory (<dir>/.tierckpt-sync/journal-<instance or "_">):
// one line per upload or download, "<size> <mtime ns> <path>". At start, a
// local file whose size and modification time match its line is on the
// remote as it is; one whose line differs was rewritten since (a "last.ckpt"
// saved again with the same size) and is uploaded again, which a comparison
// of sizes alone would miss. Without a line (new machine, wiped directory),
// sync compares sizes with the remote.
//
// The file is appended to as files move (flushed with fdatasync by Sync()),
// and rewritten compactly (temporary file + rename) at open. A damaged line
// is ignored (the file is then compared by size). The directory .tierckpt-sync
// is never mirrored. Not thread-safe: the caller serializes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "sync/blob_store.h"
#include "tierckpt/status.h"

namespace tierckpt::sync {

struct FileVersion {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion&) const = default;
};

// The version of a local file now; kNotFound if absent.
Result<FileVersion> VersionOf(const std::string& path);

// The line format the journal and the remote index (remote_index.h) share:
// "<size> <mtime ns> <path>\n" (the journal writes size -1 for a deletion).
std::string VersionLine(std::string_view path, int64_t size, int64_t mtime_ns);
// Parses one such line, without its '\n': false unless it holds two
// decimal numbers and a non-empty path, each after one space.
bool ParseVersionLine(const std::string& line, int64_t* size, int64_t* mtime_ns, std::string* path);

class Journal {
 public:
  // Loads (and compacts) the journal of `instance` in dir.
  static Result<Journal> Open(const std::string& dir, const std::string& instance);

  // The recorded version of path, or nullptr.
  const FileVersion* Find(const std::string& path) const;
  // Records path as on the remote at version v (appended; durable after Sync).
  Status Record(const std::string& path, const FileVersion& v);
  void Forget(const std::string& path);  // deleted remotely (recorded as size -1 on disk)
  Status Sync();

 private:
  Journal(std::string file, UniqueFd fd, std::map<std::string, FileVersion> entries)
      : file_(std::move(file)), fd_(std::move(fd)), entries_(std::move(entries)) {}
  Status Append(const std::string& line);

  std::string file_;
  UniqueFd fd_;
  std::map<std::string, FileVersion> entries_;
};

}  // namespace tierckpt::sync
