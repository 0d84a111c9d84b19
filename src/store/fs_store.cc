// fs_store.cc — see fs_store.h.
#include "store/fs_store.h"

#include <utility>

namespace tierckpt {

Result<std::unique_ptr<FsObjectStore>> FsObjectStore::Open(std::string_view base, FsStoreOptions options) {
  FsBlobOptions blob_options;
  blob_options.fsync = options.fsync;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<FsBlobStore> fs, FsBlobStore::Open(base, blob_options));
  return std::unique_ptr<FsObjectStore>(new FsObjectStore(std::move(fs)));
}

}  // namespace tierckpt
