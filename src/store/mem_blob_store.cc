// mem_blob_store.cc — see mem_blob_store.h.
#include "store/mem_blob_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/names.h"

namespace tierckpt {

MemBlobStore::MemBlobStore(std::string name) : describe_("mem://" + std::move(name)) {}

std::string MemBlobStore::Describe() const { return describe_; }

Result<MemBlobStore::Bytes> MemBlobStore::Find(std::string_view path) {
  MutexLock lock(&mu_);
  auto it = blobs_.find(path);
  if (it != blobs_.end()) return it->second;
  return NotFound(Url(path) + " does not exist; it was never put or its step was deleted");
}

Status MemBlobStore::Put(std::string_view path, const void* data, size_t size,
                         const BlobPutOptions& options) {
  auto bytes = std::make_shared<const std::string>(static_cast<const char*>(data), size);
  MutexLock lock(&mu_);
  // "a" and "a/b" cannot coexist (a file cannot also be a directory on disk).
  for (size_t slash = path.find('/'); slash != std::string_view::npos; slash = path.find('/', slash + 1)) {
    if (blobs_.count(path.substr(0, slash)) != 0) {
      return FailedPrecondition(Url(path) + " would sit below object " +
                                QuoteForMessage(path.substr(0, slash)) +
                                "; an object name cannot also be a directory");
    }
  }
  const std::string below = std::string(path) + "/";
  auto it = blobs_.lower_bound(below);
  if (it != blobs_.end() && it->first.compare(0, below.size(), below) == 0) {
    return FailedPrecondition(Url(path) + " is a directory holding object " + QuoteForMessage(it->first) +
                              "; an object name cannot also be a directory");
  }
  auto [at, inserted] = blobs_.try_emplace(std::string(path), bytes);
  if (!inserted) {
    if (options.exclusive) return AlreadyExists(Url(path) + " exists");
    at->second = std::move(bytes);
  }
  return Status::Ok();
}

Status MemBlobStore::Read(std::string_view path, uint64_t offset, void* dst, size_t size) {
  TC_ASSIGN_OR_RETURN(Bytes bytes, Find(path));
  if (offset > bytes->size() || size > bytes->size() - offset) {
    return Corruption(Url(path) + " is " + std::to_string(bytes->size()) +
                      " bytes, shorter than the requested range [" + std::to_string(offset) + ", " +
                      std::to_string(offset) + " + " + std::to_string(size) + ")");
  }
  if (size > 0) std::memcpy(dst, bytes->data() + offset, size);
  return Status::Ok();
}

Result<std::string> MemBlobStore::ReadSmall(std::string_view path, size_t max_bytes) {
  TC_ASSIGN_OR_RETURN(Bytes bytes, Find(path));
  if (bytes->size() > max_bytes) {
    return ResourceExhausted(Url(path) + " is " + std::to_string(bytes->size()) + " bytes, more than the " +
                             std::to_string(max_bytes) + " expected");
  }
  return *bytes;
}

Result<uint64_t> MemBlobStore::Size(std::string_view path) {
  TC_ASSIGN_OR_RETURN(Bytes bytes, Find(path));
  return static_cast<uint64_t>(bytes->size());
}

Result<BlobListing> MemBlobStore::List(std::string_view prefix, bool one_level) {
  BlobListing out;
  MutexLock lock(&mu_);
  for (auto it = blobs_.lower_bound(prefix); it != blobs_.end(); ++it) {
    const std::string& path = it->first;
    if (path.compare(0, prefix.size(), prefix) != 0) break;
    const size_t slash = one_level ? path.find('/', prefix.size()) : std::string::npos;
    if (slash == std::string::npos) {
      out.blobs.push_back({path, it->second->size()});
    } else if (out.dirs.empty() || out.dirs.back() != path.substr(0, slash + 1)) {
      out.dirs.push_back(path.substr(0, slash + 1));
    }
  }
  std::sort(out.dirs.begin(), out.dirs.end());
  out.dirs.erase(std::unique(out.dirs.begin(), out.dirs.end()), out.dirs.end());
  return out;
}

Status MemBlobStore::Delete(const std::vector<std::string>& paths) {
  MutexLock lock(&mu_);
  for (const std::string& p : paths) blobs_.erase(p);
  return Status::Ok();
}

Status MemBlobStore::DeleteBelow(std::string_view prefix) {
  MutexLock lock(&mu_);
  auto it = blobs_.lower_bound(prefix);
  while (it != blobs_.end() && it->first.compare(0, prefix.size(), prefix) == 0) it = blobs_.erase(it);
  return Status::Ok();
}

}  // namespace tierckpt
