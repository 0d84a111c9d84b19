#include "store/mem_store.h"

#include <cstring>
#include <utility>

#include "common/names.h"
#include "store/store_common.h"

namespace tierckpt {

using store_internal::ObjectLabel;
using store_internal::StepLabel;
using store_internal::ValidateNamespaceFor;
using store_internal::ValidateObjectFor;
using store_internal::ValidateStepFor;

MemObjectStore::MemObjectStore(std::string name) : describe_("mem://" + std::move(name)) {}

std::string MemObjectStore::Describe() const { return describe_; }

MemObjectStore::StepData* MemObjectStore::FindStep(std::string_view ns, uint64_t step) {
  auto n = namespaces_.find(ns);
  if (n == namespaces_.end()) return nullptr;
  auto s = n->second.find(step);
  return s == n->second.end() ? nullptr : &s->second;
}

Result<MemObjectStore::Bytes> MemObjectStore::FindObject(std::string_view op, std::string_view ns,
                                                         uint64_t step, std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateObjectFor(op, describe_, ns, step, name));
  MutexLock lock(&mu_);
  StepData* sd = FindStep(ns, step);
  if (sd != nullptr) {
    auto it = sd->objects.find(name);
    if (it != sd->objects.end()) return it->second;
  }
  return NotFound(std::string(op) + ": " + ObjectLabel(describe_, ns, step, name) +
                  " does not exist; it was never put or its step was deleted");
}

Status MemObjectStore::PutObject(std::string_view ns, uint64_t step, std::string_view name,
                                 const void* data, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("PutObject", describe_, ns, step, name));
  auto bytes = std::make_shared<const std::string>(static_cast<const char*>(data), size);
  std::string key(name);
  MutexLock lock(&mu_);
  auto n = namespaces_.find(ns);
  if (n == namespaces_.end()) n = namespaces_.emplace(std::string(ns), Steps{}).first;
  StepData& sd = n->second[step];
  if (sd.manifest.has_value()) {
    return FailedPrecondition("PutObject: " + ObjectLabel(describe_, ns, step, name) +
                              ": the step is committed and immutable; write to a new step");
  }
  // "a" and "a/b" cannot coexist (a file cannot also be a directory on disk).
  for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1)) {
    if (sd.objects.count(std::string_view(key).substr(0, slash)) != 0) {
      return FailedPrecondition("PutObject: " + ObjectLabel(describe_, ns, step, name) +
                                " would sit below object " + QuoteForMessage(key.substr(0, slash)) +
                                "; an object name cannot also be a directory");
    }
  }
  std::string below = key + "/";
  auto it = sd.objects.lower_bound(below);
  if (it != sd.objects.end() && it->first.compare(0, below.size(), below) == 0) {
    return FailedPrecondition("PutObject: " + ObjectLabel(describe_, ns, step, name) +
                              " is a directory holding object " + QuoteForMessage(it->first) +
                              "; an object name cannot also be a directory");
  }
  sd.objects[std::move(key)] = std::move(bytes);
  return Status::Ok();
}

Status MemObjectStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name,
                                  uint64_t offset, void* dst, size_t size) {
  TC_ASSIGN_OR_RETURN(Bytes bytes, FindObject("ReadObject", ns, step, name));
  if (offset > bytes->size() || size > bytes->size() - offset) {
    return Corruption("ReadObject: " + ObjectLabel(describe_, ns, step, name) + " is " +
                      std::to_string(bytes->size()) + " bytes, shorter than the requested range [" +
                      std::to_string(offset) + ", " + std::to_string(offset) + " + " +
                      std::to_string(size) + ")");
  }
  if (size > 0) std::memcpy(dst, bytes->data() + offset, size);
  return Status::Ok();
}

Result<uint64_t> MemObjectStore::ObjectSize(std::string_view ns, uint64_t step,
                                            std::string_view name) {
  TC_ASSIGN_OR_RETURN(Bytes bytes, FindObject("ObjectSize", ns, step, name));
  return static_cast<uint64_t>(bytes->size());
}

