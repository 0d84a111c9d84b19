// layout_store.cc — see layout_store.h.
#include "store/layout_store.h"

#include <algorithm>
#include <utility>

#include "common/log.h"
#include "common/names.h"
#include "os/parallel.h"
#include "store/store_common.h"

namespace tierckpt {
namespace {

using store_internal::LooksLikeTmpName;
using store_internal::ObjectLabel;
using store_internal::StepLabel;
using store_internal::ValidateNamespaceFor;
using store_internal::ValidateObjectFor;
using store_internal::ValidateStepFor;

Status Ctx(const Status& s, std::string_view op, const std::string& label) {
  if (s.ok()) return s;
  return s.WithContext(std::string(op) + " " + label);
}

template <typename T>
Result<T> Ctx(Result<T> r, std::string_view op, const std::string& label) {
  if (r.ok()) return r;
  return r.status().WithContext(std::string(op) + " " + label);
}

std::string NsPrefix(std::string_view ns) { return std::string(ns) + "/"; }
std::string StepPrefix(std::string_view ns, uint64_t step) { return NsPrefix(ns) + StepDirName(step) + "/"; }
std::string ObjectPath(std::string_view ns, uint64_t step, std::string_view name) {
  return StepPrefix(ns, step) + std::string(name);
}
std::string ManifestPath(std::string_view ns, uint64_t step) {
  return StepPrefix(ns, step) + std::string(kManifestName);
}

std::string NsLabel(const std::string& store, std::string_view ns) {
  return store + " namespace " + QuoteForMessage(ns);
}

}  // namespace

LayoutStore::LayoutStore(std::shared_ptr<BlobStore> blobs)
    : blobs_(std::move(blobs)), describe_(blobs_->Describe()) {}

std::string LayoutStore::Describe() const { return describe_; }

std::shared_mutex& LayoutStore::StepLock(std::string_view ns, uint64_t step) const {
  const size_t h = std::hash<std::string_view>()(ns) ^ (std::hash<uint64_t>()(step) * 0x9e3779b97f4a7c15ULL);
  return step_locks_[h % kLockStripes];
}

Result<bool> LayoutStore::Exists(const std::string& path) {
  Result<uint64_t> size = blobs_->Size(path);
  if (size.ok() || size.status().code() == Code::kFailedPrecondition) return true;  // a blob, or a directory
  if (size.status().code() == Code::kNotFound) return false;
  return size.status();
}

Result<std::vector<uint64_t>> LayoutStore::StepsOf(std::string_view ns) {
  const std::string prefix = NsPrefix(ns);
  TC_ASSIGN_OR_RETURN(BlobListing listed, blobs_->List(prefix, /*one_level=*/true));
  std::vector<uint64_t> steps;
  for (const std::string& d : listed.dirs) {
    uint64_t step = 0;
    std::string_view rest = std::string_view(d).substr(prefix.size());
    if (!rest.empty() && rest.back() == '/' && ParseStepDirName(rest.substr(0, rest.size() - 1), &step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Status LayoutStore::CheckNotCommitted(std::string_view ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(bool committed, Exists(ManifestPath(ns, step)));
  if (committed) return FailedPrecondition("the step is committed and immutable; write to a new step");
  return Status::Ok();
}

// ---- objects ----------------------------------------------------------------

Status LayoutStore::PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                              size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("PutObject", describe_, ns, step, name));
  std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
  const std::string label = ObjectLabel(describe_, ns, step, name);
  if (std::optional<Status> owned = ReserveOwned(ns, step, name)) {
    TC_RETURN_IF_ERROR(Ctx(*owned, "PutObject", label));
    Status put = blobs_->Put(ObjectPath(ns, step, name), data, size, BlobPutOptions{.check_tree = false});
    if (!put.ok()) Disown(ns, step);  // what is there now is unknown: check again
    return Ctx(put, "PutObject", label);
  }
  TC_RETURN_IF_ERROR(Ctx(CheckNotCommitted(ns, step), "PutObject", label));
  return Ctx(blobs_->Put(ObjectPath(ns, step, name), data, size), "PutObject", label);
}

Status LayoutStore::PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                               const std::function<bool()>& cancelled) {
  for (const ObjectBytes& o : objects)
    TC_RETURN_IF_ERROR(ValidateObjectFor("PutObjects", describe_, ns, step, o.name));
  std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
  return Ctx(PutManyImpl(ns, step, objects, cancelled), "PutObjects", StepLabel(describe_, ns, step));
}

Status LayoutStore::PutManyImpl(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                                const std::function<bool()>& cancelled) {
  bool owned = true;
  for (const ObjectBytes& o : objects) {
    std::optional<Status> reserved = ReserveOwned(ns, step, o.name);
    if (!reserved) {
      owned = false;
      break;
    }
    if (!reserved->ok()) {
      Disown(ns, step);  // the names reserved so far were not put
      return *reserved;
    }
  }
  if (!owned) TC_RETURN_IF_ERROR(CheckNotCommitted(ns, step));
  std::vector<BlobBytes> blobs;
  blobs.reserve(objects.size());
  for (const ObjectBytes& o : objects) blobs.push_back({ObjectPath(ns, step, o.name), o.data, o.size});
  Status put = blobs_->PutMany(blobs, cancelled, /*check_tree=*/!owned);
  if (!put.ok() && owned) Disown(ns, step);  // what is there now is unknown: check again
  return put;
}

Status LayoutStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                               void* dst, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObject", describe_, ns, step, name));
  Status s = blobs_->Read(ObjectPath(ns, step, name), offset, dst, size);
  if (s.code() == Code::kFailedPrecondition) s = NotFound(s.message());  // a directory is no object
  return Ctx(s, "ReadObject", ObjectLabel(describe_, ns, step, name));
}

Status LayoutStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                     uint64_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObjectToFile", describe_, ns, step, name));
  if (fd < 0) return InvalidArgument("ReadObjectToFile: no destination file descriptor");
  Status s = blobs_->ReadToFile(ObjectPath(ns, step, name), fd, size);
  if (s.code() == Code::kFailedPrecondition) s = NotFound(s.message());
  return Ctx(s, "ReadObjectToFile", ObjectLabel(describe_, ns, step, name));
}

