#include "tier/tier_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.h"
#include "os/files.h"
#include "os/fs_stat.h"
#include "os/tier_io.h"

namespace tierckpt::agent {

void FileJobs::Append(FileJobs&& o) {
  auto move_all = [](auto& to, auto& from) {
    for (auto& x : from) to.push_back(std::move(x));
    from.clear();
  };
  move_all(recycles, o.recycles);
  move_all(trash, o.trash);
  move_all(unlink_segments, o.unlink_segments);
  move_all(namespace_rmdirs, o.namespace_rmdirs);
  move_all(remove_trees, o.remove_trees);
  move_all(release_paths, o.release_paths);
}

Result<UniqueFd> TierFiles::MakeStepDir(const std::string& dir) const {
  Status made;
  for (int attempt = 0; attempt < 3; ++attempt) {
    TC_RETURN_IF_ERROR(RemoveTree(dir));
    made = MakeDirs(dir, 0700);
    // ENOENT: the namespace dir, empty, was removed between its mkdir and
    // ours (a drop of the namespace's last step tidying up): make it again.
    if (made.ok() || made.code() != Code::kNotFound) break;
  }
  TC_RETURN_IF_ERROR(made);
  return OpenDirNoFollow(dir);
}

Result<UniqueFd> TierFiles::CreateObjectFile(int step_dir_fd, const std::string& step_dir,
                                             std::string_view name, uint64_t size) const {
  return CreateFileBeneath(step_dir_fd, name, size, Layout::ObjectPath(step_dir, name));
}

Result<UniqueFd> TierFiles::PlaceSegment(const std::string& seg_path, uint64_t seg_size, int step_dir_fd,
                                         const std::string& step_dir, std::string_view name, uint64_t size,
                                         uint64_t* size_now) const {
  *size_now = seg_size;
  // O_NOFOLLOW: resize and hand out the segment, never what a link in its place names.
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(seg_path, O_RDWR | O_NOFOLLOW));
  if (seg_size != size) {
    TC_RETURN_IF_ERROR(TruncateFd(
        fd.get(), size, "resize pool segment " + seg_path + " to " + std::to_string(size) + " bytes"));
    *size_now = size;
  }
  TC_RETURN_IF_ERROR(RenameBeneath(seg_path, step_dir_fd, name, Layout::ObjectPath(step_dir, name)));
  return fd;
}

Result<bool> TierFiles::ReserveFile(int fd, uint64_t size, const std::string& what) const {
  if (size == 0) return false;
  static const uint64_t kPage = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  // A failed fstat only costs the shortcut: fallocate decides then.
  Result<FileStat> st = StatOpenFd(fd, "fstat object " + what);
  if (st.ok() && st->allocated_bytes == (size + kPage - 1) / kPage * kPage) return false;
  const std::string& root = layout_->root();
  Status reserved =
      AllocateFileRange(fd, 0, size, "reserving " + std::to_string(size) + " bytes for object " + what + " in " + root);
  if (reserved.ok()) return true;
  if (reserved.code() == Code::kResourceExhausted) {  // ENOSPC (or a quota)
    return ResourceExhausted(
        "the filesystem of the memory tier (" + root + ") has no room left for object " + what + " (" +
        std::to_string(size) +
        " bytes), although the agent's budget does: other "
        "programs filled the mount after the agent started (DataLoader or NCCL segments in "
        "/dev/shm?); free space there, give the agent a mount of its own (--root), or lower "
        "--memory-budget to what the mount can hold");
  }
  return reserved;
}

Status TierFiles::WriteStepRecords(const std::string& partial, const Manifest& manifest,
                                   bool persist_marker) {
  Status st = WriteFileAtomic(Layout::ManifestPath(partial), manifest.ToJson(), /*durable=*/false);
  if (st.ok() && persist_marker) st = WriteFileAtomic(Layout::MarkerPath(partial), "", false);
  if (!st.ok()) RemoveStepRecords(partial);
  return st;
}

Status TierFiles::RewriteManifest(const std::string& dir, const Manifest& manifest) {
  return WriteFileAtomic(Layout::ManifestPath(dir), manifest.ToJson(), /*durable=*/false)
      .WithContext("rewriting the manifest of " + StepLabel(manifest.ns, manifest.step));
}