Status MemObjectStore::CommitStep(const Manifest& manifest) {
  TC_RETURN_IF_ERROR(ValidateStepFor("CommitStep", describe_, manifest.ns, manifest.step));
  Status valid = manifest.Validate();
  if (!valid.ok()) {
    return valid.WithContext("CommitStep: " + StepLabel(describe_, manifest.ns, manifest.step) +
                             ": the manifest is invalid");
  }
  MutexLock lock(&mu_);
  StepData* sd = FindStep(manifest.ns, manifest.step);
  if (sd != nullptr && sd->manifest.has_value()) {
    return AlreadyExists("CommitStep: " + StepLabel(describe_, manifest.ns, manifest.step) +
                         " is already committed; a step is committed once");
  }
  for (const ObjectEntry& e : manifest.objects) {
    const Bytes* bytes = nullptr;
    if (sd != nullptr) {
      auto it = sd->objects.find(e.name);
      if (it != sd->objects.end()) bytes = &it->second;
    }
    if (bytes == nullptr) {
      return FailedPrecondition("CommitStep: " +
                                ObjectLabel(describe_, manifest.ns, manifest.step, e.name) +
                                " is listed in the manifest but was never put; put every object "
                                "before committing");
    }
    if ((*bytes)->size() != e.size) {
      return FailedPrecondition("CommitStep: " +
                                ObjectLabel(describe_, manifest.ns, manifest.step, e.name) +
                                " is " + std::to_string((*bytes)->size()) +
                                " bytes but the manifest says " + std::to_string(e.size) +
                                "; the put was incomplete, put it again");
    }
  }
  if (sd == nullptr) {
    auto n = namespaces_.find(manifest.ns);
    if (n == namespaces_.end()) n = namespaces_.emplace(manifest.ns, Steps{}).first;
    sd = &n->second[manifest.step];
  }
  sd->manifest = manifest;
  return Status::Ok();
}

Result<Manifest> MemObjectStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("ReadManifest", describe_, ns, step));
  MutexLock lock(&mu_);
  StepData* sd = FindStep(ns, step);
  if (sd == nullptr || !sd->manifest.has_value()) {
    return NotFound("ReadManifest: " + StepLabel(describe_, ns, step) +
                    " is not committed (absent, still being written, or deleted)");
  }
  return *sd->manifest;
}

Result<std::vector<uint64_t>> MemObjectStore::ListCommittedSteps(std::string_view ns) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("ListCommittedSteps", describe_, ns));
  std::vector<uint64_t> out;
  MutexLock lock(&mu_);
  auto n = namespaces_.find(ns);
  if (n == namespaces_.end()) return out;
  for (const auto& [step, sd] : n->second) {
    if (sd.manifest.has_value()) out.push_back(step);
  }
  return out;
}

Result<std::vector<std::string>> MemObjectStore::ListNamespaces() {
  std::vector<std::string> out;
  MutexLock lock(&mu_);
  for (const auto& [ns, steps] : namespaces_) {
    if (!steps.empty()) out.push_back(ns);
  }
  return out;
}

Status MemObjectStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("DeleteStep", describe_, ns, step));
  MutexLock lock(&mu_);
  auto n = namespaces_.find(ns);
  if (n == namespaces_.end()) return Status::Ok();
  n->second.erase(step);
  if (n->second.empty()) namespaces_.erase(n);
  return Status::Ok();
}

Result<int> MemObjectStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("SweepUncommitted", describe_, ns));
  int removed = 0;
  MutexLock lock(&mu_);
  auto n = namespaces_.find(ns);
  if (n == namespaces_.end()) return removed;
  for (auto it = n->second.begin(); it != n->second.end();) {
    if (!it->second.manifest.has_value() && !options.Skips(it->first)) {
      it = n->second.erase(it);
      ++removed;
    } else {
      ++it;
    }
  }
  if (n->second.empty()) namespaces_.erase(n);
  return removed;
}

namespace {

struct Registry {
  Mutex mu;
  std::map<std::string, std::shared_ptr<MemObjectStore>, std::less<>> stores GUARDED_BY(mu);
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: usable during exit
  return *registry;
}

}  // namespace

Result<std::shared_ptr<MemObjectStore>> NamedMemStore(std::string_view name) {
  Status valid = ValidateNamespace(name);
  if (!valid.ok()) {
    return InvalidArgument("mem:// store name " + QuoteForMessage(name) +
                           " is invalid; use [A-Za-z0-9_.-]{1,128}, e.g. mem://test1");
  }
  Registry& r = GetRegistry();
  MutexLock lock(&r.mu);
  auto it = r.stores.find(name);
  if (it == r.stores.end()) {
    auto store = std::make_shared<MemObjectStore>(std::string(name));
    it = r.stores.emplace(std::string(name), std::move(store)).first;
  }
  return it->second;
}

void ForgetNamedMemStore(std::string_view name) {
  Registry& r = GetRegistry();
  MutexLock lock(&r.mu);
  auto it = r.stores.find(name);
  if (it != r.stores.end()) r.stores.erase(it);
}

}  // namespace tierckpt
