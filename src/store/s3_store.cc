// s3_store.cc — see s3_store.h.
#include "store/s3_store.h"

#include <algorithm>
#include <functional>
#include <map>

#include "common/log.h"
#include "common/names.h"
#include "os/parallel.h"
#include "s3/s3_open.h"
#include "store/store_common.h"

namespace tierckpt {
namespace {

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

// "step_0000000012/" → 12.
bool ParseStepPrefix(std::string_view rest, uint64_t* step) {
  if (rest.empty() || rest.back() != '/') return false;
  return ParseStepDirName(rest.substr(0, rest.size() - 1), step);
}

}  // namespace

Result<std::unique_ptr<S3ObjectStore>> S3ObjectStore::Open(const s3::S3Config& config) {
  // Every name tierckpt accepts must fit in an S3 key (at most 1024 bytes):
  // "<prefix>/<namespace>/step_<10 digits>/<object name>" at their limits.
  constexpr size_t kS3MaxKeyBytes = 1024;
  const size_t fixed = kMaxNamespaceLength + 1 + StepDirName(0).size() + 1 + kMaxObjectNameLength;
  const size_t with_prefix = (config.prefix.empty() ? 0 : config.prefix.size() + 1) + fixed;
  if (with_prefix > kS3MaxKeyBytes) {
    return InvalidArgument("the S3 prefix " + QuoteForMessage(config.prefix) + " of s3://" + config.bucket + " is " +
                           std::to_string(config.prefix.size()) + " bytes: with the longest namespace (" +
                           std::to_string(kMaxNamespaceLength) + " bytes) and object name (" +
                           std::to_string(kMaxObjectNameLength) + " bytes) tierckpt accepts, keys would be " +
                           std::to_string(with_prefix) + " bytes, past S3's limit of " +
                           std::to_string(kS3MaxKeyBytes) + "; use a prefix of at most " +
                           std::to_string(kS3MaxKeyBytes - fixed - 1) + " bytes");
  }
  TC_ASSIGN_OR_RETURN(s3::S3ClientParts parts, s3::MakeS3ClientParts(config));
  return std::make_unique<S3ObjectStore>(config, std::move(parts.transport), std::move(parts.signer));
}

S3ObjectStore::S3ObjectStore(s3::S3Config config, std::shared_ptr<s3::HttpTransport> transport,
                             std::shared_ptr<s3::RequestSigner> signer, s3::RetryOptions retry)
    : describe_(s3::DescribeS3(config)),
      base_(config.prefix.empty() ? "" : config.prefix + "/"),
      client_(std::move(config), std::move(transport), std::move(signer), std::move(retry)) {}

std::string S3ObjectStore::Describe() const { return describe_; }

std::string S3ObjectStore::NsPrefix(std::string_view ns) const {
  return base_ + std::string(ns) + "/";
}
std::string S3ObjectStore::StepPrefix(std::string_view ns, uint64_t step) const {
  return NsPrefix(ns) + StepDirName(step) + "/";
}
std::string S3ObjectStore::ObjectKey(std::string_view ns, uint64_t step,
                                     std::string_view name) const {
  return StepPrefix(ns, step) + std::string(name);
}
std::string S3ObjectStore::ManifestKey(std::string_view ns, uint64_t step) const {
  return StepPrefix(ns, step) + std::string(kManifestName);
}
std::string S3ObjectStore::Url(const std::string& key) const {
  return "s3://" + client_.config().bucket + "/" + key;
}

std::shared_mutex& S3ObjectStore::StepLock(std::string_view ns, uint64_t step) const {
  const size_t h =
      std::hash<std::string_view>()(ns) ^ (std::hash<uint64_t>()(step) * 0x9e3779b97f4a7c15ULL);
  return step_locks_[h % kLockStripes];
}

Result<bool> S3ObjectStore::Exists(const std::string& key) {
  Result<s3::ObjectInfo> info = client_.HeadObject(key);
  if (info.ok()) return true;
  if (info.status().code() == Code::kNotFound) return false;
  return info.status();
}

Result<std::vector<uint64_t>> S3ObjectStore::StepsOf(std::string_view ns) {
  const std::string prefix = NsPrefix(ns);
  s3::ListOptions options;
  options.delimiter = "/";
  TC_ASSIGN_OR_RETURN(s3::ListResult list, client_.ListObjects(prefix, options));
  std::vector<uint64_t> steps;
  for (const std::string& p : list.common_prefixes) {
    uint64_t step = 0;
    if (p.compare(0, prefix.size(), prefix) == 0 &&
        ParseStepPrefix(std::string_view(p).substr(prefix.size()), &step)) {
      steps.push_back(step);
    }
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

Result<std::vector<std::string>> S3ObjectStore::KeysUnder(const std::string& prefix) {
  TC_ASSIGN_OR_RETURN(s3::ListResult list, client_.ListObjects(prefix));
  std::vector<std::string> keys;
  keys.reserve(list.objects.size());
  for (s3::ListedObject& o : list.objects) keys.push_back(std::move(o.key));
  return keys;
}

// ---- objects ----------------------------------------------------------------

Status S3ObjectStore::PutObject(std::string_view ns, uint64_t step, std::string_view name,
                                const void* data, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("PutObject", describe_, ns, step, name));
  std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
  return Ctx(PutImpl(ns, step, name, data, size), "PutObject",
             ObjectLabel(describe_, ns, step, name));
}

Status S3ObjectStore::PutImpl(std::string_view ns, uint64_t step, std::string_view name,
                              const void* data, size_t size) {
  if (std::optional<Status> owned = ReserveOwned(ns, step, name)) {
    TC_RETURN_IF_ERROR(*owned);
    Status uploaded = client_.Upload(ObjectKey(ns, step, name), data, size);
    if (!uploaded.ok()) Disown(ns, step);  // what is there now is unknown: check remotely again
    return uploaded;
  }
  TC_RETURN_IF_ERROR(CheckNotCommitted(ns, step));
  TC_RETURN_IF_ERROR(CheckNameRemotely(ns, step, name));
  return client_.Upload(ObjectKey(ns, step, name), data, size);
}

Status S3ObjectStore::PutObjects(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
                                 const std::function<bool()>& cancelled) {
  for (const ObjectBytes& o : objects) TC_RETURN_IF_ERROR(ValidateObjectFor("PutObjects", describe_, ns, step, o.name));
  std::shared_lock<std::shared_mutex> lock(StepLock(ns, step));
  return Ctx(PutManyImpl(ns, step, objects, cancelled), "PutObjects", StepLabel(describe_, ns, step));
}

Status S3ObjectStore::PutManyImpl(std::string_view ns, uint64_t step, const std::vector<ObjectBytes>& objects,
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
  if (!owned) {
    TC_RETURN_IF_ERROR(CheckNotCommitted(ns, step));
    std::set<std::string> names;  // the batch's names must not clash among themselves either
    for (const ObjectBytes& o : objects) TC_RETURN_IF_ERROR(AddName(names, o.name));
    TC_RETURN_IF_ERROR(ParallelFor(objects.size(), client_.config().concurrency,
                                   [&](size_t i) { return CheckNameRemotely(ns, step, objects[i].name); }));
  }
  std::vector<s3::UploadItem> items;
  items.reserve(objects.size());
  for (const ObjectBytes& o : objects) items.push_back({ObjectKey(ns, step, o.name), o.data, o.size});
  Status uploaded = client_.UploadMany(items, cancelled);
  if (!uploaded.ok() && owned) Disown(ns, step);  // what is there now is unknown: check remotely again
  return uploaded;
}

Status S3ObjectStore::CheckNotCommitted(std::string_view ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(bool committed, Exists(ManifestKey(ns, step)));
  if (committed) return FailedPrecondition("the step is committed and immutable; write to a new step");
  return Status::Ok();
}

Status S3ObjectStore::CheckNameRemotely(std::string_view ns, uint64_t step, std::string_view name) {
  // An object name cannot also be a "directory" (the layout must download
  // into a file tree): no ancestor may be an object, and nothing may lie below.
  for (size_t slash = name.find('/'); slash != std::string_view::npos;
       slash = name.find('/', slash + 1)) {
    const std::string ancestor = ObjectKey(ns, step, name.substr(0, slash));
    TC_ASSIGN_OR_RETURN(bool is_object, Exists(ancestor));
    if (is_object) {
      return FailedPrecondition("object " + QuoteForMessage(name.substr(0, slash)) +
                                " exists (" + Url(ancestor) + "), so it cannot also be a "
                                "directory holding " + QuoteForMessage(name));
    }
  }
  const std::string key = ObjectKey(ns, step, name);
  s3::ListOptions one;
  one.page_size = 1;
  one.max_results = 1;
  TC_ASSIGN_OR_RETURN(s3::ListResult below, client_.ListObjects(key + "/", one));
  if (!below.objects.empty()) {
    return FailedPrecondition(Url(key) + "/ holds other objects (" + Url(below.objects[0].key) +
                              "); an object name cannot also be a directory");
  }
  return Status::Ok();
}

Status S3ObjectStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name,
                                 uint64_t offset, void* dst, size_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObject", describe_, ns, step, name));
  return Ctx(ReadImpl(ns, step, name, offset, s3::ByteSink::Memory(dst), size), "ReadObject",
             ObjectLabel(describe_, ns, step, name));
}

Status S3ObjectStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name,
                                       int fd, uint64_t size) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ReadObjectToFile", describe_, ns, step, name));
  if (fd < 0) return InvalidArgument("ReadObjectToFile: no destination file descriptor");
  return Ctx(ReadImpl(ns, step, name, 0, s3::ByteSink::File(fd, 0), static_cast<size_t>(size)),
             "ReadObjectToFile", ObjectLabel(describe_, ns, step, name));
}

