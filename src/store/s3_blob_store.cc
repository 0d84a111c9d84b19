// s3_blob_store.cc — see s3_blob_store.h.
#include "store/s3_blob_store.h"

#include <algorithm>

#include "common/log.h"
#include "common/names.h"
#include "os/parallel.h"
#include "s3/s3_open.h"
#include "store/store_common.h"

namespace tierckpt {

Result<std::unique_ptr<S3BlobStore>> S3BlobStore::Open(const s3::S3Config& config) {
  TC_ASSIGN_OR_RETURN(s3::S3ClientParts parts, s3::MakeS3ClientParts(config));
  return std::make_unique<S3BlobStore>(config, std::move(parts.transport), std::move(parts.signer));
}

S3BlobStore::S3BlobStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
                         std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry)
    : describe_(s3::DescribeS3(config)),
      base_(config.prefix.empty() ? "" : config.prefix + "/"),
      client_(std::move(config), std::move(transport), std::move(signer), std::move(retry)) {}

std::string S3BlobStore::Describe() const { return describe_; }
int S3BlobStore::Concurrency() const { return client_.config().concurrency; }
std::string S3BlobStore::Url(std::string_view path) const {
  return "s3://" + client_.config().bucket + "/" + Key(path);
}

// ---- writes -----------------------------------------------------------------

Status S3BlobStore::CheckTree(std::string_view path) {
  // A path cannot also be a "directory" (the layout must download into a
  // file tree): no parent may be a blob, and nothing may lie below.
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    Result<s3::ObjectInfo> parent = client_.HeadObject(Key(path.substr(0, slash)));
    if (parent.ok()) {
      return FailedPrecondition("object " + Url(path.substr(0, slash)) + " exists, so it cannot also be a " +
                                "directory holding " + QuoteForMessage(path));
    }
    if (parent.status().code() != Code::kNotFound) return parent.status();
  }
  s3::ListOptions one;
  one.page_size = 1;
  one.max_results = 1;
  TC_ASSIGN_OR_RETURN(s3::ListResult below, client_.ListObjects(Key(path) + "/", one));
  if (!below.objects.empty()) {
    return FailedPrecondition(Url(path) + "/ holds other objects (s3://" + client_.config().bucket + "/" +
                              below.objects[0].key + "); an object name cannot also be a directory");
  }
  return Status::Ok();
}

Status S3BlobStore::Put(std::string_view path, const void* data, size_t size, const BlobPutOptions& options) {
  if (options.check_tree) TC_RETURN_IF_ERROR(CheckTree(path));
  if (options.exclusive) return client_.PutObject(Key(path), data, size, s3::PutOptions{true});
  return client_.Upload(Key(path), data, size);
}

Status S3BlobStore::PutMany(const std::vector<BlobBytes>& blobs, const std::function<bool()>& cancelled,
                            bool check_tree) {
  if (check_tree) {
    std::set<std::string> names;  // the batch's paths must not clash among themselves either
    for (const BlobBytes& b : blobs) TC_RETURN_IF_ERROR(store_internal::AddToTree(names, b.path));
    TC_RETURN_IF_ERROR(
        ParallelFor(blobs.size(), Concurrency(), [&](size_t i) { return CheckTree(blobs[i].path); }));
  }
  std::vector<s3::UploadItem> items;
  items.reserve(blobs.size());
  for (const BlobBytes& b : blobs) items.push_back({Key(b.path), b.data, b.size});
  return client_.UploadMany(items, cancelled);
}

// ---- reads ------------------------------------------------------------------

Status S3BlobStore::ReadRange(std::string_view path, uint64_t offset, const s3::ByteSink& dst, size_t size) {
  const std::string key = Key(path);
  const std::string range =
      "[" + std::to_string(offset) + ", " + std::to_string(offset) + " + " + std::to_string(size) + ")";
  if (size == 0 || offset > UINT64_MAX - size) {  // nothing to GET: check the size
    Result<s3::ObjectInfo> info = client_.HeadObject(key);
    if (info.status().code() == Code::kNotFound) {
      return NotFound("no object at " + Url(path) + "; it was never put or its step was deleted");
    }
    TC_RETURN_IF_ERROR(info.status());
    if (offset > info->size || size > info->size - offset) {
      return Corruption("object " + Url(path) + " is " + std::to_string(info->size) +
                        " bytes, shorter than the requested range " + range +
                        "; the copy is truncated, restore the step from another tier");
    }
    return Status::Ok();
  }
  Status s = client_.Download(key, offset, dst, size);
  if (s.code() == Code::kNotFound) {
    return NotFound("no object at " + Url(path) + "; it was never put or its step was deleted (" +
                    s.message() + ")");
  }
  if (s.code() == Code::kCorruption) {
    return Corruption("object " + Url(path) + " is shorter than the requested range " + range + " (" +
                      s.message() + "); the copy is truncated, restore the step from another tier");
  }
  return s;
}

