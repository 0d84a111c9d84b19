// routed_store.h — the agent's durable tier as one ObjectStore that sends
// each call to the base its namespace persists to (agent/durable_bases.h).
//
// Every call naming a namespace goes to DurableBases::For(ns): its bound
// base, else the default. A namespace whose binding is refused or could not
// be opened fails every call with that error (nothing goes to the default
// instead). Describe() is the default base; DescribeNamespace(ns) the
// namespace's. ListNamespaces() is the default base's namespaces plus the
// bound ones.
//
// Thread-safe: a call holds its store (shared_ptr) for its duration, so a
// rebinding never closes a store under a call in flight.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/durable_bases.h"
#include "store/object_store.h"

namespace tierckpt::agent {

class RoutedStore final : public ObjectStore {
 public:
  // bases must outlive the store.
  explicit RoutedStore(const DurableBases* bases) : bases_(bases) {}

  std::string Describe() const override { return bases_->default_store()->Describe(); }
  std::string DescribeNamespace(std::string_view ns) const override { return bases_->DescribeFor(ns); }
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                    const std::function<bool()>& cancelled) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset, void* dst,
                    size_t size) override;
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override;
  Result<std::string> ReadObjectToFileHashed(std::string_view ns, uint64_t step, std::string_view name,
                                             int fd, uint64_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<Manifest> ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) override;
  Result<std::vector<CommittedStep>> ListCommittedStepsTagged(std::string_view ns) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  const DurableBases* const bases_;
};

}  // namespace tierckpt::agent
