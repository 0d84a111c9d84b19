// blob_store.cc — ValidateRelativePath, ListTree, sync's file transfers over
// the storage bottom, and OpenBlobStore (blob_store.h).
#include "sync/blob_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/names.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/fs_stat.h"
#include "s3/s3_config.h"
#include "store/fs_blob_store.h"
#include "store/s3_blob_store.h"

namespace tierckpt::sync {
namespace {

constexpr size_t kMaxPath = 1024;
constexpr size_t kMaxComponent = 255;

// The remote as sync names it: a directory, so Describe() ends with '/'.
// Every other call goes to the medium as is.
class DirectoryRemote final : public BlobStore {
 public:
  explicit DirectoryRemote(std::unique_ptr<BlobStore> base)
      : base_(std::move(base)), describe_(base_->Describe() + "/") {}

  std::string Describe() const override { return describe_; }
  int Concurrency() const override { return base_->Concurrency(); }
  bool KeepsTemporaries() const override { return base_->KeepsTemporaries(); }
  Status Put(std::string_view path, const void* data, size_t size, const BlobPutOptions& options) override {
    return base_->Put(path, data, size, options);
  }
  Status PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options) override {
    return base_->PutFile(path, fd, size, options);
  }
  Status PutMany(const std::vector<BlobBytes>& blobs, const std::function<bool()>& cancelled,
                 bool check_tree) override {
    return base_->PutMany(blobs, cancelled, check_tree);
  }
  Status Read(std::string_view path, uint64_t offset, void* dst, size_t size) override {
    return base_->Read(path, offset, dst, size);
  }
  Status ReadToFile(std::string_view path, int fd, uint64_t size) override {
    return base_->ReadToFile(path, fd, size);
  }
  Result<std::string> ReadSmall(std::string_view path, size_t max_bytes) override {
    return base_->ReadSmall(path, max_bytes);
  }
  Result<uint64_t> Size(std::string_view path) override { return base_->Size(path); }
  Result<BlobListing> List(std::string_view prefix, bool one_level) override {
    return base_->List(prefix, one_level);
  }
  Status SyncParents(const std::vector<std::string>& paths) override { return base_->SyncParents(paths); }
  Status Delete(const std::vector<std::string>& paths) override { return base_->Delete(paths); }
  Status DeleteBelow(std::string_view prefix) override { return base_->DeleteBelow(prefix); }
  Result<int> AbortUploads(std::string_view prefix,
                           const std::function<bool(std::string_view)>& which) override {
    return base_->AbortUploads(prefix, which);
  }

 private:
  const std::unique_ptr<BlobStore> base_;
  const std::string describe_;
};

}  // namespace

Status ValidateRelativePath(std::string_view path) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("file path " + QuoteForMessage(path) + " " + why +
                           "; sync mirrors relative paths of printable ASCII components (no \".\", \"..\" or "
                           "\"\\\\\"), at most 1,024 bytes");
  };
  if (path.empty()) return bad("is empty");
  if (path.size() > kMaxPath) return bad("is " + std::to_string(path.size()) + " bytes long");
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view c = path.substr(start, end - start);
    if (c.empty()) return bad("has an empty component (a leading, trailing or double '/')");
    if (c == "." || c == "..") return bad("contains \".\" or \"..\"");
    if (c.size() > kMaxComponent) return bad("has a component longer than 255 bytes");
    for (unsigned char ch : c) {
      if (ch < 0x20 || ch >= 0x7f || ch == '\\')
        return bad("contains a control, non-ASCII or '\\' character");
    }
    start = end + 1;
  }
  return Status::Ok();
}

bool IsSyncOwn(std::string_view rel) {
  return rel.find(kPartialSuffix) != std::string_view::npos || rel == kStateDir ||
         (rel.size() > kStateDir.size() && rel.substr(0, kStateDir.size()) == kStateDir &&
          rel[kStateDir.size()] == '/');
}

Result<std::vector<BlobInfo>> ListRemote(BlobStore& remote, std::vector<std::string>* bad) {
  TC_ASSIGN_OR_RETURN(BlobListing listed, remote.List(""));
  std::vector<BlobInfo> out;
  out.reserve(listed.blobs.size());
  for (BlobInfo& b : listed.blobs) {
    if (IsSyncOwn(b.path)) continue;
    if (!ValidateRelativePath(b.path).ok()) {
      if (bad != nullptr) bad->push_back(b.path);
      continue;
    }
    out.push_back(std::move(b));
  }
  return out;  // sorted by List
}

Status PutFile(BlobStore& remote, std::string_view path, const std::string& local) {
  TC_RETURN_IF_ERROR(ValidateRelativePath(path));
  const std::string what = "uploading " + local + " to " + remote.Describe() + std::string(path);
  TC_ASSIGN_OR_RETURN(UniqueFd in, OpenFile(local, O_RDONLY | O_CLOEXEC));
  TC_ASSIGN_OR_RETURN(FileInfo info, StatFd(in.get(), local));
  return remote.PutFile(path, in.get(), info.size, BlobPutOptions{.check_tree = false}).WithContext(what);
}