Status S3ObjectStore::ReadImpl(std::string_view ns, uint64_t step, std::string_view name,
                               uint64_t offset, const s3::ByteSink& dst, size_t size) {
  const std::string key = ObjectKey(ns, step, name);
  const std::string range = "[" + std::to_string(offset) + ", " + std::to_string(offset) + " + " +
                            std::to_string(size) + ")";
  if (size == 0 || offset > UINT64_MAX - size) {  // nothing to GET: check the size
    Result<s3::ObjectInfo> info = client_.HeadObject(key);
    if (info.status().code() == Code::kNotFound) {
      return NotFound("no object at " + Url(key) + "; it was never put or its step was deleted");
    }
    TC_RETURN_IF_ERROR(info.status());
    if (offset > info->size || size > info->size - offset) {
      return Corruption("object " + Url(key) + " is " + std::to_string(info->size) +
                        " bytes, shorter than the requested range " + range +
                        "; the copy is truncated, restore the step from another tier");
    }
    return Status::Ok();
  }
  Status s = client_.Download(key, offset, dst, size);
  if (s.code() == Code::kNotFound) {
    return NotFound("no object at " + Url(key) + "; it was never put or its step was deleted (" +
                    s.message() + ")");
  }
  if (s.code() == Code::kCorruption) {
    return Corruption("object " + Url(key) + " is shorter than the requested range " + range +
                      " (" + s.message() + "); the copy is truncated, restore the step from "
                      "another tier");
  }
  return s;
}

