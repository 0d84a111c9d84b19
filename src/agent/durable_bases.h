// durable_bases.h — where each namespace persists on a shared agent
// (decision 72, docs/agent.md "Per-job durable bases").
//
// The agent has one default base (--durable). A job may name another base
// for its namespace (CheckpointConfig.durable; the BindDurable request); the
// agent accepts it only if it is the default or an allowed base
// (--durable-allow patterns), and from then on every durable operation of
// that namespace (persist, restore, list, verify, delete, retention) goes to
// that base (agent/routed_store.h). Credentials and endpoints stay the
// agent's: a job names a location, never a key, and a job's base carries no
// URL options other than those of the pattern that allows it.
//
// Bases are compared in canonical form (CanonicalDurableBase): a filesystem
// base is an absolute path with symlinks of its existing part resolved (a job
// cannot escape an allowed directory through "..", or a link); an S3 base is
// s3://bucket/prefix with no trailing '/', its options ("?k=v&...") apart.
//
// Patterns (DurableAllowList): a location with the wildcards '*' and [...]
// (fnmatch without FNM_PATHNAME: '*' also matches '/'), optionally followed
// by "?options" ('?' starts the options, it is not a wildcard); a filesystem
// pattern's directory above its first wildcard is canonicalized. "s3://team-bucket/*" allows every prefix of
// that bucket and the bucket itself; "/mnt/fsx/*" every directory under /mnt/fsx. A job's base without
// options gets the options of the first pattern it matches (so the operator, not the job, picks an S3
// endpoint); a base with options must carry exactly that pattern's options.
//
// Bindings are kept in <root>/durable_bases.json (written atomically on every
// change), so a restarted agent persists the steps it recovers to the base
// they were saved for. A binding that the current allow-list refuses stays
// recorded, and every durable operation of its namespace fails with the
// reason (never a silent fall-back to the default) until the job binds an
// allowed base. A file that cannot be parsed is an error naming it at start.
//
// Limits: at most kMaxDurableBases distinct bases open at once (each may hold
// a connection pool) and kMaxDurableBindings namespaces bound.
//
// Thread-safe (one mutex, never held across opening a store or a store call).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"
#include "store/object_store.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr std::string_view kDurableBasesFileName = "durable_bases.json";
inline constexpr size_t kMaxDurableBases = 64;
inline constexpr size_t kMaxDurableBindings = 4096;
inline constexpr size_t kMaxDurableBaseLength = 1024;

// A durable base in canonical form: location ("/abs/path", "s3://b/p",
// "mem://name") and its URL options ("" or "k=v&...", without the '?').
struct DurableBase {
  std::string location;
  std::string options;
  std::string url() const { return options.empty() ? location : location + "?" + options; }
  bool operator==(const DurableBase&) const = default;
};

// file:///p, /p → the absolute path, symlinks of its existing part resolved;
// s3://bucket/prefix[?options] → without a trailing '/'; mem://name as is.
// A relative path is refused unless relative_to names the directory to
// resolve it against (the agent's own --durable only: a job's cwd is not
// the agent's). kInvalidArgument naming the base and the accepted forms.
Result<DurableBase> CanonicalDurableBase(std::string_view url, const std::string& relative_to = "");

class DurableAllowList {
 public:
  // Each pattern: a location with wildcards, optionally "?options".
  static Result<DurableAllowList> Parse(const std::vector<std::string>& patterns);

  // The base to open for `base` (with the matching pattern's options when it
  // has none), or kPermissionDenied naming the base and the patterns.
  Result<DurableBase> Resolve(const DurableBase& base) const;
  bool empty() const { return patterns_.empty(); }
  std::string ToString() const;  // "s3://a/*, /mnt/fsx/*" or "(none)"

 private:
  std::vector<DurableBase> patterns_;
};

class DurableBases {
 public:
  using Opener = std::function<Result<std::unique_ptr<ObjectStore>>(const std::string& url)>;

  // Reads path if it exists and opens the bases it binds (a base that cannot
  // be opened, or is no longer allowed, is kept with its error). default_store
  // is the store of default_base (the agent's --durable).
  static Result<std::unique_ptr<DurableBases>> Open(std::string path,
                                                    std::shared_ptr<ObjectStore> default_store,
                                                    DurableBase default_base, DurableAllowList allow,
                                                    Opener opener);

  // The store ns persists to: its bound base, else the default; the binding's
  // error when its base is refused or could not be opened.
  Result<std::shared_ptr<ObjectStore>> For(std::string_view ns) const;
  // The URL of ns's base, for messages.
  std::string DescribeFor(std::string_view ns) const;
  // The default store, for requests naming no namespace.
  const std::shared_ptr<ObjectStore>& default_store() const { return default_store_; }

  // Binds ns to url (canonicalized, resolved through the allow-list, opened)
  // and records it; the default base unbinds. Returns the URL now used.
  // kInvalidArgument for a bad name or URL, kPermissionDenied for a base not
  // allowed, kResourceExhausted over the limits, the opener's error.
  // When the base changes, before_change(old URL) is asked first (without
  // the lock; the handler refuses while a persist of ns is under way) and its
  // error is returned.
  using BeforeChange = std::function<Status(const std::string& from)>;
  Result<std::string> Bind(const std::string& ns, std::string_view url,
                           const BeforeChange& before_change = {});

  // Namespace → the URL it is bound to ("" entries are not kept).
  std::map<std::string, std::string> Bindings() const;

 private:
  struct Binding {
    DurableBase base;                    // as resolved (with options)
    std::shared_ptr<ObjectStore> store;  // null when error is set
    Status error;
  };
  DurableBases(std::string path, std::shared_ptr<ObjectStore> default_store, DurableBase default_base,
               DurableAllowList allow, Opener opener)
      : path_(std::move(path)),
        default_store_(std::move(default_store)),
        default_base_(std::move(default_base)),
        allow_(std::move(allow)),
        opener_(std::move(opener)) {}
  // An open store of base (shared with other namespaces bound to it) or a
  // new one; kResourceExhausted beyond kMaxDurableBases.
  Result<std::shared_ptr<ObjectStore>> StoreOf(const DurableBase& base) EXCLUDES(mu_);
  // The URL ns persists to now.
  std::string CurrentUrl(std::string_view ns) const EXCLUDES(mu_);
  Status SaveLocked() const REQUIRES(mu_);

  const std::string path_;
  const std::shared_ptr<ObjectStore> default_store_;
  const DurableBase default_base_;
  const DurableAllowList allow_;
  const Opener opener_;
  mutable Mutex mu_;
  std::map<std::string, Binding, std::less<>> bindings_ GUARDED_BY(mu_);
};

}  // namespace tierckpt::agent
