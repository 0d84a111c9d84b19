// mem_store.h — an ObjectStore held in process memory.
//
// MemObjectStore has the exact semantics of FsObjectStore (same validation,
// same commit rule, same error codes) without touching a disk: unit tests use
// it, and FaultInjectingStore wraps it to script failures. Objects are kept as
// immutable byte strings; a put replaces the whole object.
//
// Like the file store, an object name and a name below it ("a" and "a/b")
// cannot coexist in one step: the second put fails with kFailedPrecondition.
//
// "mem://name" URLs (OpenObjectStore) resolve through a process-wide
// registry: the same name yields the same instance for the life of the
// process, until ForgetNamedMemStore(name).
//
// Thread safety: all methods are safe for concurrent use; one mutex guards
// the index, and object bytes are copied outside it.
//
// Errors: as documented in object_store.h; messages name "mem://<name>", the
// namespace, the step and the object.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "store/object_store.h"

namespace tierckpt {

class MemObjectStore final : public ObjectStore {
 public:
  // `name` only shows in Describe() ("mem://<name>") and messages.
  explicit MemObjectStore(std::string name = "anonymous");

  std::string Describe() const override;
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override;
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override;
  Status CommitStep(const Manifest& manifest) override;
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override;
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override;
  Result<std::vector<std::string>> ListNamespaces() override;
  Status DeleteStep(std::string_view ns, uint64_t step) override;
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override;

 private:
  using Bytes = std::shared_ptr<const std::string>;
  struct StepData {
    std::map<std::string, Bytes, std::less<>> objects;
    std::optional<Manifest> manifest;  // set once committed
  };
  using Steps = std::map<uint64_t, StepData>;

  // nullptr when absent. Requires mu_.
  StepData* FindStep(std::string_view ns, uint64_t step) REQUIRES(mu_);
  // kNotFound when absent; the bytes otherwise.
  Result<Bytes> FindObject(std::string_view op, std::string_view ns, uint64_t step,
                           std::string_view name);

  // Const after construction.
  const std::string describe_;

  mutable Mutex mu_;
  std::map<std::string, Steps, std::less<>> namespaces_ GUARDED_BY(mu_);
};

// The process-wide MemObjectStore called `name` ([A-Za-z0-9_.-]{1,128}),
// created on first use. kInvalidArgument for other names.
Result<std::shared_ptr<MemObjectStore>> NamedMemStore(std::string_view name);
// Drops `name` from the registry; holders keep their instance, the next
// NamedMemStore(name) creates a fresh, empty one. No-op if absent.
void ForgetNamedMemStore(std::string_view name);

}  // namespace tierckpt
