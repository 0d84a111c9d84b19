#include "testing/fault_store.h"

#include <utility>

namespace tierckpt {
namespace {

Status OrInjectedIoError(Status status) {
  if (status.ok()) return IoError("injected I/O error");
  return status;
}

}  // namespace

std::string_view StoreOpName(StoreOp op) {
  switch (op) {
    case StoreOp::kPutObject:
      return "PutObject";
    case StoreOp::kReadObject:
      return "ReadObject";
    case StoreOp::kObjectSize:
      return "ObjectSize";
    case StoreOp::kCommitStep:
      return "CommitStep";
    case StoreOp::kReadManifest:
      return "ReadManifest";
    case StoreOp::kListCommittedSteps:
      return "ListCommittedSteps";
    case StoreOp::kListNamespaces:
      return "ListNamespaces";
    case StoreOp::kDeleteStep:
      return "DeleteStep";
    case StoreOp::kSweepUncommitted:
      return "SweepUncommitted";
  }
  return "UnknownOp";
}

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<ObjectStore> base) : base_(std::move(base)) {}

void FaultInjectingStore::FailNthCall(StoreOp op, uint64_t n, Status status) {
  MutexLock lock(&mu_);
  if (n == 0) n = 1;
  rules_.push_back({op, calls_[static_cast<size_t>(op)] + n, OrInjectedIoError(std::move(status))});
}

void FaultInjectingStore::FailEveryCall(StoreOp op, Status status) {
  MutexLock lock(&mu_);
  rules_.push_back({op, 0, OrInjectedIoError(std::move(status))});
}

void FaultInjectingStore::CorruptReads(std::string name) {
  MutexLock lock(&mu_);
  corrupt_reads_ = std::move(name);
}

void FaultInjectingStore::TruncatePuts(std::string name) {
  MutexLock lock(&mu_);
  truncate_puts_ = std::move(name);
}

void FaultInjectingStore::ClearFaults() {
  MutexLock lock(&mu_);
  rules_.clear();
  corrupt_reads_.reset();
  truncate_puts_.reset();
}

std::vector<size_t> FaultInjectingStore::PutObjectsBatches() const {
  MutexLock lock(&mu_);
  return put_batches_;
}

Status FaultInjectingStore::PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                                       const std::function<bool()>& cancelled) {
  {
    MutexLock lock(&mu_);
    put_batches_.push_back(objects.size());
  }
  return ObjectStore::PutObjects(ns, step, objects, cancelled);
}

uint64_t FaultInjectingStore::CallCount(StoreOp op) const {
  MutexLock lock(&mu_);
  return calls_[static_cast<size_t>(op)];
}

uint64_t FaultInjectingStore::InjectedFaults() const {
  MutexLock lock(&mu_);
  return injected_;
}

Status FaultInjectingStore::OnCall(StoreOp op) {
  MutexLock lock(&mu_);
  const uint64_t call = ++calls_[static_cast<size_t>(op)];
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    if (it->op != op || (it->at_call != 0 && it->at_call != call)) continue;
    Status injected = it->status.WithContext("injected fault on " + std::string(StoreOpName(op)) +
                                             " call #" + std::to_string(call));
    if (it->at_call != 0) rules_.erase(it);
    ++injected_;
    return injected;
  }
  return Status::Ok();
}

bool FaultInjectingStore::Matches(const std::optional<std::string>& filter, std::string_view name) {
  return filter.has_value() && (filter->empty() || *filter == name);
}

std::string FaultInjectingStore::Describe() const { return base_->Describe(); }

Status FaultInjectingStore::PutObject(std::string_view ns, uint64_t step, std::string_view name,
                                      const void* data, size_t size) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kPutObject));
  {
    MutexLock lock(&mu_);
    if (Matches(truncate_puts_, name)) {
      if (size / 2 != size) ++injected_;
      size /= 2;
    }
  }
  return base_->PutObject(ns, step, name, data, size);
}

Status FaultInjectingStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name,
                                       uint64_t offset, void* dst, size_t size) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kReadObject));
  TC_RETURN_IF_ERROR(base_->ReadObject(ns, step, name, offset, dst, size));
  MutexLock lock(&mu_);
  if (size > 0 && Matches(corrupt_reads_, name)) {
    static_cast<unsigned char*>(dst)[0] ^= 0xff;
    ++injected_;
  }
  return Status::Ok();
}

Result<uint64_t> FaultInjectingStore::ObjectSize(std::string_view ns, uint64_t step,
                                                 std::string_view name) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kObjectSize));
  return base_->ObjectSize(ns, step, name);
}

Status FaultInjectingStore::CommitStep(const Manifest& manifest) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kCommitStep));
  return base_->CommitStep(manifest);
}

Result<Manifest> FaultInjectingStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kReadManifest));
  return base_->ReadManifest(ns, step);
}

Result<std::vector<uint64_t>> FaultInjectingStore::ListCommittedSteps(std::string_view ns) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kListCommittedSteps));
  return base_->ListCommittedSteps(ns);
}

// The tagged forms count and fail as the calls they extend.
Result<Manifest> FaultInjectingStore::ReadManifestTagged(std::string_view ns, uint64_t step,
                                                         std::string* tag) {
  tag->clear();
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kReadManifest));
  return base_->ReadManifestTagged(ns, step, tag);
}

Result<std::vector<CommittedStep>> FaultInjectingStore::ListCommittedStepsTagged(std::string_view ns) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kListCommittedSteps));
  return base_->ListCommittedStepsTagged(ns);
}

Result<std::vector<std::string>> FaultInjectingStore::ListNamespaces() {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kListNamespaces));
  return base_->ListNamespaces();
}

Status FaultInjectingStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kDeleteStep));
  return base_->DeleteStep(ns, step);
}

Result<int> FaultInjectingStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_RETURN_IF_ERROR(OnCall(StoreOp::kSweepUncommitted));
  return base_->SweepUncommitted(ns, options);
}

}  // namespace tierckpt
