#include "tier/tier_restore.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "common/mutex.h"
#include "os/mapping.h"
#include "tier/step_state.h"

namespace tierckpt::agent {

Status ForEachObject(const Manifest& manifest, size_t threads,
                     const std::function<Status(const ObjectEntry&)>& fn) {
  const size_t n = manifest.objects.size();
  threads = std::min(n, threads);
  if (threads <= 1) {
    for (const auto& e : manifest.objects) TC_RETURN_IF_ERROR(fn(e));
    return Status::Ok();
  }
  std::atomic<size_t> next{0};
  Mutex first_mu;
  Status first = Status::Ok();
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < n && !failed.load(); i = next++) {
      Status st = fn(manifest.objects[i]);
      if (!st.ok()) {
        MutexLock lock(&first_mu);
        if (first.ok()) first = st;
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  MutexLock lock(&first_mu);
  return first;
}

Status FillObjectFile(ObjectStore& store, const std::string& ns, uint64_t step, const ObjectEntry& e, int fd,
                      const std::string& path) {
  const std::string what = StepLabel(ns, step) + "/" + e.name;
  // Written through the descriptor (pwrite/sendfile by the store): a fresh
  // tmpfs page is then filled once, not zeroed for a mapping and then filled.
  Result<std::string> hashed = store.ReadObjectToFileHashed(ns, step, e.name, fd, e.size);
  if (!hashed.ok())
    return hashed.status().WithContext("restoring " + what + " from " + store.DescribeNamespace(ns));
  std::string actual = std::move(hashed).value();
  if (actual.empty()) {  // the store did not hash what it wrote: read it back
    // Populated: one pass over the page tables instead of a fault per page.
    TC_ASSIGN_OR_RETURN(Mapping map,
                        Mapping::Map(fd, e.size, Mapping::Access::kReadOnly, /*populate=*/true, path));
    actual = ComputeChecksum(map.data(), map.size()).ToString();
  }
  if (actual != e.checksum) {
    return Corruption("the copy of object " + what + " in " + store.DescribeNamespace(ns) + " hashes to " +
                      actual + " but its manifest says " + e.checksum +
                      "; that copy is damaged: restore from another tier, or delete it (a durable step: "
                      "`tierckpt prune`, DeleteStep with durable_too)");
  }
  return Status::Ok();
}

}  // namespace tierckpt::agent
