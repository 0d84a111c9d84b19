// object_store.cc — the ObjectStore defaults (object_store.h).
#include "store/object_store.h"

#include "os/mapping.h"

namespace tierckpt {

Status ObjectStore::PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                               const std::function<bool()>& cancelled) {
  for (const ObjectBytes& o : objects) {
    if (cancelled && cancelled()) return Aborted("PutObjects of " + Describe() + ": cancelled");
    TC_RETURN_IF_ERROR(PutObject(ns, step, o.name, o.data, o.size));
  }
  return Status::Ok();
}

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

Result<std::vector<CommittedStep>> ObjectStore::ListCommittedStepsTagged(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, ListCommittedSteps(ns));
  std::vector<CommittedStep> out;
  out.reserve(steps.size());
  for (uint64_t step : steps) out.push_back({step, ""});
  return out;
}

Result<Manifest> ObjectStore::ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) {
  tag->clear();
  return ReadManifest(ns, step);
}

}  // namespace tierckpt