Result<uint64_t> S3ObjectStore::ObjectSize(std::string_view ns, uint64_t step,
                                           std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateObjectFor("ObjectSize", describe_, ns, step, name));
  const std::string key = ObjectKey(ns, step, name);
  Result<s3::ObjectInfo> info = client_.HeadObject(key);
  if (info.status().code() == Code::kNotFound) {
    return NotFound("ObjectSize " + ObjectLabel(describe_, ns, step, name) + ": no object at " +
                    Url(key) + "; it was never put or its step was deleted");
  }
  TC_RETURN_IF_ERROR(Ctx(info.status(), "ObjectSize", ObjectLabel(describe_, ns, step, name)));
  return info->size;
}

// ---- commit -----------------------------------------------------------------

Status S3ObjectStore::CommitStep(const Manifest& manifest) {
  TC_RETURN_IF_ERROR(ValidateStepFor("CommitStep", describe_, manifest.ns, manifest.step));
  const std::string label = StepLabel(describe_, manifest.ns, manifest.step);
  Status valid = manifest.Validate();
  if (!valid.ok()) return valid.WithContext("CommitStep " + label + ": the manifest is invalid");
  std::unique_lock<std::shared_mutex> lock(StepLock(manifest.ns, manifest.step));
  Disown(manifest.ns, manifest.step);
  return Ctx(CommitImpl(manifest), "CommitStep", label);
}

