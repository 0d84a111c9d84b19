// fault_store.h — an ObjectStore wrapper that injects scripted faults.
// Test-only: library tc_testing_store, linked by tests, never by tierckptd, the CLI or
// the Python extension.
//
// FaultInjectingStore forwards every call to a base store and, following a
// small fault plan, makes some of them fail or misbehave, so tests can drive
// the persister, the restorer and the CLI through the failures of a real
// medium without mocks. With an empty plan it is transparent (it passes the
// conformance suite), and Describe() is the base store's.
//
// The plan (all entries stay until ClearFaults(); they combine):
//   FailNthCall(op, n, status)  the n-th call of `op` counted from now
//                               (n = 1 or 0: the next one) fails with `status`,
//                               once, without reaching the base store.
//   FailEveryCall(op, status)   every call of `op` fails that way.
//   CorruptReads(name)          every successful ReadObject of object `name`
//                               (of any object if name is empty) returns its
//                               bytes with the first one inverted (x ^ 0xff);
//                               the stored object stays intact.
//   TruncatePuts(name)          every PutObject of `name` (any if empty)
//                               stores only the first size / 2 bytes and
//                               reports success, as a lying medium would;
//                               CommitStep's size check must catch it.
// An injected Status keeps its code; its message gets the prefix
// "injected fault on <Op> call #<k>". An ok status given to FailNthCall or
// FailEveryCall is replaced by kIoError "injected I/O error".
//
// Observation: CallCount(op) counts every call of op since construction,
// failed ones included; InjectedFaults() counts the faults injected;
// PutObjectsBatches() lists the object count of every PutObjects call.
// ReadManifestTagged and ListCommittedStepsTagged count (and fail) as
// ReadManifest and ListCommittedSteps. PutObjects is the default one (PutObject of each object, through this
// wrapper, so its faults apply per object).
//
// Thread safety: safe for concurrent use; one mutex guards the plan and the
// counters, and it is not held while the base store runs.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "store/object_store.h"

namespace tierckpt {

enum class StoreOp : int {
  kPutObject = 0,
  kReadObject,
  kObjectSize,
  kCommitStep,
  kReadManifest,
  kListCommittedSteps,
  kListNamespaces,
  kDeleteStep,
  kSweepUncommitted,
};
inline constexpr size_t kStoreOpCount = 9;

// "PutObject", "ReadObject", ... (the method names).
std::string_view StoreOpName(StoreOp op);

class FaultInjectingStore final : public ObjectStore {
 public:
  // Precondition: base != nullptr.
  explicit FaultInjectingStore(std::shared_ptr<ObjectStore> base);

  // ---- the fault plan (see the header comment) ----
  void FailNthCall(StoreOp op, uint64_t n, Status status);
  void FailEveryCall(StoreOp op, Status status);
  void CorruptReads(std::string name = "");
  void TruncatePuts(std::string name = "");
  void ClearFaults();

  // ---- observation ----
  uint64_t CallCount(StoreOp op) const;
  uint64_t InjectedFaults() const;
  std::vector<size_t> PutObjectsBatches() const;

  // ---- ObjectStore ----
  std::string Describe() const override;
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override;
  Status PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                    const std::function<bool()>& cancelled) override;
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override;
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
  struct FailRule {
    StoreOp op;
    uint64_t at_call = 0;  // absolute call number that fails; 0 = every call
    Status status;
  };

  // Counts the call and returns the injected failure, if any.
  Status OnCall(StoreOp op);
  // Whether an object name matches a filter ("" = all); nullopt = no filter.
  static bool Matches(const std::optional<std::string>& filter, std::string_view name);

  // Const after construction.
  const std::shared_ptr<ObjectStore> base_;

  mutable Mutex mu_;
  std::vector<FailRule> rules_ GUARDED_BY(mu_);
  std::optional<std::string> corrupt_reads_ GUARDED_BY(mu_);
  std::optional<std::string> truncate_puts_ GUARDED_BY(mu_);
  std::array<uint64_t, kStoreOpCount> calls_ GUARDED_BY(mu_) = {};
  uint64_t injected_ GUARDED_BY(mu_) = 0;
  std::vector<size_t> put_batches_ GUARDED_BY(mu_);
};

}  // namespace tierckpt
