// manifest_cache.cc — see manifest_cache.h.
#include "agent/manifest_cache.h"

#include <utility>

#include "os/parallel.h"

namespace tierckpt::agent {

DurableManifestCache::DurableManifestCache(size_t capacity) : capacity_(capacity) {}

std::optional<ManifestSummary> DurableManifestCache::Find(std::string_view base, std::string_view ns,
                                                          uint64_t step, std::string_view tag) {
  if (tag.empty()) return std::nullopt;
  MutexLock lock(&mu_);
  auto it = entries_.find(Key(base, ns, step));
  if (it == entries_.end() || it->second.tag != tag) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return it->second.summary;
}

void DurableManifestCache::Put(std::string_view base, std::string_view ns, uint64_t step,
                               std::string_view tag, ManifestSummary summary) {
  if (tag.empty()) return;
  MutexLock lock(&mu_);
  auto it = entries_.find(Key(base, ns, step));
  if (it == entries_.end()) {
    Key key(base, ns, step);
    lru_.push_front(key);
    it = entries_.emplace(std::move(key), Entry{std::string(tag), summary, lru_.begin()}).first;
  } else {
    it->second.tag = std::string(tag);
    it->second.summary = summary;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  while (entries_.size() > capacity_) EraseLocked(entries_.find(lru_.back()));
}

void DurableManifestCache::Retain(std::string_view base, std::string_view ns,
                                  const std::set<uint64_t>& listed) {
  MutexLock lock(&mu_);
  auto it = entries_.lower_bound(Key(base, ns, 0));
  while (it != entries_.end() && std::get<0>(it->first) == base && std::get<1>(it->first) == ns) {
    auto next = std::next(it);
    if (listed.count(std::get<2>(it->first)) == 0) EraseLocked(it);
    it = next;
  }
}

size_t DurableManifestCache::size() const {
  MutexLock lock(&mu_);
  return entries_.size();
}

void DurableManifestCache::EraseLocked(std::map<Key, Entry>::iterator it) {
  lru_.erase(it->second.lru);
  entries_.erase(it);
}

std::vector<Result<ManifestSummary>> ReadManifestSummaries(ObjectStore& store, DurableManifestCache& cache,
                                                           const std::vector<ListedDurableStep>& steps,
                                                           int parallel) {
  std::vector<Result<ManifestSummary>> out(steps.size(), Result<ManifestSummary>(ManifestSummary{}));
  std::vector<size_t> to_read;
  std::vector<std::string> bases(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    const ListedDurableStep& s = steps[i];
    bases[i] = store.DescribeNamespace(s.ns);
    if (auto hit = cache.Find(bases[i], s.ns, s.listed.step, s.listed.manifest_tag)) {
      out[i] = *hit;
    } else {
      to_read.push_back(i);
    }
  }
  (void)ParallelFor(to_read.size(), parallel, [&](size_t k) {
    const size_t i = to_read[k];
    const ListedDurableStep& s = steps[i];
    std::string tag;
    Result<Manifest> m = store.ReadManifestTagged(s.ns, s.listed.step, &tag);
    if (!m.ok()) {
      out[i] = m.status();
      return Status::Ok();
    }
    const ManifestSummary summary{m->TotalBytes(), static_cast<uint32_t>(m->objects.size())};
    cache.Put(bases[i], s.ns, s.listed.step, tag, summary);
    out[i] = summary;
    return Status::Ok();
  });
  return out;
}

}  // namespace tierckpt::agent
