// mem_store.cc — the registry of named MemObjectStores (mem_store.h).
#include "store/mem_store.h"

#include <map>
#include <utility>

#include "common/mutex.h"
#include "common/names.h"

namespace tierckpt {
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
