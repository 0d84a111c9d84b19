// blob_store.cc — the BlobStore defaults (blob_store.h).
#include "store/blob_store.h"

#include "os/mapping.h"

namespace tierckpt {

Status BlobStore::PutFile(std::string_view path, int fd, uint64_t size, const BlobPutOptions& options) {
  if (size == 0) return Put(path, "", 0, options);
  TC_ASSIGN_OR_RETURN(Mapping map, Mapping::Map(fd, static_cast<size_t>(size), Mapping::Access::kReadOnly,
                                                /*populate=*/false, "the file put as " + std::string(path)));
  return Put(path, map.data(), map.size(), options);
}

Status BlobStore::PutMany(const std::vector<BlobBytes>& blobs, const std::function<bool()>& cancelled,
                          bool check_tree) {
  BlobPutOptions options;
  options.check_tree = check_tree;
  for (const BlobBytes& b : blobs) {
    if (cancelled && cancelled()) return Aborted("PutMany on " + Describe() + ": cancelled");
    TC_RETURN_IF_ERROR(Put(b.path, b.data, b.size, options));
  }
  return Status::Ok();
}

Status BlobStore::ReadToFile(std::string_view path, int fd, uint64_t size) {
  if (size == 0) return Read(path, 0, nullptr, 0);
  TC_ASSIGN_OR_RETURN(Mapping map, Mapping::Map(fd, static_cast<size_t>(size), Mapping::Access::kReadWrite,
                                                /*populate=*/true, "the restore destination"));
  return Read(path, 0, map.data(), map.size());
}

Result<std::string> BlobStore::ReadSmallTagged(std::string_view path, size_t max_bytes, std::string* tag) {
  tag->clear();
  return ReadSmall(path, max_bytes);
}

Status BlobStore::SyncParents(const std::vector<std::string>&) { return Status::Ok(); }

Result<int> BlobStore::AbortUploads(std::string_view, const std::function<bool(std::string_view)>&) {
  return 0;
}

}  // namespace tierckpt
