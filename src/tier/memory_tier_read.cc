// MemoryTier read path and administration: open, manifest, verify, delete,
// prune.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>

#include "common/checksum.h"
#include "common/log.h"
#include "common/names.h"
#include "os/files.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent {
namespace {

Status NotInMemory(std::string_view ns, uint64_t step) {
  return NotFound("step " + StepLabel(ns, step) + " is not committed in the memory tier");
}

// Re-hashes one object file against its manifest entry; "" when it matches.
std::string CheckObject(ReadMappings& mappings, const std::string& dir, const ObjectEntry& e,
                        const std::string& label) {
  std::string path = Layout::ObjectPath(dir, e.name);
  Result<ReadView> view = mappings.Open(path);
  if (!view.ok()) return "object " + e.name + " of " + label + ": " + view.status().ToString();
  if (view->size() != e.size) {
    return "object " + e.name + " of " + label + " in memory holds " + std::to_string(view->size()) +
           " bytes, the manifest says " + std::to_string(e.size);
  }
  std::string actual = ComputeChecksum(view->data(), view->size()).ToString();
  if (actual != e.checksum) {
    return "object " + e.name + " of " + label + " in memory hashes to " + actual +
           " but the manifest says " + e.checksum;
  }
  return "";
}

}  // namespace

bool MemoryTier::HasCommitted(std::string_view ns, uint64_t step) const {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  return s != nullptr && s->committed;
}

Result<OpenedObject> MemoryTier::OpenObject(std::string_view ns, uint64_t step, std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  MutexLock lock(&mu_);
  StepState* s = AwaitChecksumsLocked(ns, step);
  if (s == nullptr || !s->committed) return NotInMemory(ns, step);
  const ObjectEntry* e = s->manifest.Find(name);
  if (e == nullptr) {
    std::string some;
    for (size_t i = 0; i < s->manifest.objects.size() && i < 5; ++i) {
      some += (i > 0 ? ", " : "") + QuoteForMessage(s->manifest.objects[i].name);
    }
    return NotFound("object " + QuoteForMessage(name) + " is not in step " + StepLabel(ns, step) +
                    " (it has " + std::to_string(s->manifest.objects.size()) + " objects: " + some +
                    (s->manifest.objects.size() > 5 ? ", ..." : "") + "); `tierckpt show` lists them");
  }
  std::string path = Layout::ObjectPath(s->files->dir, e->name);
  Result<UniqueFd> fd = OpenFile(path, O_RDONLY);
  if (!fd.ok()) return fd.status().WithContext("opening object " + StepLabel(ns, step) + "/" + e->name);
  uint64_t age_ms = kNeverVerified;
  if (auto v = s->verified.find(name); v != s->verified.end()) {
    const auto age = std::chrono::steady_clock::now() - v->second;
    age_ms = static_cast<uint64_t>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(age).count()));
  }
  return OpenedObject{std::move(fd).value(), e->size, e->checksum, age_ms, PinLocked(s)};
}

void MemoryTier::MarkVerified(std::string_view ns, uint64_t step, uint64_t instance, std::string_view name,
                              std::chrono::steady_clock::time_point hash_began) {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || s->instance != instance) return;
  MarkVerifiedLocked(s, name, hash_began);
}

void MemoryTier::MarkMismatch(std::string_view ns, uint64_t step, uint64_t instance, std::string_view name,
                              std::chrono::steady_clock::time_point hash_began) {
  MutexLock lock(&mu_);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr || s->instance != instance || !s->committed || s->manifest.Find(name) == nullptr) return;
  if (auto v = s->verified.find(name); v != s->verified.end()) s->verified.erase(v);
  auto it = s->mismatched.find(name);
  if (it == s->mismatched.end()) {
    s->mismatched.emplace(std::string(name), hash_began);
  } else if (it->second < hash_began) {
    it->second = hash_began;
  }
}

void MemoryTier::MarkVerifiedLocked(StepState* s, std::string_view name,
                                    std::chrono::steady_clock::time_point at) {
  if (!s->committed || s->manifest.Find(name) == nullptr) return;
  if (auto bad = s->mismatched.find(name); bad != s->mismatched.end()) {
    if (at <= bad->second) return;  // began before the hash that found it corrupt
    s->mismatched.erase(bad);
  }
  auto it = s->verified.find(name);
  if (it == s->verified.end()) {
    s->verified.emplace(std::string(name), at);
  } else if (it->second < at) {
    it->second = at;
  }
}

