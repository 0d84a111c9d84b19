// routed_store.cc — see routed_store.h.
#include "agent/routed_store.h"

#include <algorithm>

namespace tierckpt::agent {

Status RoutedStore::PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                              size_t size) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->PutObject(ns, step, name, data, size);
}

Status RoutedStore::PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                               const std::function<bool()>& cancelled) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->PutObjects(ns, step, objects, cancelled);
}

Status RoutedStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                               void* dst, size_t size) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ReadObject(ns, step, name, offset, dst, size);
}

Status RoutedStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                     uint64_t size) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ReadObjectToFile(ns, step, name, fd, size);
}

Result<std::string> RoutedStore::ReadObjectToFileHashed(std::string_view ns, uint64_t step,
                                                        std::string_view name, int fd, uint64_t size) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ReadObjectToFileHashed(ns, step, name, fd, size);
}

Result<uint64_t> RoutedStore::ObjectSize(std::string_view ns, uint64_t step, std::string_view name) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ObjectSize(ns, step, name);
}

Status RoutedStore::CommitStep(const Manifest& manifest) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(manifest.ns));
  return s->CommitStep(manifest);
}

Result<Manifest> RoutedStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ReadManifest(ns, step);
}

Result<std::vector<uint64_t>> RoutedStore::ListCommittedSteps(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ListCommittedSteps(ns);
}

Result<Manifest> RoutedStore::ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) {
  tag->clear();
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ReadManifestTagged(ns, step, tag);
}

Result<std::vector<CommittedStep>> RoutedStore::ListCommittedStepsTagged(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->ListCommittedStepsTagged(ns);
}

Result<std::vector<std::string>> RoutedStore::ListNamespaces() {
  TC_ASSIGN_OR_RETURN(std::vector<std::string> names, bases_->default_store()->ListNamespaces());
  for (const auto& [ns, url] : bases_->Bindings()) names.push_back(ns);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Status RoutedStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->DeleteStep(ns, step);
}

Result<int> RoutedStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> s, bases_->For(ns));
  return s->SweepUncommitted(ns, options);
}

}  // namespace tierckpt::agent
