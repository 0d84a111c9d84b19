// durable_bases.cc — see durable_bases.h.
#include "agent/durable_bases.h"

#include <fnmatch.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <system_error>

#include "common/log.h"
#include "common/names.h"
#include "os/files.h"

namespace tierckpt::agent {
namespace {

constexpr std::string_view kForms =
    "give an absolute path (/dir or file:///dir), s3://bucket/prefix or mem://name";

Status BadBase(std::string_view url, std::string_view why) {
  return InvalidArgument("durable base " + QuoteForMessage(url.substr(0, 200)) + " " + std::string(why) +
                         "; " + std::string(kForms));
}

// The absolute path with "." and ".." removed and the symlinks of its
// existing part resolved, as realpath(3) would for an existing path.
Result<std::string> CanonicalPath(std::string_view url, const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::path(path), ec);
  if (ec) return BadBase(url, "cannot be resolved (" + ec.message() + ")");
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Whether location matches pattern; "X/*" also matches X itself.
bool Matches(const std::string& pattern, const std::string& location) {
  if (::fnmatch(pattern.c_str(), location.c_str(), 0) == 0) return true;
  if (pattern.size() >= 2 && pattern.compare(pattern.size() - 2, 2, "/*") == 0) {
    return pattern.substr(0, pattern.size() - 2) == location;
  }
  return false;
}

}  // namespace

Result<DurableBase> CanonicalDurableBase(std::string_view url, const std::string& relative_to) {
  if (url.empty()) return BadBase(url, "is empty");
  if (url.size() > kMaxDurableBaseLength) {
    return BadBase(url, "is longer than " + std::to_string(kMaxDurableBaseLength) + " bytes");
  }
  for (char c : url) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return BadBase(url, "holds a control character");
  }
  DurableBase b;
  if (url.starts_with("s3://") || url.starts_with("mem://")) {
    const size_t q = url.find('?');
    std::string_view loc = url.substr(0, q);
    if (q != std::string_view::npos) b.options = std::string(url.substr(q + 1));
    const size_t scheme = loc.find("://") + 3;
    while (loc.size() > scheme && loc.back() == '/') loc.remove_suffix(1);
    if (loc.size() == scheme) return BadBase(url, "names no bucket");
    b.location = std::string(loc);
    return b;
  }
  std::string_view path = url.starts_with("file://") ? url.substr(7) : url;
  if (path.find("://") != std::string_view::npos) return BadBase(url, "has a scheme tierckpt does not know");
  if (path.empty()) return BadBase(url, "names no directory");
  std::string abs(path);
  if (abs[0] != '/') {
    if (relative_to.empty()) {
      return BadBase(url, "is relative (the agent's working directory is not the job's)");
    }
    abs = relative_to + "/" + abs;
  }
  TC_ASSIGN_OR_RETURN(b.location, CanonicalPath(url, abs));
  return b;
}

Result<DurableAllowList> DurableAllowList::Parse(const std::vector<std::string>& patterns) {
  DurableAllowList list;
  for (const std::string& p : patterns) {
    if (p.empty()) continue;
    const size_t q = p.find('?');
    const std::string loc = p.substr(0, q);
    DurableBase b;
    if (q != std::string::npos) b.options = p.substr(q + 1);
    if (loc.starts_with("s3://") || loc.starts_with("mem://")) {
      b.location = loc;
    } else {
      std::string path = loc.starts_with("file://") ? loc.substr(7) : loc;
      if (path.empty() || path[0] != '/') {
        return InvalidArgument("pattern " + QuoteForMessage(p) +
                               " is not an absolute path, s3://bucket/prefix or mem://name (with * and [...] "
                               "wildcards, e.g. s3://team-bucket/* or /mnt/fsx/*)");
      }
      // The directory above the first wildcard is canonicalized as a base is.
      const size_t wild = path.find_first_of("*[");
      if (wild == std::string::npos) {
        TC_ASSIGN_OR_RETURN(b.location, CanonicalPath(p, path));
      } else {
        const size_t slash = path.rfind('/', wild);  // path[0] is '/'
        TC_ASSIGN_OR_RETURN(std::string dir, CanonicalPath(p, slash == 0 ? "/" : path.substr(0, slash)));
        b.location = (dir == "/" ? "" : dir) + path.substr(slash);
      }
    }
    list.patterns_.push_back(std::move(b));
  }
  return list;
}

Result<DurableBase> DurableAllowList::Resolve(const DurableBase& base) const {
  for (const DurableBase& p : patterns_) {
    if (!Matches(p.location, base.location)) continue;
    if (base.options.empty()) return DurableBase{base.location, p.options};
    if (base.options == p.options) return base;
  }
  return PermissionDenied("durable base " + base.url() +
                          " is not allowed on this agent (--durable-allow: " + ToString() +
                          "); use the agent's default base, or ask its operator to add a pattern for yours "
                          "(a base with URL options must carry exactly the options of its pattern)");
}

std::string DurableAllowList::ToString() const {
  if (patterns_.empty()) return "(none)";
  std::string s;
  for (const DurableBase& p : patterns_) s += (s.empty() ? "" : ", ") + p.url();
  return s;
}