Result<PinnedObject> MemoryTier::ReadCommittedObject(std::string_view ns, uint64_t step,
                                                     std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  PinnedObject out;
  std::string path;
  {
    MutexLock lock(&mu_);
    StepState* s = AwaitChecksumsLocked(ns, step);
    if (s == nullptr || !s->committed) return NotInMemory(ns, step);
    const ObjectEntry* e = s->manifest.Find(name);
    if (e == nullptr) {
      return NotFound("object " + QuoteForMessage(name) + " is not in step " + StepLabel(ns, step));
    }
    out.pin = PinLocked(s);
    out.checksum = e->checksum;
    out.instance = s->instance;
    path = Layout::ObjectPath(s->files->dir, e->name);
    if (e->size == 0) return out;
  }
  Result<ReadView> view = read_mappings_.Open(path);
  if (!view.ok())
    return view.status().WithContext("reading object " + StepLabel(ns, step) + "/" + std::string(name));
  out.view = std::move(view).value();
  return out;
}

Result<Manifest> MemoryTier::GetManifest(std::string_view ns, uint64_t step) const {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  MutexLock lock(&mu_);
  StepState* s = AwaitChecksumsLocked(ns, step);
  if (s == nullptr || !s->committed) return NotInMemory(ns, step);
  return s->manifest;
}

Result<MemoryVerifyResult> MemoryTier::VerifyStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  MemoryVerifyResult result;
  StepPin pin;
  std::string dir;
  uint64_t instance = 0;
  {
    MutexLock lock(&mu_);
    StepState* s = AwaitChecksumsLocked(ns, step);
    if (s == nullptr || !s->committed) return NotInMemory(ns, step);
    pin = PinLocked(s);
    result.manifest = s->manifest;
    dir = s->files->dir;
    instance = s->instance;
  }
  std::string label = StepLabel(ns, step);
  for (const auto& e : result.manifest.objects) {
    const auto began = std::chrono::steady_clock::now();
    std::string err = CheckObject(read_mappings_, dir, e, label);
    ++result.objects_checked;
    if (err.empty()) {
      MarkVerified(ns, step, instance, e.name, began);
    } else {
      MarkMismatch(ns, step, instance, e.name, began);
      result.errors.push_back(std::move(err));
      result.failed_objects.push_back(e.name);
    }
  }
  return result;
}

Result<bool> MemoryTier::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepRef(ns, step));
  TierLock lock(this);
  StepState* s = FindLocked(ns, step);
  if (s == nullptr) return false;
  std::string label = StepLabel(ns, step);
  if (!s->committed) {
    return FailedPrecondition("step " + label +
                              " is being written or restored; abort it instead (AbortStep)");
  }
  if (s->persist == PersistState::kRunning) {
    return FailedPrecondition("step " + label +
                              " is being persisted right now; wait for it (WaitDurable) and delete it then");
  }
  DropLocked(std::string(ns), step, "deleted by a client");
  return true;
}

void MemoryTier::SetNamespaceKeep(std::string_view ns, uint32_t keep) {
  TierLock lock(this);
  const std::string name(ns);
  if (keep == 0) {
    keep_by_ns_.erase(name);
    return;
  }
  keep_by_ns_[name] = keep;
  ApplyRetentionLocked(name, keep, nullptr);
}

uint32_t MemoryTier::KeepLocked(std::string_view ns) const {
  auto it = keep_by_ns_.find(ns);
  return EffectiveKeepMemory(it != keep_by_ns_.end() ? it->second : options_.keep_last, policies_.Get(ns));
}

PruneResult MemoryTier::Prune(std::string_view ns, uint32_t keep, bool caller_checks_durable) {
  PruneResult result;
  TierLock lock(this);
  std::vector<std::string> names;
  for (const auto& [name, nss] : index_.namespaces()) {
    if (ns.empty() || name == ns) names.push_back(name);
  }
  for (const auto& name : names)
    ApplyRetentionLocked(name, keep != 0 ? keep : KeepLocked(name), &result, std::nullopt,
                         caller_checks_durable);
  return result;
}

}  // namespace tierckpt::agent
