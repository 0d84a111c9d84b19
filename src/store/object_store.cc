// object_store.cc — the ObjectStore defaults (object_store.h).
#include "store/object_store.h"

#include "os/mapping.h"

namespace tierckpt {

Status ObjectStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                     uint64_t size) {
  if (size == 0) return ReadObject(ns, step, name, 0, nullptr, 0);
  TC_ASSIGN_OR_RETURN(Mapping map, Mapping::Map(fd, static_cast<size_t>(size), Mapping::Access::kReadWrite,
                                                /*populate=*/true, "the restore destination"));
  return ReadObject(ns, step, name, 0, map.data(), map.size());
}

Result<std::string> ObjectStore::ReadObjectToFileHashed(std::string_view ns, uint64_t step, std::string_view name,
                                                        int fd, uint64_t size) {
  TC_RETURN_IF_ERROR(ReadObjectToFile(ns, step, name, fd, size));
  return std::string();
}

}  // namespace tierckpt
