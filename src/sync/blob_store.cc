// blob_store.cc — ValidateRelativePath, the filesystem and S3 blob stores,
// and OpenBlobStore (blob_store.h).
#include "sync/blob_store.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "common/names.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/mapping.h"
#include "s3/s3_client.h"
#include "s3/s3_config.h"
#include "s3/s3_open.h"

namespace tierckpt::sync {
namespace {

constexpr size_t kMaxPath = 1024;
constexpr size_t kMaxComponent = 255;

std::string Temporary(const std::string& local) {
  return local + std::string(kPartialSuffix) + "." + std::to_string(::getpid());
}

// Copies size bytes from src_fd to a new file at dest (temp + fsync + rename).
Status CopyInto(int src_fd, uint64_t size, const std::string& dest, const std::string& what) {
  TC_RETURN_IF_ERROR(MakeDirs(DirName(dest), 0755));
  const std::string tmp = Temporary(dest);
  return WriteFileVia(tmp, dest, 0644, /*sync_data=*/true, [&](int out) -> Status {
    off_t in = 0;
    while (static_cast<uint64_t>(in) < size) {
      const ssize_t n = ::sendfile(out, src_fd, &in, std::min<uint64_t>(size - in, 1u << 30));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("copying " + what + " to " + tmp);
      if (n == 0) {
        return Corruption(what + " ended at " + std::to_string(in) + " bytes, short of " +
                          std::to_string(size));
      }
    }
    return Status::Ok();
  });
}

class FsBlobStore final : public BlobStore {
 public:
  explicit FsBlobStore(std::string root) : root_(std::move(root)) {}

  std::string Describe() const override { return "file://" + root_ + "/"; }

  Result<std::vector<BlobInfo>> List(std::vector<std::string>* bad) override { return ListTree(root_, bad); }

  Status PutFile(std::string_view path, const std::string& local) override {
    TC_RETURN_IF_ERROR(ValidateRelativePath(path));
    TC_ASSIGN_OR_RETURN(UniqueFd in, OpenFile(local, O_RDONLY | O_CLOEXEC));
    TC_ASSIGN_OR_RETURN(FileInfo info, StatFd(in.get(), local));
    return CopyInto(in.get(), info.size, JoinPath(root_, path), local)
        .WithContext("uploading " + local + " to " + Describe() + std::string(path));
  }

  Status GetFile(std::string_view path, uint64_t size, const std::string& local) override {
    TC_RETURN_IF_ERROR(ValidateRelativePath(path));
    const std::string src = JoinPath(root_, path);
    TC_ASSIGN_OR_RETURN(UniqueFd in, OpenFile(src, O_RDONLY | O_CLOEXEC));
    return CopyInto(in.get(), size, local, src).WithContext("downloading " + Describe() + std::string(path));
  }

  Status Delete(const std::vector<std::string>& paths) override {
    for (const std::string& p : paths) {
      TC_RETURN_IF_ERROR(ValidateRelativePath(p));
      const std::string full = JoinPath(root_, p);
      TC_RETURN_IF_ERROR(RemoveFile(full, IfMissing::kOk, "deleting"));  // already gone counts as deleted
    }
    return Status::Ok();
  }

 private:
  const std::string root_;
};

class S3BlobStore final : public BlobStore {
 public:
  S3BlobStore(s3::S3Config config, s3::S3ClientParts parts)
      : base_(config.prefix.empty() ? "" : config.prefix + "/"),
        describe_(s3::DescribeS3(config) + (config.prefix.empty() ? "" : "/")),
        client_(std::move(config), std::move(parts.transport), std::move(parts.signer)) {}

  std::string Describe() const override { return describe_; }

  Result<std::vector<BlobInfo>> List(std::vector<std::string>* bad) override {
    TC_ASSIGN_OR_RETURN(s3::ListResult listed, client_.ListObjects(base_));
    std::vector<BlobInfo> out;
    for (const auto& o : listed.objects) {
      std::string rel = o.key.substr(base_.size());
      if (!ValidateRelativePath(rel).ok()) {
        if (bad != nullptr) bad->push_back(o.key);
        continue;
      }
      out.push_back({std::move(rel), o.size});
    }
    std::sort(out.begin(), out.end(), [](const BlobInfo& a, const BlobInfo& b) { return a.path < b.path; });
    return out;
  }