Status GetFile(BlobStore& remote, std::string_view path, uint64_t size, const std::string& local,
               std::optional<int64_t> mtime_ns) {
  TC_RETURN_IF_ERROR(ValidateRelativePath(path));
  TC_RETURN_IF_ERROR(MakeDirs(DirName(local), 0755));
  const std::string tmp = local + std::string(kPartialSuffix) + "." + std::to_string(::getpid());
  return WriteFileVia(tmp, local, 0644, /*sync_data=*/true,
                      [&](int out) -> Status {
                        TC_RETURN_IF_ERROR(TruncateFd(out, size, "sizing " + tmp));
                        if (size != 0) TC_RETURN_IF_ERROR(remote.ReadToFile(path, out, size));
                        if (!mtime_ns) return Status::Ok();
                        return SetMtimeFd(out, *mtime_ns, "setting the modification time of " + tmp);
                      })
      .WithContext("downloading " + remote.Describe() + std::string(path));
}

Result<std::vector<BlobInfo>> ListTree(const std::string& dir, std::vector<std::string>* bad) {
  std::vector<BlobInfo> out;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(dir, ec), end;
  if (ec) return IoError("listing the local directory " + dir + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return IoError("listing the local directory " + dir + ": " + ec.message());
    if (!it->is_regular_file(ec) || it->is_symlink(ec)) continue;
    std::string rel = std::filesystem::relative(it->path(), dir, ec).generic_string();
    if (IsSyncOwn(rel)) continue;
    if (!ValidateRelativePath(rel).ok()) {
      if (bad != nullptr) bad->push_back(rel);
      continue;
    }
    out.push_back({rel, static_cast<uint64_t>(it->file_size(ec))});
  }
  std::sort(out.begin(), out.end(), [](const BlobInfo& a, const BlobInfo& b) { return a.path < b.path; });
  return out;
}

Status RestoreDirTimes(const std::string& root, const std::vector<std::string>& rel_files) {
  std::set<std::string> dirs;
  for (const std::string& f : rel_files) {
    for (size_t slash = f.rfind('/'); slash != std::string::npos && slash != 0;
         slash = f.rfind('/', slash - 1)) {
      if (!dirs.insert(f.substr(0, slash)).second) break;  // it and those above it are in already
    }
  }
  std::vector<std::string> order(dirs.begin(), dirs.end());
  auto depth = [](const std::string& d) { return std::count(d.begin(), d.end(), '/'); };
  std::stable_sort(order.begin(), order.end(),
                   [&](const std::string& a, const std::string& b) { return depth(a) > depth(b); });
  for (const std::string& rel : order) {
    const std::string dir = JoinPath(root, rel);
    Result<std::vector<std::string>> entries = ListDir(dir);
    if (!entries.ok() && entries.status().code() == Code::kNotFound) continue;
    if (!entries.ok()) return entries.status().WithContext("restoring the modification time of " + dir);
    int64_t newest = 0;
    bool any = false;
    for (const std::string& name : *entries) {
      if (name.find(kPartialSuffix) != std::string::npos) continue;
      TC_ASSIGN_OR_RETURN(FileStat st, StatFile(JoinPath(dir, name), Follow::kNo, IfMissing::kOk));
      if (st.type == EntryType::kMissing) continue;
      newest = any ? std::max(newest, st.mtime_ns) : st.mtime_ns;
      any = true;
    }
    if (!any) continue;
    TC_RETURN_IF_ERROR(SetMtimePath(dir, newest, "setting the modification time of the directory " + dir));
  }
  return Status::Ok();
}

Result<std::unique_ptr<BlobStore>> OpenBlobStore(std::string_view url) {
  if (url.empty()) return InvalidArgument("the remote is empty; give s3://bucket/prefix or a directory");
  if (url.substr(0, 5) == "s3://") {
    TC_ASSIGN_OR_RETURN(s3::S3Config config, s3::ParseS3Url(url));
    TC_ASSIGN_OR_RETURN(std::unique_ptr<S3BlobStore> s3, S3BlobStore::Open(config));
    return std::unique_ptr<BlobStore>(std::make_unique<DirectoryRemote>(std::move(s3)));
  }
  std::string dir(url.substr(0, 7) == "file://" ? url.substr(7) : url);
  if (dir.find("://") != std::string::npos) {
    return InvalidArgument("remote " + QuoteForMessage(url) +
                           " has an unknown scheme; give s3://bucket/prefix or "
                           "a directory (file:///path or /path)");
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) return InvalidArgument("remote " + QuoteForMessage(url) + ": " + ec.message());
  FsBlobOptions options;
  options.temp_suffix = std::string(kPartialSuffix);  // recognised (IsSyncOwn), never mirrored
  options.file_mode = 0644;
  options.remove_empty_dirs = true;  // sync mirrors files: a deleted checkpoint-N leaves no empty directory
  auto fs = FsBlobStore::Open(abs.string(), options);
  if (!fs.ok()) return fs.status().WithContext("opening the remote directory " + abs.string());
  return std::unique_ptr<BlobStore>(std::make_unique<DirectoryRemote>(std::move(fs).value()));
}

}  // namespace tierckpt::sync
