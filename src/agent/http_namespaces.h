// http_namespaces.h — the namespaces of the checkpoint HTTP API
// (agent/http_api.h): each one's rank count (the shards a step needs before
// it commits, data ranks and metadata ranks together) and how many committed
// steps memory keeps (MemoryTier::SetNamespaceKeep).
//
// Kept in <root>/http_namespaces.json (written atomically on every change),
// so they live as long as the memory tier's steps do: an agent restarted on
// the same root serves the same namespaces. A file that cannot be parsed is
// an error naming it at start (nothing is overwritten), never an empty list.
//
// Thread-safe (one mutex, never held across a call out).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr std::string_view kHttpNamespacesFileName = "http_namespaces.json";
inline constexpr uint32_t kMaxHttpRanks = 1u << 20;
inline constexpr uint32_t kMaxHttpStepsRetained = 10'000;

struct HttpNamespace {
  uint32_t num_ranks = 0;       // 1..kMaxHttpRanks
  uint32_t steps_retained = 3;  // 1..kMaxHttpStepsRetained
};

class HttpNamespaces {
 public:
  // Reads path if it exists.
  static Result<std::unique_ptr<HttpNamespaces>> Open(std::string path);

  std::optional<HttpNamespace> Get(const std::string& ns) const;
  std::map<std::string, HttpNamespace> All() const;
  // kAlreadyExists if ns exists; kInvalidArgument for values out of range.
  Status Create(const std::string& ns, HttpNamespace config);
  // false if it did not exist.
  Result<bool> Remove(const std::string& ns);

 private:
  explicit HttpNamespaces(std::string path) : path_(std::move(path)) {}
  Status SaveLocked() const REQUIRES(mu_);

  const std::string path_;
  mutable Mutex mu_;
  std::map<std::string, HttpNamespace> map_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