Result<uint64_t> LayoutStore::ObjectSize(std::string_view ns, uint64_t step, std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ObjectSize", describe_, ns, step, name));
  Result<uint64_t> size = blobs_->Size(ObjectPath(ns, step, name));
  if (size.status().code() == Code::kFailedPrecondition) size = NotFound(size.status().message());
  return Ctx(std::move(size), "ObjectSize", ObjectLabel(describe_, ns, step, name));
}

// ---- commit -----------------------------------------------------------------

Status LayoutStore::CommitStep(const Manifest& manifest) {
  TC_RETURN_IF_ERROR(ValidateStepFor("CommitStep", describe_, manifest.ns, manifest.step));
  const std::string label = StepLabel(describe_, manifest.ns, manifest.step);
  Status valid = manifest.Validate();
  if (!valid.ok()) return valid.WithContext("CommitStep " + label + ": the manifest is invalid");
  if (manifest.checksums_pending) {
    return InvalidArgument("CommitStep " + label +
                           ": the manifest's checksums are still pending (a memory tier's record between "
                           "commit and hash); a durable tier takes only a step whose every object is hashed");
  }
  std::unique_lock<std::shared_mutex> lock(StepLock(manifest.ns, manifest.step));
  Disown(manifest.ns, manifest.step);
  return Ctx(CommitImpl(manifest), "CommitStep", label);
}

Status LayoutStore::CommitImpl(const Manifest& m) {
  const std::string manifest_path = ManifestPath(m.ns, m.step);
  TC_ASSIGN_OR_RETURN(BlobListing listed, blobs_->List(StepPrefix(m.ns, m.step)));
  std::map<std::string_view, uint64_t> sizes;
  for (const BlobInfo& b : listed.blobs) sizes.emplace(b.path, b.size);
  if (sizes.count(manifest_path) != 0) {
    return AlreadyExists("the step is already committed (" + manifest_path + " exists in " + describe_ +
                         "); a step is committed once");
  }
  std::vector<std::string> paths;
  paths.reserve(m.objects.size() + 1);
  for (const ObjectEntry& e : m.objects) {
    std::string path = ObjectPath(m.ns, m.step, e.name);
    auto it = sizes.find(path);
    if (it == sizes.end()) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) +
                                " is listed in the manifest but was never put (no " + path + " in " +
                                describe_ + "); put every object before committing");
    }
    if (it->second != e.size) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) + " is " + std::to_string(it->second) +
                                " bytes at " + path + " but the manifest says " + std::to_string(e.size) +
                                "; the put was incomplete, put it again");
    }
    paths.push_back(std::move(path));
  }
  // The objects' directory entries are durable before the manifest names them.
  paths.push_back(manifest_path);
  TC_RETURN_IF_ERROR(blobs_->SyncParents(paths));
  const std::string json = m.ToJson();
  Status s = blobs_->Put(manifest_path, json.data(), json.size(),
                         BlobPutOptions{.exclusive = true, .check_tree = false});
  if (s.code() == Code::kAlreadyExists) {
    return AlreadyExists("the step was committed concurrently by another writer (" + manifest_path +
                         " exists); a step is committed once (" + s.message() + ")");
  }
  return s;
}

