// store_url.cc — OpenObjectStore(url): durable-base URLs to stores.
//
// Accepted forms (object_store.h): "file:///abs/path", "/abs/path",
// "relative/path" (made absolute against the current directory),
// "mem://name", "s3://bucket/prefix?..." (s3/s3_config.h: the URL plus the
// AWS environment; S3ObjectStore::Open sends nothing yet, so credential and
// endpoint errors surface on first use). Everything else is
// kInvalidArgument with the list of accepted forms.

#include <unistd.h>

#include <memory>
#include <string>
#include <utility>

#include "common/names.h"
#include "os/fd.h"
#include "store/fs_store.h"
#include "store/mem_store.h"
#include "store/object_store.h"
#include "store/s3_store.h"

namespace tierckpt {
namespace {

constexpr std::string_view kAcceptedForms =
    "accepted durable bases are file:///abs/path, /abs/path, relative/path, mem://name and "
    "s3://bucket/prefix";

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Hands out a shared store (a named MemObjectStore) as a unique_ptr.
class SharedStoreRef final : public ObjectStore {
 public:
  explicit SharedStoreRef(std::shared_ptr<ObjectStore> store) : store_(std::move(store)) {}

  std::string Describe() const override { return store_->Describe(); }
  Status PutObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                   size_t size) override {
    return store_->PutObject(ns, step, name, data, size);
  }
  Status ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                    void* dst, size_t size) override {
    return store_->ReadObject(ns, step, name, offset, dst, size);
  }
  Status ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                          uint64_t size) override {
    return store_->ReadObjectToFile(ns, step, name, fd, size);
  }
  Result<std::string> ReadObjectToFileHashed(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                             uint64_t size) override {
    return store_->ReadObjectToFileHashed(ns, step, name, fd, size);
  }
  Result<uint64_t> ObjectSize(std::string_view ns, uint64_t step, std::string_view name) override {
    return store_->ObjectSize(ns, step, name);
  }
  Status CommitStep(const Manifest& manifest) override { return store_->CommitStep(manifest); }
  Result<Manifest> ReadManifest(std::string_view ns, uint64_t step) override {
    return store_->ReadManifest(ns, step);
  }
  Result<std::vector<uint64_t>> ListCommittedSteps(std::string_view ns) override {
    return store_->ListCommittedSteps(ns);
  }
  Result<Manifest> ReadManifestTagged(std::string_view ns, uint64_t step, std::string* tag) override {
    return store_->ReadManifestTagged(ns, step, tag);
  }
  Result<std::vector<CommittedStep>> ListCommittedStepsTagged(std::string_view ns) override {
    return store_->ListCommittedStepsTagged(ns);
  }
  Result<std::vector<std::string>> ListNamespaces() override { return store_->ListNamespaces(); }
  Status DeleteStep(std::string_view ns, uint64_t step) override {
    return store_->DeleteStep(ns, step);
  }
  Result<int> SweepUncommitted(std::string_view ns, const SweepOptions& options) override {
    return store_->SweepUncommitted(ns, options);
  }

 private:
  const std::shared_ptr<ObjectStore> store_;
};

Result<std::unique_ptr<ObjectStore>> OpenFs(const std::string& path, std::string_view url) {
  auto store = FsObjectStore::Open(path);
  if (!store.ok()) {
    return store.status().WithContext("cannot open durable base " + QuoteForMessage(url));
  }
  return std::unique_ptr<ObjectStore>(std::move(store).value());
}

Result<std::string> CurrentDir() {
  std::string buf(4096, '\0');
  if (::getcwd(buf.data(), buf.size()) == nullptr) {
    return ErrnoStatus("cannot resolve a relative durable base: getcwd");
  }
  buf.resize(buf.find('\0'));
  return buf;
}

}  // namespace

Result<std::unique_ptr<ObjectStore>> OpenObjectStore(std::string_view url) {
  if (url.empty()) return InvalidArgument("the durable base is empty; " + std::string(kAcceptedForms));
  if (url.find('\0') != std::string_view::npos) {
    return InvalidArgument("durable base " + QuoteForMessage(url) + " contains a NUL byte; " +
                           std::string(kAcceptedForms));
  }
  if (StartsWith(url, "s3://")) {
    auto config = s3::ParseS3Url(url);
    if (!config.ok()) return config.status();
    auto store = S3ObjectStore::Open(*config);
    if (!store.ok()) {
      return store.status().WithContext("cannot open durable base " + s3::DescribeS3(*config));
    }
    return std::unique_ptr<ObjectStore>(std::move(store).value());
  }
  if (StartsWith(url, "mem://")) {
    auto store = NamedMemStore(url.substr(6));
    if (!store.ok()) return store.status().WithContext(std::string(kAcceptedForms));
    return std::unique_ptr<ObjectStore>(std::make_unique<SharedStoreRef>(std::move(store).value()));
  }
  if (StartsWith(url, "file://")) {
    std::string_view path = url.substr(7);
    if (!StartsWith(path, "/")) {
      return InvalidArgument("durable base " + QuoteForMessage(url) +
                             " is a file:// URL without an absolute path (write file:///abs/path, "
                             "three slashes); " + std::string(kAcceptedForms));
    }
    return OpenFs(std::string(path), url);
  }
  if (url.find("://") != std::string_view::npos) {
    return InvalidArgument("durable base " + QuoteForMessage(url) + " has an unknown scheme; " +
                           std::string(kAcceptedForms));
  }
  if (StartsWith(url, "/")) return OpenFs(std::string(url), url);
  TC_ASSIGN_OR_RETURN(std::string cwd, CurrentDir());
  return OpenFs(cwd + "/" + std::string(url), url);
}

}  // namespace tierckpt
