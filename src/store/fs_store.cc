#include "store/fs_store.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <mutex>
#include <set>
#include <utility>

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "store/store_common.h"

namespace tierckpt {
namespace {

using store_internal::LooksLikeTmpName;
using store_internal::ObjectLabel;
using store_internal::StepLabel;
using store_internal::TmpSuffix;
using store_internal::ValidateNamespaceFor;
using store_internal::ValidateObjectFor;
using store_internal::ValidateStepFor;

// Process-wide, so two stores on one base never pick the same tmp name.
std::atomic<uint64_t> g_tmp_counter{0};

Status Ctx(const Status& s, std::string_view op, const std::string& label) {
  if (s.ok()) return s;
  return s.WithContext(std::string(op) + " " + label);
}

template <typename T>
Result<T> Ctx(Result<T> r, std::string_view op, const std::string& label) {
  if (r.ok()) return r;
  return r.status().WithContext(std::string(op) + " " + label);
}

// Directory entries of `dir` that name step directories, with their steps.
// A missing or non-directory `dir` has none.
Result<std::vector<std::pair<uint64_t, std::string>>> StepDirsOf(const std::string& dir) {
  std::vector<std::pair<uint64_t, std::string>> out;
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(dir));
  if (!info.is_dir) return out;
  auto names = ListDir(dir);
  if (!names.ok()) {
    if (names.status().code() == Code::kNotFound) return out;  // removed meanwhile
    return names.status();
  }
  for (const std::string& n : *names) {
    uint64_t step = 0;
    if (!ParseStepDirName(n, &step)) continue;
    TC_ASSIGN_OR_RETURN(FileInfo s, StatPath(JoinPath(dir, n)));
    if (s.is_dir) out.emplace_back(step, n);
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<FsObjectStore>> FsObjectStore::Open(std::string_view base,
                                                           FsStoreOptions options) {
  if (base.find('\0') != std::string_view::npos) {
    return InvalidArgument("durable base " + QuoteForMessage(base) +
                           " contains a NUL byte; give a plain absolute path");
  }
  if (base.empty() || base.front() != '/') {
    return InvalidArgument("durable base " + QuoteForMessage(base) +
                           " is not an absolute path; FsObjectStore needs one such as /mnt/ckpt");
  }
  std::string norm = std::filesystem::path(base).lexically_normal().string();
  while (norm.size() > 1 && norm.back() == '/') norm.pop_back();
  Status made = MakeDirs(norm);
  if (made.code() == Code::kAlreadyExists) {
    return FailedPrecondition("durable base " + norm + " (or a parent) exists and is not a "
                              "directory; point the durable base at a directory");
  }
  if (!made.ok()) return made.WithContext("cannot create the durable base directory " + norm);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(norm));
  if (!info.is_dir) {
    return FailedPrecondition("durable base " + norm + " is not a directory; point the durable "
                              "base at a directory");
  }
  if (::access(norm.c_str(), W_OK | X_OK) != 0) {
    return FailedPrecondition(ErrnoStatus("durable base " + norm + " is not writable").message() +
                              "; fix its permissions or choose another directory");
  }
  return std::unique_ptr<FsObjectStore>(new FsObjectStore(std::move(norm), options));
}

FsObjectStore::FsObjectStore(std::string base, FsStoreOptions options)
    : base_(std::move(base)), options_(options), describe_("file://" + base_) {}

std::string FsObjectStore::Describe() const { return describe_; }

std::string FsObjectStore::NsDir(std::string_view ns) const { return JoinPath(base_, ns); }

std::string FsObjectStore::StepDir(std::string_view ns, uint64_t step) const {
  return JoinPath(NsDir(ns), StepDirName(step));
}

std::string FsObjectStore::ManifestPath(std::string_view ns, uint64_t step) const {
  return JoinPath(StepDir(ns, step), kManifestName);
}

std::string FsObjectStore::ObjectPath(std::string_view ns, uint64_t step,
                                      std::string_view name) const {
  return JoinPath(StepDir(ns, step), name);
}

std::shared_mutex& FsObjectStore::StepLock(std::string_view ns, uint64_t step) const {
  const size_t h =
      std::hash<std::string_view>()(ns) ^ (std::hash<uint64_t>()(step) * 0x9e3779b97f4a7c15ULL);
  return step_locks_[h % kLockStripes];
}

// ---- objects ----------------------------------------------------------------

Status FsObjectStore::PutObject(std::string_view ns, uint64_t step, std::string_view name,
                                const void* data, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("PutObject", describe_, ns, step, name));
  std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
  return Ctx(PutImpl(ns, step, name, data, size), "PutObject",
             ObjectLabel(describe_, ns, step, name));
}

Status FsObjectStore::PutImpl(std::string_view ns, uint64_t step, std::string_view name,
                              const void* data, size_t size) {
  TC_ASSIGN_OR_RETURN(FileInfo manifest, StatPath(ManifestPath(ns, step)));
  if (manifest.exists) {
    return FailedPrecondition("the step is committed and immutable; write to a new step");
  }
  const std::string path = ObjectPath(ns, step, name);
  Status made = MakeDirs(DirName(path));
  if (made.code() == Code::kAlreadyExists) {
    return FailedPrecondition("a parent of " + path + " is a file, not a directory (an object "
                              "of this step, or a foreign file in the durable base); an object "
                              "name cannot also be a directory");
  }
  TC_RETURN_IF_ERROR(made);
  TC_ASSIGN_OR_RETURN(FileInfo existing, StatPath(path));
  if (existing.exists && !existing.is_regular) {
    return FailedPrecondition(path + " is a directory holding other objects; an object name "
                              "cannot also be a directory");
  }
  const std::string tmp =
      path + TmpSuffix(static_cast<uint64_t>(::getpid()), g_tmp_counter.fetch_add(1));
  {
    TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC));
    Status s = PwriteAll(fd.get(), data, size, 0, tmp);
    if (s.ok() && options_.fsync && ::fsync(fd.get()) != 0) s = ErrnoStatus("fsync " + tmp);
    if (!s.ok()) {
      RemoveTree(tmp).IgnoreError();  // best effort; SweepUncommitted catches leftovers
      return s;
    }
  }
  Status renamed = RenamePath(tmp, path);
  if (!renamed.ok()) RemoveTree(tmp).IgnoreError();
  return renamed;
}