Result<Manifest> LayoutStore::ReadManifest(std::string_view ns, uint64_t step) {
  std::string tag;
  return ReadManifestTagged(ns, step, &tag);
}

Result<Manifest> LayoutStore::ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) {
  tag->clear();
  TC_RETURN_IF_ERROR(ValidateStepFor("ReadManifest", describe_, ns, step));
  Result<Manifest> m = ReadManifestImpl(ns, step, tag);
  if (!m.ok()) tag->clear();
  return Ctx(std::move(m), "ReadManifest", StepLabel(describe_, ns, step));
}

Result<Manifest> LayoutStore::ReadManifestImpl(std::string_view ns, uint64_t step, std::string* tag) {
  const std::string path = ManifestPath(ns, step);
  Result<std::string> text = blobs_->ReadSmallTagged(path, kMaxManifestBytes, tag);
  switch (text.status().code()) {
    case Code::kOk:
      break;
    case Code::kNotFound:
      return NotFound("the step is not committed (" + text.status().message() +
                      "): absent, still being written, or deleted");
    case Code::kFailedPrecondition:
    case Code::kResourceExhausted:
      return Corruption("manifest " + text.status().message() +
                        "; the step cannot be trusted in this tier, restore it from another tier");
    default:
      return text.status();
  }
  return store_internal::ParseStepManifest(*text, describe_ + "/" + path, ns, step);
}

// ---- listing and deletion ---------------------------------------------------

Result<std::vector<uint64_t>> LayoutStore::ListCommittedSteps(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::vector<CommittedStep> committed, ListCommittedStepsTagged(ns));
  std::vector<uint64_t> out;
  out.reserve(committed.size());
  for (const CommittedStep& c : committed) out.push_back(c.step);
  return out;
}

Result<std::vector<CommittedStep>> LayoutStore::ListCommittedStepsTagged(std::string_view ns) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("ListCommittedSteps", describe_, ns));
  return Ctx(blobs_->ListingIsCheaperThanSizes() ? CommittedFromOneListing(ns) : CommittedFromSizes(ns),
             "ListCommittedSteps", NsLabel(describe_, ns));
}

Result<std::vector<CommittedStep>> LayoutStore::CommittedFromOneListing(std::string_view ns) {
  // Every key below "<ns>/": a step is committed when "<ns>/step_N/<manifest>" is among them (a
  // manifest is a blob, never a directory, on S3); anything else there is ignored as StepsOf does.
  const std::string prefix = NsPrefix(ns);
  TC_ASSIGN_OR_RETURN(BlobListing listed, blobs_->List(prefix));
  std::vector<CommittedStep> out;
  for (BlobInfo& b : listed.blobs) {
    std::string_view rest = std::string_view(b.path).substr(prefix.size());
    const size_t slash = rest.find('/');
    uint64_t step = 0;
    if (slash == std::string_view::npos || rest.substr(slash + 1) != kManifestName ||
        !ParseStepDirName(rest.substr(0, slash), &step)) {
      continue;
    }
    out.push_back({step, std::move(b.tag)});
  }
  std::sort(out.begin(), out.end(),
            [](const CommittedStep& a, const CommittedStep& b) { return a.step < b.step; });
  return out;
}

Result<std::vector<CommittedStep>> LayoutStore::CommittedFromSizes(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, StepsOf(ns));
  std::vector<char> committed(steps.size(), 0);
  TC_RETURN_IF_ERROR(ParallelFor(steps.size(), blobs_->Concurrency(), [&](size_t i) -> Status {
    TC_ASSIGN_OR_RETURN(bool exists, Exists(ManifestPath(ns, steps[i])));
    committed[i] = exists ? 1 : 0;
    return Status::Ok();
  }));
  std::vector<CommittedStep> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (committed[i] != 0) out.push_back({steps[i], ""});
  }
  return out;
}

Result<std::vector<std::string>> LayoutStore::ListNamespaces() {
  TC_ASSIGN_OR_RETURN(BlobListing top,
                      Ctx(blobs_->List("", /*one_level=*/true), "ListNamespaces", describe_));
  std::vector<std::string> out;
  for (const std::string& d : top.dirs) {
    const std::string ns = d.substr(0, d.size() - 1);
    if (!ValidateNamespace(ns).ok()) continue;  // a foreign entry
    TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, Ctx(StepsOf(ns), "ListNamespaces", describe_));
    if (!steps.empty()) out.push_back(ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status LayoutStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("DeleteStep", describe_, ns, step));
  const std::string label = StepLabel(describe_, ns, step);
  std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
  // The manifest goes first, durably: from then on the step is invisible, and
  // a crash mid-removal leaves an uncommitted step for SweepUncommitted.
  Disown(ns, step);
  TC_RETURN_IF_ERROR(Ctx(blobs_->Delete({ManifestPath(ns, step)}), "DeleteStep", label));
  TC_RETURN_IF_ERROR(Ctx(blobs_->DeleteBelow(StepPrefix(ns, step)), "DeleteStep", label));
  Own(ns, step);  // empty now, and only this store writes it (object_store.h)
  return Status::Ok();
}