Status S3ObjectStore::CommitImpl(const Manifest& m) {
  const std::string manifest_key = ManifestKey(m.ns, m.step);
  TC_ASSIGN_OR_RETURN(s3::ListResult list, client_.ListObjects(StepPrefix(m.ns, m.step)));
  std::map<std::string_view, uint64_t> sizes;
  for (const s3::ListedObject& o : list.objects) sizes.emplace(o.key, o.size);
  if (sizes.count(manifest_key) != 0) {
    return AlreadyExists("the step is already committed (" + Url(manifest_key) +
                         " exists); a step is committed once");
  }
  for (const ObjectEntry& e : m.objects) {
    const std::string key = ObjectKey(m.ns, m.step, e.name);
    auto it = sizes.find(key);
    if (it == sizes.end()) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) + " is listed in the manifest "
                                "but was never put (no key " + Url(key) + "); put every object "
                                "before committing");
    }
    if (it->second != e.size) {
      return FailedPrecondition("object " + QuoteForMessage(e.name) + " is " +
                                std::to_string(it->second) + " bytes at " + Url(key) +
                                " but the manifest says " + std::to_string(e.size) +
                                "; the put was incomplete, put it again");
    }
  }
  const std::string json = m.ToJson();
  Status s = client_.PutObject(manifest_key, json.data(), json.size(), s3::PutOptions{true});
  if (s.code() == Code::kAlreadyExists) {
    return AlreadyExists("the step was committed concurrently by another writer (" +
                         Url(manifest_key) + " exists); a step is committed once (" +
                         s.message() + ")");
  }
  return s;
}

Result<Manifest> S3ObjectStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("ReadManifest", describe_, ns, step));
  return Ctx(ReadManifestImpl(ns, step), "ReadManifest", StepLabel(describe_, ns, step));
}

Result<Manifest> S3ObjectStore::ReadManifestImpl(std::string_view ns, uint64_t step) {
  const std::string key = ManifestKey(ns, step);
  Result<std::string> text = client_.GetObject(key, kMaxManifestBytes);
  if (text.status().code() == Code::kNotFound) {
    return NotFound("the step is not committed (no " + Url(key) +
                    "): absent, still being written, or deleted");
  }
  if (text.status().code() == Code::kResourceExhausted) {
    return Corruption("manifest " + text.status().message() +
                      "; the step cannot be trusted in this tier, restore it from another tier");
  }
  TC_RETURN_IF_ERROR(text.status());
  return store_internal::ParseStepManifest(*text, Url(key), ns, step);
}

// ---- listing and deletion ---------------------------------------------------

Result<std::vector<uint64_t>> S3ObjectStore::ListCommittedSteps(std::string_view ns) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("ListCommittedSteps", describe_, ns));
  const std::string label = describe_ + " namespace " + QuoteForMessage(ns);
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, Ctx(StepsOf(ns), "ListCommittedSteps", label));
  std::vector<char> committed(steps.size(), 0);
  Status s = ParallelFor(steps.size(), client_.config().concurrency, [&](size_t i) -> Status {
    TC_ASSIGN_OR_RETURN(bool exists, Exists(ManifestKey(ns, steps[i])));
    committed[i] = exists ? 1 : 0;
    return Status::Ok();
  });
  TC_RETURN_IF_ERROR(Ctx(s, "ListCommittedSteps", label));
  std::vector<uint64_t> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (committed[i] != 0) out.push_back(steps[i]);
  }
  return out;
}

Result<std::vector<std::string>> S3ObjectStore::ListNamespaces() {
  s3::ListOptions options;
  options.delimiter = "/";
  TC_ASSIGN_OR_RETURN(s3::ListResult top,
                      Ctx(client_.ListObjects(base_, options), "ListNamespaces", describe_));
  std::vector<std::string> out;
  for (const std::string& p : top.common_prefixes) {
    if (p.size() <= base_.size() + 1 || p.compare(0, base_.size(), base_) != 0) continue;
    const std::string ns = p.substr(base_.size(), p.size() - base_.size() - 1);
    if (!ValidateNamespace(ns).ok()) continue;  // a foreign key
    TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, Ctx(StepsOf(ns), "ListNamespaces", describe_));
    if (!steps.empty()) out.push_back(ns);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Status S3ObjectStore::DeleteStep(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateStepFor("DeleteStep", describe_, ns, step));
  const std::string label = StepLabel(describe_, ns, step);
  std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
  // The manifest goes first: from then on the step is invisible, and a crash
  // mid-removal leaves an uncommitted step for SweepUncommitted.
  Disown(ns, step);
  TC_RETURN_IF_ERROR(Ctx(client_.DeleteObject(ManifestKey(ns, step)), "DeleteStep", label));
  TC_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                      Ctx(KeysUnder(StepPrefix(ns, step)), "DeleteStep", label));
  TC_RETURN_IF_ERROR(Ctx(client_.DeleteObjects(keys), "DeleteStep", label));
  Own(ns, step);  // empty now, and only this store writes it (object_store.h)
  return Status::Ok();
}

