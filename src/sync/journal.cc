// journal.cc — see journal.h.
#include "sync/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

#include "os/files.h"
#include "os/fs_stat.h"

namespace tierckpt::sync {
namespace {

constexpr size_t kMaxJournalBytes = 256u << 20;

}  // namespace

std::string VersionLine(std::string_view path, int64_t size, int64_t mtime_ns) {
  return std::to_string(size) + " " + std::to_string(mtime_ns) + " " + std::string(path) + "\n";
}

bool ParseVersionLine(const std::string& line, int64_t* size, int64_t* mtime_ns, std::string* path) {
  char* p = nullptr;
  const long long n = std::strtoll(line.c_str(), &p, 10);
  if (p == line.c_str() || *p != ' ') return false;
  char* q = nullptr;
  const long long t = std::strtoll(p + 1, &q, 10);
  if (q == p + 1 || *q != ' ' || q[1] == '\0') return false;
  *size = n;
  *mtime_ns = t;
  path->assign(q + 1);
  return true;
}

Result<FileVersion> VersionOf(const std::string& path) {
  TC_ASSIGN_OR_RETURN(FileStat st, StatFile(path, Follow::kYes, IfMissing::kOk));
  if (st.type == EntryType::kMissing) return NotFound("no file " + path);
  return FileVersion{st.size, st.mtime_ns};
}

Result<Journal> Journal::Open(const std::string& dir, const std::string& instance) {
  const std::string state = JoinPath(dir, kStateDir);
  TC_RETURN_IF_ERROR(MakeDirs(state, 0755).WithContext("creating sync's state directory"));
  const std::string file = JoinPath(state, "journal-" + (instance.empty() ? std::string("_") : instance));
  std::map<std::string, FileVersion> entries;
  if (Result<std::string> text = ReadFileToString(file, kMaxJournalBytes); text.ok()) {
    size_t start = 0;
    while (start < text->size()) {
      size_t end = text->find('\n', start);
      if (end == std::string::npos) break;  // a torn last line: ignored
      const std::string line = text->substr(start, end - start);
      start = end + 1;
      int64_t size = 0;
      int64_t mtime = 0;
      std::string path;
      if (!ParseVersionLine(line, &size, &mtime, &path)) continue;
      if (size < 0) {
        entries.erase(path);
      } else {
        entries[path] = FileVersion{static_cast<uint64_t>(size), mtime};
      }
    }
  }
  // Compact: the live entries only, written aside and renamed over.
  std::string compact;
  for (const auto& [path, v] : entries) compact += VersionLine(path, static_cast<int64_t>(v.size), v.mtime_ns);
  TC_RETURN_IF_ERROR(WriteFileAtomic(file, compact, true).WithContext("rewriting the sync journal " + file));
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(file, O_WRONLY | O_APPEND | O_CLOEXEC));
  return Journal(file, std::move(fd), std::move(entries));
}

const FileVersion* Journal::Find(const std::string& path) const {
  auto it = entries_.find(path);
  return it == entries_.end() ? nullptr : &it->second;
}

Status Journal::Append(const std::string& line) {
  const ssize_t n = ::write(fd_.get(), line.data(), line.size());
  if (n != static_cast<ssize_t>(line.size())) return ErrnoStatus("appending to the sync journal " + file_);
  return Status::Ok();
}

Status Journal::Record(const std::string& path, const FileVersion& v) {
  entries_[path] = v;
  return Append(VersionLine(path, static_cast<int64_t>(v.size), v.mtime_ns));
}

void Journal::Forget(const std::string& path) {
  if (entries_.erase(path) != 0) Append(VersionLine(path, -1, 0)).IgnoreError();
}

Status Journal::Sync() {
  if (::fdatasync(fd_.get()) != 0) return ErrnoStatus("syncing the sync journal " + file_);
  return Status::Ok();
}

}  // namespace tierckpt::sync