Result<int> LayoutStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("SweepUncommitted", describe_, ns));
  const std::string label = NsLabel(describe_, ns);
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, Ctx(StepsOf(ns), "SweepUncommitted", label));
  int removed = 0;
  for (uint64_t step : steps) {
    if (options.Skips(step)) continue;
    std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
    const std::string step_label = StepLabel(describe_, ns, step);
    TC_ASSIGN_OR_RETURN(bool committed, Ctx(Exists(ManifestPath(ns, step)), "SweepUncommitted", step_label));
    if (committed) {
      if (blobs_->KeepsTemporaries()) RemoveStrayTemporaries(ns, step);
      continue;
    }
    Disown(ns, step);
    TC_RETURN_IF_ERROR(Ctx(blobs_->DeleteBelow(StepPrefix(ns, step)), "SweepUncommitted", step_label));
    Log(LogLevel::kInfo, "store_swept_uncommitted_step").Kv("store", describe_).Kv("ns", ns).Kv("step", step);
    ++removed;
  }
  TC_RETURN_IF_ERROR(Ctx(AbortUncommittedUploads(ns, options), "SweepUncommitted", label));
  return removed;
}

Status LayoutStore::AbortUncommittedUploads(std::string_view ns, const SweepOptions& options) {
  const std::string prefix = NsPrefix(ns);
  std::map<uint64_t, bool> committed;  // step → has a manifest
  Status failed = Status::Ok();
  Result<int> aborted = blobs_->AbortUploads(prefix, [&](std::string_view path) {
    std::string_view rest = path.substr(prefix.size());
    const size_t slash = rest.find('/');
    uint64_t step = 0;
    if (slash == std::string_view::npos || !ParseStepDirName(rest.substr(0, slash), &step)) return false;
    if (options.Skips(step) || !failed.ok()) return false;
    if (committed.count(step) == 0) {
      std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
      Result<bool> exists = Exists(ManifestPath(ns, step));
      if (!exists.ok()) {
        failed = exists.status();
        return false;
      }
      committed[step] = *exists;
    }
    return !committed[step];
  });
  TC_RETURN_IF_ERROR(failed);
  return aborted.status();
}

void LayoutStore::RemoveStrayTemporaries(std::string_view ns, uint64_t step) {
  std::string tag;
  auto manifest = ReadManifestImpl(ns, step, &tag);
  auto listed = manifest.ok() ? blobs_->List(StepPrefix(ns, step)) : Result<BlobListing>(manifest.status());
  if (!listed.ok()) {
    Log(LogLevel::kWarn, "store_sweep_skipped_step")
        .Kv("store", describe_)
        .Kv("ns", ns)
        .Kv("step", step)
        .Err(listed.status());
    return;
  }
  const std::string prefix = StepPrefix(ns, step);
  for (const BlobInfo& b : listed->blobs) {
    const std::string_view rel = std::string_view(b.path).substr(prefix.size());
    const size_t slash = rel.rfind('/');
    const std::string_view file = slash == std::string_view::npos ? rel : rel.substr(slash + 1);
    if (!LooksLikeTmpName(file) || manifest->Find(rel) != nullptr) continue;
    Status s = blobs_->Delete({b.path});
    Log log(s.ok() ? LogLevel::kInfo : LogLevel::kWarn, "store_swept_tmp_file");
    log.Kv("store", describe_).Kv("ns", ns).Kv("step", step).Kv("file", rel);
    if (!s.ok()) log.Err(s);
  }
}

void LayoutStore::Own(std::string_view ns, uint64_t step) {
  MutexLock lock(&owned_mu_);
  if (owned_.size() >= kMaxOwnedSteps) owned_.clear();  // forgetting only costs requests
  owned_[StepKey(std::string(ns), step)].clear();
}

void LayoutStore::Disown(std::string_view ns, uint64_t step) {
  MutexLock lock(&owned_mu_);
  owned_.erase(StepKey(std::string(ns), step));
}

std::optional<Status> LayoutStore::ReserveOwned(std::string_view ns, uint64_t step, std::string_view name) {
  MutexLock lock(&owned_mu_);
  auto it = owned_.find(StepKey(std::string(ns), step));
  if (it == owned_.end()) return std::nullopt;
  return store_internal::AddToTree(it->second, name);
}

}  // namespace tierckpt