void TierFiles::RemoveStepRecords(const std::string& partial) {
  // So that the .partial dir never looks committed; the caller's error is the answer.
  RemoveFile(Layout::ManifestPath(partial), IfMissing::kOk).IgnoreError();
  RemoveFile(Layout::MarkerPath(partial), IfMissing::kOk).IgnoreError();
}

Status TierFiles::Publish(const std::string& partial, const std::string& final_dir) const {
  Status st = RenamePath(partial, final_dir);
  if (!st.ok()) RemoveStepRecords(partial);
  return st;
}

void TierFiles::Unlink(const std::string& path) const {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return;
  // Unlinked: a kept mapping would pin the file's pages.
  if (S_ISREG(st.st_mode)) mappings_->Forget(KeyOf(st));
  if (Status s = RemoveFile(path, IfMissing::kOk); !s.ok())
    Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(s);
}

void TierFiles::Recycle(const RecycleJob& job, FileOutcomes* out) const {
  if (job.files_of != nullptr) {
    // Creators finish in a create or a rename; none starts (the step is out of the index).
    for (int n = job.files_of->creating.load(); n != 0; n = job.files_of->creating.load()) {
      job.files_of->creating.wait(n);
    }
  }
  std::string dir = job.dir;
  if (!job.aside.empty()) {
    // Out of the layout first: the step's name is free for its next instance.
    Status st = RenamePath(job.dir, job.aside);
    if (st.ok()) dir = job.aside;
  }
  for (const RecycledFile& f : job.files) {
    const std::string path = Layout::ObjectPath(dir, f.name);
    if (f.pool_id) {
      out->recycled_recorded += f.recorded_size;
      Result<DirEntry> e = StatNoFollow(path);
      if (e.ok() && e->type == EntryType::kRegular && e->size > 0) {
        const std::string seg =
            JoinPath(layout_->PoolDir(), std::string(kPoolSegmentPrefix) + std::to_string(*f.pool_id));
        Status moved = RenamePath(path, seg);  // same inode: its read mapping stays valid
        if (moved.ok()) {
          out->adopted.push_back({*f.pool_id, e->size, f.affinity});
          continue;
        }
        Log(LogLevel::kWarn, "recycle").Kv("path", path).Err(moved);
      }
    }
    Unlink(path);
  }
  if (job.keep_dir) return;
  // No object file is left in the directory: only its removal remains.
  if (Status s = RemoveTree(dir); !s.ok()) Log(LogLevel::kWarn, "recycle").Kv("dir", dir).Err(s);
}

FileOutcomes TierFiles::Run(FileJobs jobs) const {
  FileOutcomes out;
  for (const std::string& seg : jobs.unlink_segments) {
    mappings_->ForgetPath(seg);
    if (Status s = RemoveFile(seg, IfMissing::kOk, "unlink pool segment"); !s.ok())
      Log(LogLevel::kWarn, "recycle").Kv("path", seg).Err(s);
  }
  for (TrashJob& t : jobs.trash) {
    Status st = MakeDirs(layout_->TrashDir(), 0700);
    if (st.ok()) st = RenamePath(t.dir, t.trash);
    if (!st.ok()) Log(LogLevel::kError, "drop").Kv("dir", t.dir).Err(st);
    out.trashed.emplace_back(std::move(t.files), st);
  }
  for (const RecycleJob& r : jobs.recycles) {
    Recycle(r, &out);
    if (r.reserved) out.released.push_back(r.dir);
  }
  for (const std::string& dir : jobs.remove_trees) {
    if (Status s = RemoveTree(dir); !s.ok()) Log(LogLevel::kWarn, "recycle").Kv("dir", dir).Err(s);
  }
  for (const std::string& dir : jobs.namespace_rmdirs) {
    if (Status s = RemoveDirIfEmpty(dir); !s.ok()) Log(LogLevel::kWarn, "drop").Kv("dir", dir).Err(s);
  }
  // A trashed dir is released by the tier as it records the move (its path
  // stays reserved when the move failed: the files are still there).
  for (std::string& p : jobs.release_paths) out.released.push_back(std::move(p));
  return out;
}

}  // namespace tierckpt::agent