void S3ObjectStore::Own(std::string_view ns, uint64_t step) {
  MutexLock lock(&owned_mu_);
  if (owned_.size() >= kMaxOwnedSteps) owned_.clear();  // forgetting only costs requests
  owned_[StepKey(std::string(ns), step)].clear();
}

void S3ObjectStore::Disown(std::string_view ns, uint64_t step) {
  MutexLock lock(&owned_mu_);
  owned_.erase(StepKey(std::string(ns), step));
}

std::optional<Status> S3ObjectStore::ReserveOwned(std::string_view ns, uint64_t step, std::string_view name) {
  MutexLock lock(&owned_mu_);
  auto it = owned_.find(StepKey(std::string(ns), step));
  if (it == owned_.end()) return std::nullopt;
  return AddName(it->second, name);
}

Status S3ObjectStore::AddName(std::set<std::string>& names, std::string_view name) {
  for (size_t slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1)) {
    if (names.count(std::string(name.substr(0, slash))) != 0) {
      return FailedPrecondition("object " + QuoteForMessage(name.substr(0, slash)) +
                                " exists, so it cannot also be a directory holding " + QuoteForMessage(name));
    }
  }
  const std::string below = std::string(name) + "/";
  auto next = names.lower_bound(below);
  if (next != names.end() && next->compare(0, below.size(), below) == 0) {
    return FailedPrecondition("object " + QuoteForMessage(*next) + " lies below " + QuoteForMessage(name) +
                              "; an object name cannot also be a directory");
  }
  names.emplace(name);
  return Status::Ok();
}

Result<int> S3ObjectStore::SweepUncommitted(std::string_view ns, const SweepOptions& options) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor("SweepUncommitted", describe_, ns));
  const std::string label = describe_ + " namespace " + QuoteForMessage(ns);
  TC_ASSIGN_OR_RETURN(std::vector<uint64_t> steps, Ctx(StepsOf(ns), "SweepUncommitted", label));
  int removed = 0;
  for (uint64_t step : steps) {
    if (options.Skips(step)) continue;
    std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
    const std::string step_label = StepLabel(describe_, ns, step);
    TC_ASSIGN_OR_RETURN(bool committed,
                        Ctx(Exists(ManifestKey(ns, step)), "SweepUncommitted", step_label));
    if (committed) continue;
    TC_ASSIGN_OR_RETURN(std::vector<std::string> keys,
                        Ctx(KeysUnder(StepPrefix(ns, step)), "SweepUncommitted", step_label));
    Disown(ns, step);
    TC_RETURN_IF_ERROR(Ctx(client_.DeleteObjects(keys), "SweepUncommitted", step_label));
    Log(LogLevel::kInfo, "store_swept_uncommitted_step")
        .Kv("store", describe_).Kv("ns", ns).Kv("step", step)
        .Kv("keys", static_cast<uint64_t>(keys.size()));
    ++removed;
  }
  TC_RETURN_IF_ERROR(Ctx(AbortUncommittedUploads(ns, options), "SweepUncommitted", label));
  return removed;
}

Status S3ObjectStore::AbortUncommittedUploads(std::string_view ns, const SweepOptions& options) {
  const std::string prefix = NsPrefix(ns);
  TC_ASSIGN_OR_RETURN(std::vector<s3::MultipartUpload> uploads, client_.ListMultipartUploads(prefix));
  std::map<uint64_t, bool> committed;  // step → has a manifest
  for (const s3::MultipartUpload& u : uploads) {
    std::string_view rest = std::string_view(u.key).substr(prefix.size());
    const size_t slash = rest.find('/');
    uint64_t step = 0;
    if (slash == std::string_view::npos || !ParseStepDirName(rest.substr(0, slash), &step)) continue;
    if (options.Skips(step)) continue;
    std::unique_lock<std::shared_mutex> lock(StepLock(ns, step));
    if (committed.count(step) == 0) {
      TC_ASSIGN_OR_RETURN(committed[step], Exists(ManifestKey(ns, step)));
    }
    if (committed[step]) continue;
    Status s = client_.AbortMultipartUpload(u.key, u.upload_id);
    if (!s.ok() && s.code() != Code::kNotFound) return s;  // NoSuchUpload: gone already
    Log(LogLevel::kInfo, "store_aborted_upload")
        .Kv("store", describe_).Kv("ns", ns).Kv("step", step).Kv("key", u.key);
  }
  return Status::Ok();
}

}  // namespace tierckpt
