// manifest_cache.h — what `ls` needs of the durable manifests it has read
// (a step's bytes and object count), kept by the manifest's tag (S3: its
// ETag, store/object_store.h's CommittedStep) so that a listing reads again
// only the manifests that changed (decision 133).
//
// The rule: an entry answers only for the exact (base, namespace, step, tag)
// it was read under, and the tag asked for is the one the listing made for
// the same request reported. So a manifest rewritten (its bytes, hence its
// tag, changed) misses and is read again; a step deleted is not listed, so
// not asked for, and Retain forgets it; a damaged manifest is never put in
// (only manifests that parsed are), so it is read, and reported damaged, on
// every listing. Untagged manifests ("": the filesystem, memory) are never
// kept: those stores list as before, one read per step.
//
// Bounded: at most `capacity` entries (default 65,536, about 150 bytes each),
// the least recently used dropped first; forgetting only costs a read.
//
// Thread safety: safe for concurrent use; one mutex, held for the map
// operations only (never across a store call).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/mutex.h"
#include "store/object_store.h"

namespace tierckpt::agent {

// What a listing shows of a durable step from its manifest.
struct ManifestSummary {
  uint64_t bytes = 0;
  uint32_t objects = 0;
};

class DurableManifestCache {
 public:
  static constexpr size_t kDefaultCapacity = 65536;
  // Precondition: capacity > 0.
  explicit DurableManifestCache(size_t capacity = kDefaultCapacity);

  // The summary read under `tag` for step `step` of namespace ns in the base
  // `base` (ObjectStore::DescribeNamespace); nullopt when none was, or tag is "".
  std::optional<ManifestSummary> Find(std::string_view base, std::string_view ns, uint64_t step,
                                      std::string_view tag);
  // Keeps `summary` as read under `tag` (replacing what the step had under
  // another tag). Keeps nothing for tag "".
  void Put(std::string_view base, std::string_view ns, uint64_t step, std::string_view tag,
           ManifestSummary summary);
  // Forgets the steps of ns in base that are not in `listed` (deleted).
  void Retain(std::string_view base, std::string_view ns, const std::set<uint64_t>& listed);
  size_t size() const;

 private:
  using Key = std::tuple<std::string, std::string, uint64_t>;  // base, namespace, step
  struct Entry {
    std::string tag;
    ManifestSummary summary;
    std::list<Key>::iterator lru;  // its place in lru_
  };
  void EraseLocked(std::map<Key, Entry>::iterator it) REQUIRES(mu_);

  // Const after construction.
  const size_t capacity_;

  mutable Mutex mu_;
  std::map<Key, Entry> entries_ GUARDED_BY(mu_);
  std::list<Key> lru_ GUARDED_BY(mu_);  // most recently used first
};

// One committed step of ns as a listing tagged it, whose summary `ls` needs.
struct ListedDurableStep {
  std::string ns;
  CommittedStep listed;
};

// The summary of each step, in order: the cache's when it holds one under
// the listed tag, else the store's manifest read (ReadManifestTagged, at most
// `parallel` at once) and put in the cache under the tag of the bytes read.
// A read that fails is that step's error (kNotFound: deleted since the
// listing; anything else: damaged), never cached.
std::vector<Result<ManifestSummary>> ReadManifestSummaries(ObjectStore& store, DurableManifestCache& cache,
                                                           const std::vector<ListedDurableStep>& steps,
                                                           int parallel);

}  // namespace tierckpt::agent
