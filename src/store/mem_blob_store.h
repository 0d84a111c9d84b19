// mem_blob_store.h — a BlobStore held in process memory, for tests and the
// "mem://name" durable bases (mem_store.h). Blobs are immutable byte strings
// in one sorted map; a put replaces the whole blob. The tree rule ("a" and
// "a/b" cannot coexist) is always enforced, as on a filesystem.
//
// Thread safety: safe for concurrent use; one mutex guards the map, and blob
// bytes are copied outside it. Errors: blob_store.h's; messages name
// "mem://<name>/<path>".
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "store/blob_store.h"

namespace tierckpt {

class MemBlobStore final : public BlobStore {
 public:
  // `name` only shows in Describe() ("mem://<name>") and messages.
  explicit MemBlobStore(std::string name = "anonymous");

  std::string Describe() const override;
  Status Put(std::string_view path, const void* data, size_t size,
             const BlobPutOptions& options = {}) override;
  Status Read(std::string_view path, uint64_t offset, void* dst, size_t size) override;
  Result<std::string> ReadSmall(std::string_view path, size_t max_bytes) override;
  Result<uint64_t> Size(std::string_view path) override;
  Result<BlobListing> List(std::string_view prefix, bool one_level = false) override;
  Status Delete(const std::vector<std::string>& paths) override;
  Status DeleteBelow(std::string_view prefix) override;

 private:
  using Bytes = std::shared_ptr<const std::string>;
  // kNotFound when absent.
  Result<Bytes> Find(std::string_view path);
  std::string Url(std::string_view path) const { return describe_ + "/" + std::string(path); }

  // Const after construction.
  const std::string describe_;

  Mutex mu_;
  std::map<std::string, Bytes, std::less<>> blobs_ GUARDED_BY(mu_);
};

}  // namespace tierckpt