Status FsObjectStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name,
                                 uint64_t offset, void* dst, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObject", describe_, ns, step, name));
  return Ctx(ReadImpl(ns, step, name, offset, dst, size), "ReadObject",
             ObjectLabel(describe_, ns, step, name));
}

Result<UniqueFd> FsObjectStore::OpenRange(std::string_view ns, uint64_t step, std::string_view name,
                                           uint64_t offset, size_t size) {
  const std::string path = ObjectPath(ns, step, name);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  if (!info.exists || !info.is_regular) {
    return NotFound("no object file at " + path + "; it was never put or its step was deleted");
  }
  auto fd = OpenFile(path, O_RDONLY);
  if (!fd.ok() && fd.status().code() == Code::kNotFound) {
    return NotFound("no object file at " + path + "; its step was deleted meanwhile");
  }
  TC_RETURN_IF_ERROR(fd.status());
  struct stat st;
  if (::fstat(fd->get(), &st) != 0) return ErrnoStatus("stat " + path);
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (offset > file_size || size > file_size - offset) {
    return Corruption("file " + path + " is " + std::to_string(file_size) +
                      " bytes, shorter than the requested range [" + std::to_string(offset) + ", " +
                      std::to_string(offset) + " + " + std::to_string(size) +
                      "); the copy is truncated, restore the step from another tier");
  }
  return fd;
}

Status FsObjectStore::ReadImpl(std::string_view ns, uint64_t step, std::string_view name,
                               uint64_t offset, void* dst, size_t size) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenRange(ns, step, name, offset, size));
  return PreadExact(fd.get(), dst, size, offset, ObjectPath(ns, step, name));
}

Status FsObjectStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name,
                                       int fd, uint64_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObjectToFile", describe_, ns, step, name));
  if (fd < 0) return InvalidArgument("ReadObjectToFile: no destination file descriptor");
  const std::string label = ObjectLabel(describe_, ns, step, name);
  Result<UniqueFd> src = OpenRange(ns, step, name, 0, static_cast<size_t>(size));
  if (!src.ok()) return Ctx(src.status(), "ReadObjectToFile", label);
  // sendfile: the kernel copies page cache to page cache, no user copy and no
  // zeroed destination pages. It writes at fd's file offset, so start at 0.
  if (::lseek(fd, 0, SEEK_SET) != 0) {
    return Ctx(ErrnoStatus("seeking the restore destination to 0"), "ReadObjectToFile", label);
  }
  off_t in = 0;
  while (static_cast<uint64_t>(in) < size) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(size - static_cast<uint64_t>(in), 1u << 30));
    const ssize_t n = ::sendfile(fd, src->get(), &in, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && in == 0 && (errno == EINVAL || errno == ENOSYS)) {
      return ObjectStore::ReadObjectToFile(ns, step, name, fd, size);  // no sendfile here: map + pread
    }
    if (n < 0) {
      return Ctx(ErrnoStatus("copying " + ObjectPath(ns, step, name) + " into the restore destination at offset " +
                             std::to_string(in) + " (sendfile)"),
                 "ReadObjectToFile", label);
    }
    if (n == 0) {
      return Ctx(Corruption("file " + ObjectPath(ns, step, name) + " ended at " + std::to_string(in) +
                            " bytes while being read, short of " + std::to_string(size) +
                            "; it was truncated meanwhile, restore the step from another tier"),
                 "ReadObjectToFile", label);
    }
  }
  return Status::Ok();
}