  Status PutFile(std::string_view path, const std::string& local) override {
    TC_RETURN_IF_ERROR(ValidateRelativePath(path));
    TC_ASSIGN_OR_RETURN(UniqueFd in, OpenFile(local, O_RDONLY | O_CLOEXEC));
    TC_ASSIGN_OR_RETURN(FileInfo info, StatFd(in.get(), local));
    const std::string key = base_ + std::string(path);
    if (info.size == 0) return client_.Upload(key, "", 0);
    TC_ASSIGN_OR_RETURN(Mapping map, Mapping::Map(in.get(), static_cast<size_t>(info.size),
                                                  Mapping::Access::kReadOnly, /*populate=*/false, local));
    return client_.Upload(key, map.data(), map.size());
  }

  Status GetFile(std::string_view path, uint64_t size, const std::string& local) override {
    TC_RETURN_IF_ERROR(ValidateRelativePath(path));
    TC_RETURN_IF_ERROR(MakeDirs(DirName(local), 0755));
    const std::string tmp = Temporary(local);
    return WriteFileVia(tmp, local, 0644, /*sync_data=*/true, [&](int out) -> Status {
      TC_RETURN_IF_ERROR(TruncateFd(out, size, "sizing " + tmp));
      if (size == 0) return Status::Ok();
      return client_.Download(base_ + std::string(path), 0, s3::ByteSink::File(out, 0),
                              static_cast<size_t>(size));
    });
  }

  Status Delete(const std::vector<std::string>& paths) override {
    std::vector<std::string> keys;
    for (const std::string& p : paths) {
      TC_RETURN_IF_ERROR(ValidateRelativePath(p));
      keys.push_back(base_ + p);
    }
    return keys.empty() ? Status::Ok() : client_.DeleteObjects(keys);
  }

 private:
  const std::string base_;
  const std::string describe_;
  s3::S3Client client_;
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
      if (ch < 0x20 || ch >= 0x7f || ch == '\\') return bad("contains a control, non-ASCII or '\\' character");
    }
    start = end + 1;
  }
  return Status::Ok();
}

bool IsSyncOwn(std::string_view rel) {
  return rel.find(kPartialSuffix) != std::string_view::npos || rel == kStateDir ||
         (rel.size() > kStateDir.size() && rel.substr(0, kStateDir.size()) == kStateDir && rel[kStateDir.size()] == '/');
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

Result<std::unique_ptr<BlobStore>> OpenBlobStore(std::string_view url) {
  if (url.empty()) return InvalidArgument("the remote is empty; give s3://bucket/prefix or a directory");
  if (url.substr(0, 5) == "s3://") {
    TC_ASSIGN_OR_RETURN(s3::S3Config config, s3::ParseS3Url(url));
    TC_ASSIGN_OR_RETURN(s3::S3ClientParts parts, s3::MakeS3ClientParts(config));
    return std::unique_ptr<BlobStore>(std::make_unique<S3BlobStore>(std::move(config), std::move(parts)));
  }
  std::string dir(url.substr(0, 7) == "file://" ? url.substr(7) : url);
  if (dir.find("://") != std::string::npos) {
    return InvalidArgument("remote " + QuoteForMessage(url) + " has an unknown scheme; give s3://bucket/prefix or "
                           "a directory (file:///path or /path)");
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) return InvalidArgument("remote " + QuoteForMessage(url) + ": " + ec.message());
  std::string root = abs.string();
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  TC_RETURN_IF_ERROR(MakeDirs(root, 0755).WithContext("creating the remote directory " + root));
  return std::unique_ptr<BlobStore>(std::make_unique<FsBlobStore>(root));
}

}  // namespace tierckpt::sync