Result<std::unique_ptr<DurableBases>> DurableBases::Open(std::string path,
                                                         std::shared_ptr<ObjectStore> default_store,
                                                         DurableBase default_base, DurableAllowList allow,
                                                         Opener opener) {
  std::unique_ptr<DurableBases> d(new DurableBases(path, std::move(default_store), std::move(default_base),
                                                   std::move(allow), std::move(opener)));
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  if (!info.exists) return d;
  TC_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, 16u << 20));
  auto bad = [&](std::string_view why) {
    return Corruption("the durable bases file " + path + " " + std::string(why) +
                      "; fix it, or remove it (its jobs then bind their bases again when they connect; until "
                      "then their steps persist to the default base)");
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("namespaces") || !j["namespaces"].is_object()) {
    return bad("is not {\"namespaces\": {...}}");
  }
  std::map<std::string, std::string> read;
  for (const auto& [ns, v] : j["namespaces"].items()) {
    if (!ValidateNamespace(ns).ok() || !v.is_string())
      return bad("has a bad entry " + QuoteForMessage(ns.substr(0, 200)));
    read[ns] = v.get<std::string>();
  }
  if (read.size() > kMaxDurableBindings)
    return bad("binds more than " + std::to_string(kMaxDurableBindings) + " namespaces");
  for (const auto& [ns, url] : read) {
    Binding b;
    Result<DurableBase> base = CanonicalDurableBase(url);
    if (!base.ok()) return bad("binds " + ns + " to a bad base: " + base.status().message());
    b.base = *base;
    Result<DurableBase> resolved = d->default_base_ == *base ? *base : d->allow_.Resolve(*base);
    if (!resolved.ok()) {
      b.error = resolved.status().WithContext("namespace " + ns + " was bound to " + url + " in " + path);
    } else {
      b.base = *resolved;
      Result<std::shared_ptr<ObjectStore>> store = d->StoreOf(b.base);
      if (store.ok()) {
        b.store = *store;
      } else {
        b.error = store.status().WithContext("opening durable base " + b.base.url() + " of namespace " + ns);
      }
    }
    MutexLock lock(&d->mu_);
    d->bindings_[ns] = std::move(b);
  }
  return d;
}

Result<std::shared_ptr<ObjectStore>> DurableBases::For(std::string_view ns) const {
  MutexLock lock(&mu_);
  auto it = bindings_.find(ns);
  if (it == bindings_.end()) return default_store_;
  if (!it->second.error.ok()) return it->second.error;
  return it->second.store;
}

std::string DurableBases::DescribeFor(std::string_view ns) const {
  MutexLock lock(&mu_);
  auto it = bindings_.find(ns);
  if (it == bindings_.end()) return default_store_->Describe();
  if (it->second.store != nullptr) return it->second.store->Describe();
  return it->second.base.url();
}

Result<std::shared_ptr<ObjectStore>> DurableBases::StoreOf(const DurableBase& base) {
  {
    MutexLock lock(&mu_);
    std::set<std::string> open;
    for (const auto& [ns, b] : bindings_) {
      if (b.store == nullptr) continue;
      if (b.base == base) return b.store;
      open.insert(b.base.url());
    }
    if (open.size() >= kMaxDurableBases) {
      return ResourceExhausted("this agent already persists to " + std::to_string(open.size()) +
                               " durable bases besides its default (at most " +
                               std::to_string(kMaxDurableBases) +
                               "); share a base between jobs (each namespace is a directory of it)");
    }
  }
  TC_ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> store, opener_(base.url()));
  return std::shared_ptr<ObjectStore>(std::move(store));
}

std::string DurableBases::CurrentUrl(std::string_view ns) const {
  MutexLock lock(&mu_);
  auto it = bindings_.find(ns);
  return it == bindings_.end() ? default_base_.url() : it->second.base.url();
}

Result<std::string> DurableBases::Bind(const std::string& ns, std::string_view url,
                                       const BeforeChange& before_change) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_ASSIGN_OR_RETURN(DurableBase base, CanonicalDurableBase(url));
  const bool to_default =
      base == default_base_ || (base.location == default_base_.location && base.options.empty());
  DurableBase resolved = default_base_;
  if (!to_default) {
    TC_ASSIGN_OR_RETURN(resolved, allow_.Resolve(base));
  }
  const std::string from = CurrentUrl(ns);
  if (from == resolved.url()) return from;
  if (before_change) {
    TC_RETURN_IF_ERROR(before_change(from));
  }
  std::shared_ptr<ObjectStore> store;
  if (!to_default) {
    Result<std::shared_ptr<ObjectStore>> opened = StoreOf(resolved);
    if (!opened.ok())
      return opened.status().WithContext("opening durable base " + resolved.url() + " for " + ns);
    store = std::move(opened).value();
  }
  MutexLock lock(&mu_);
  auto it = bindings_.find(ns);
  if (!to_default && it == bindings_.end() && bindings_.size() >= kMaxDurableBindings) {
    return ResourceExhausted("this agent already binds " + std::to_string(bindings_.size()) +
                             " namespaces to durable bases of their own (at most " +
                             std::to_string(kMaxDurableBindings) +
                             "); delete the namespaces of finished jobs");
  }
  std::optional<Binding> old;
  if (it != bindings_.end()) {
    old = std::move(it->second);
    bindings_.erase(it);
  }
  if (!to_default) bindings_[ns] = Binding{resolved, store, Status::Ok()};
  Status saved = SaveLocked();
  if (!saved.ok()) {
    bindings_.erase(ns);
    if (old) bindings_[ns] = std::move(*old);
    return saved;
  }
  Log(LogLevel::kInfo, "durable bind").Kv("ns", ns).Kv("from", from).Kv("to", resolved.url());
  return resolved.url();
}

std::map<std::string, std::string> DurableBases::Bindings() const {
  MutexLock lock(&mu_);
  std::map<std::string, std::string> out;
  for (const auto& [ns, b] : bindings_) out[ns] = b.base.url();
  return out;
}

Status DurableBases::SaveLocked() const {
  nlohmann::json j;
  j["namespaces"] = nlohmann::json::object();
  for (const auto& [ns, b] : bindings_) j["namespaces"][ns] = b.base.url();
  return WriteFileAtomic(path_, j.dump(1) + "\n", /*durable=*/false).WithContext("saving the durable bases");
}

}  // namespace tierckpt::agent