Result<uint64_t> FsObjectStore::ObjectSize(std::string_view ns, uint64_t step,
                                           std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ObjectSize", describe_, ns, step, name));
  const std::string path = ObjectPath(ns, step, name);
  TC_ASSIGN_OR_RETURN(FileInfo info,
                      Ctx(StatPath(path), "ObjectSize", ObjectLabel(describe_, ns, step, name)));
  if (!info.exists || !info.is_regular) {
    return NotFound("ObjectSize " + ObjectLabel(describe_, ns, step, name) + ": no object file at " +
                    path + "; it was never put or its step was deleted");
  }
  return info.size;
}

// ---- commit -----------------------------------------------------------------

Status FsObjectStore::CommitStep(const Manifest& manifest) {
  TC_RETURN_IF_ERROR(ValidateStepFor("CommitStep", describe_, manifest.ns, manifest.step));
  const std::string label = StepLabel(describe_, manifest.ns, manifest.step);
  Status valid = manifest.Validate();
  if (!valid.ok()) return valid.WithContext("CommitStep " + label + ": the manifest is invalid");
  std::unique_lock<std::shared_mutex> lock(StepLock(manifest.ns, manifest.step));
  return Ctx(CommitImpl(manifest), "CommitStep", label);
}

Status FsObjectStore::CommitImpl(const Manifest& m) {
  const std::string manifest_path = ManifestPath(m.ns, m.step);
  TC_ASSIGN_OR_RETURN(FileInfo existing, StatPath(manifest_path));
  if (existing.exists) {
    return AlreadyExists("the step is already committed (" + manifest_path +
                         " exists); a step is committed once");
  }
  for (const ObjectEntry& e : m.objects) {
    const std::string path = ObjectPath(m.ns, m.step, e.name);
    TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
    if (!info.exists || !info.is_regular) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) + " is listed in the manifest "
                                "but was never put (no file " + path + "); put every object "
                                "before committing");
    }
    if (info.size != e.size) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) + " is " +
                                std::to_string(info.size) + " bytes at " + path +
                                " but the manifest says " + std::to_string(e.size) +
                                "; the put was incomplete, put it again");
    }
  }
  Status made = MakeDirs(StepDir(m.ns, m.step));
  if (made.code() == Code::kAlreadyExists) {  // a foreign file where a directory belongs
    return FailedPrecondition("cannot create the step directory: " + made.message());
  }
  TC_RETURN_IF_ERROR(made);
  if (options_.fsync) TC_RETURN_IF_ERROR(SyncStepDirs(m));
  Status s = WriteFileAtomic(manifest_path, m.ToJson(), options_.fsync, /*exclusive=*/true);
  if (s.code() == Code::kAlreadyExists) {
    return AlreadyExists("the step was committed concurrently by another writer (" +
                         manifest_path + " exists); a step is committed once");
  }
  return s;
}

// Makes the objects' directory entries durable before the manifest names
// them: every directory from each object's parent up to the base.
Status FsObjectStore::SyncStepDirs(const Manifest& m) {
  const std::string step_dir = StepDir(m.ns, m.step);
  std::set<std::string> dirs = {step_dir, NsDir(m.ns), base_};
  for (const ObjectEntry& e : m.objects) {
    for (std::string d = DirName(ObjectPath(m.ns, m.step, e.name));
         d.size() > step_dir.size() && dirs.insert(d).second; d = DirName(d)) {
    }
  }
  for (const std::string& d : dirs) TC_RETURN_IF_ERROR(FsyncPath(d));
  return Status::Ok();
}

Result<Manifest> FsObjectStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("ReadManifest", describe_, ns, step));
  return Ctx(ReadManifestImpl(ns, step), "ReadManifest", StepLabel(describe_, ns, step));
}

Result<Manifest> FsObjectStore::ReadManifestImpl(std::string_view ns, uint64_t step) {
  const std::string path = ManifestPath(ns, step);
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  if (!info.exists) {
    return NotFound("the step is not committed (no " + path +
                    "): absent, still being written, or deleted");
  }
  if (!info.is_regular) {
    return Corruption("manifest " + path + " is not a regular file; the step cannot be trusted "
                      "in this tier, restore it from another tier");
  }
  auto text = ReadFileToString(path, kMaxManifestBytes);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) {
      return NotFound("the step is not committed (" + path + " was deleted meanwhile)");
    }
    if (text.status().code() == Code::kResourceExhausted) {
      return Corruption("manifest " + text.status().message());
    }
    return text.status();
  }
  return store_internal::ParseStepManifest(*text, path, ns, step);
}