Status S3BlobStore::Read(std::string_view path, uint64_t offset, void* dst, size_t size) {
  return ReadRange(path, offset, s3::ByteSink::Memory(dst), size);
}

Status S3BlobStore::ReadToFile(std::string_view path, int fd, uint64_t size) {
  return ReadRange(path, 0, s3::ByteSink::File(fd, 0), static_cast<size_t>(size));
}

Result<std::string> S3BlobStore::ReadSmall(std::string_view path, size_t max_bytes) {
  std::string etag;
  return ReadSmallTagged(path, max_bytes, &etag);
}

Result<std::string> S3BlobStore::ReadSmallTagged(std::string_view path, size_t max_bytes, std::string* tag) {
  tag->clear();
  Result<std::string> text = client_.GetObject(Key(path), max_bytes, tag);
  if (text.status().code() == Code::kNotFound) return NotFound("no " + Url(path));
  return text;
}

Result<uint64_t> S3BlobStore::Size(std::string_view path) {
  Result<s3::ObjectInfo> info = client_.HeadObject(Key(path));
  if (info.status().code() == Code::kNotFound) {
    return NotFound("no object at " + Url(path) + "; it was never put or its step was deleted");
  }
  TC_RETURN_IF_ERROR(info.status());
  return info->size;
}

Result<BlobListing> S3BlobStore::List(std::string_view prefix, bool one_level) {
  s3::ListOptions options;
  if (one_level) options.delimiter = "/";
  const std::string key_prefix = Key(prefix);
  TC_ASSIGN_OR_RETURN(s3::ListResult listed, client_.ListObjects(key_prefix, options));
  BlobListing out;
  out.blobs.reserve(listed.objects.size());
  for (s3::ListedObject& o : listed.objects) {
    if (o.key.compare(0, key_prefix.size(), key_prefix) != 0) continue;
    out.blobs.push_back({o.key.substr(base_.size()), o.size, std::move(o.etag)});
  }
  for (const std::string& p : listed.common_prefixes) {
    if (p.size() > key_prefix.size() && p.compare(0, key_prefix.size(), key_prefix) == 0) {
      out.dirs.push_back(p.substr(base_.size()));
    }
  }
  std::sort(out.blobs.begin(), out.blobs.end(),
            [](const BlobInfo& a, const BlobInfo& b) { return a.path < b.path; });
  std::sort(out.dirs.begin(), out.dirs.end());
  return out;
}

// ---- deletion ---------------------------------------------------------------

Status S3BlobStore::Delete(const std::vector<std::string>& paths) {
  if (paths.size() == 1) return client_.DeleteObject(Key(paths[0]));
  std::vector<std::string> keys;
  keys.reserve(paths.size());
  for (const std::string& p : paths) keys.push_back(Key(p));
  return keys.empty() ? Status::Ok() : client_.DeleteObjects(keys);
}

Status S3BlobStore::DeleteBelow(std::string_view prefix) {
  TC_ASSIGN_OR_RETURN(s3::ListResult listed, client_.ListObjects(Key(prefix)));
  std::vector<std::string> keys;
  keys.reserve(listed.objects.size());
  for (s3::ListedObject& o : listed.objects) keys.push_back(std::move(o.key));
  return client_.DeleteObjects(keys);
}

Result<int> S3BlobStore::AbortUploads(std::string_view prefix,
                                      const std::function<bool(std::string_view)>& which) {
  TC_ASSIGN_OR_RETURN(std::vector<s3::MultipartUpload> uploads, client_.ListMultipartUploads(Key(prefix)));
  int aborted = 0;
  for (const s3::MultipartUpload& u : uploads) {
    if (u.key.size() < base_.size()) continue;
    const std::string_view path = std::string_view(u.key).substr(base_.size());
    if (which && !which(path)) continue;
    Status s = client_.AbortMultipartUpload(u.key, u.upload_id);
    if (!s.ok() && s.code() != Code::kNotFound) return s;  // NoSuchUpload: gone already
    Log(LogLevel::kInfo, "store_aborted_upload").Kv("store", describe_).Kv("key", u.key);
    ++aborted;
  }
  return aborted;
}

}  // namespace tierckpt