// ---- listing and deletion ---------------------------------------------------

Result<std::vector<uint64_t>> FsObjectStore::ListCommittedSteps(std::string_view ns) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("ListCommittedSteps", describe_, ns));
  const std::string label = describe_ + " namespace " + QuoteForMessage(ns);
  TC_ASSIGN_OR_RETURN(auto dirs, Ctx(StepDirsOf(NsDir(ns)), "ListCommittedSteps", label));
  std::vector<uint64_t> out;
  for (const auto& [step, dir] : dirs) {
    const std::string manifest = JoinPath(JoinPath(NsDir(ns), dir), kManifestName);
    TC_ASSIGN_OR_RETURN(FileInfo info, Ctx(StatPath(manifest), "ListCommittedSteps", label));
    if (info.exists) out.push_back(step);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<std::string>> FsObjectStore::ListNamespaces() {
  TC_ASSIGN_OR_RETURN(auto names, Ctx(ListDir(base_), "ListNamespaces", describe_));
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (!ValidateNamespace(n).ok()) continue;  // a foreign entry
    TC_ASSIGN_OR_RETURN(auto dirs, Ctx(StepDirsOf(NsDir(n)), "ListNamespaces", describe_));
    if (!dirs.empty()) out.push_back(n);
  }
  return out;
}

Status FsObjectStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("DeleteStep", describe_, ns, step));
  const std::string label = StepLabel(describe_, ns, step);
  std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
  const std::string dir = StepDir(ns, step);
  TC_ASSIGN_OR_RETURN(FileInfo info, Ctx(StatPath(dir), "DeleteStep", label));
  if (!info.is_dir) return Status::Ok();  // absent (or a foreign file we leave alone)
  // The manifest goes first, durably: from then on the step is invisible, and
  // a crash mid-removal leaves an uncommitted step for SweepUncommitted.
  TC_RETURN_IF_ERROR(Ctx(RemoveTree(ManifestPath(ns, step)), "DeleteStep", label));
  if (options_.fsync) TC_RETURN_IF_ERROR(Ctx(FsyncPath(dir), "DeleteStep", label));
  return Ctx(RemoveTree(dir), "DeleteStep", label);
}

Result<int> FsObjectStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("SweepUncommitted", describe_, ns));
  const std::string label = describe_ + " namespace " + QuoteForMessage(ns);
  TC_ASSIGN_OR_RETURN(auto dirs, Ctx(StepDirsOf(NsDir(ns)), "SweepUncommitted", label));
  int removed = 0;
  for (const auto& [step, dir] : dirs) {
    if (options.Skips(step)) continue;
    std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
    const std::string step_label = StepLabel(describe_, ns, step);
    TC_ASSIGN_OR_RETURN(FileInfo manifest,
                        Ctx(StatPath(ManifestPath(ns, step)), "SweepUncommitted", step_label));
    if (manifest.exists) {
      RemoveStrayTmpFiles(ns, step);
      continue;
    }
    TC_RETURN_IF_ERROR(Ctx(RemoveTree(StepDir(ns, step)), "SweepUncommitted", step_label));
    Log(LogLevel::kInfo, "store_swept_uncommitted_step")
        .Kv("store", describe_).Kv("ns", ns).Kv("step", step);
    ++removed;
  }
  return removed;
}

void FsObjectStore::RemoveStrayTmpFiles(std::string_view ns, uint64_t step) {
  auto manifest = ReadManifestImpl(ns, step);
  if (!manifest.ok()) {
    Log(LogLevel::kWarn, "store_sweep_skipped_step")
        .Kv("store", describe_).Kv("ns", ns).Kv("step", step).Err(manifest.status());
    return;
  }
  // Depth-first walk; `rel` is the path relative to the step directory.
  std::vector<std::string> pending = {""};
  while (!pending.empty()) {
    std::string rel = std::move(pending.back());
    pending.pop_back();
    const std::string dir = rel.empty() ? StepDir(ns, step) : JoinPath(StepDir(ns, step), rel);
    auto names = ListDir(dir);
    if (!names.ok()) continue;
    for (const std::string& n : *names) {
      const std::string child_rel = rel.empty() ? n : rel + "/" + n;
      auto info = StatPath(JoinPath(dir, n));
      if (!info.ok()) continue;
      if (info->is_dir) {
        pending.push_back(child_rel);
      } else if (LooksLikeTmpName(n) && manifest->Find(child_rel) == nullptr) {
        Status s = RemoveTree(JoinPath(dir, n));
        Log log(s.ok() ? LogLevel::kInfo : LogLevel::kWarn, "store_swept_tmp_file");
        log.Kv("store", describe_).Kv("ns", ns).Kv("step", step).Kv("file", child_rel);
        if (!s.ok()) log.Err(s);
      }
    }
  }
}

}  // namespace tierckpt
