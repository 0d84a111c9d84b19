// http_api.cc — the routes of the checkpoint HTTP API but the upload
// (http_api_post.cc); see http_api.h.
#include "agent/http_api.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "agent/http_api_util.h"
#include "agent/http_shard_meta.h"
#include "common/log.h"
#include "common/names.h"
#include "os/fs_stat.h"
#include "os/mapping.h"

namespace tierckpt::agent {
namespace {

HttpServerOptions ServerOptions(const HttpApiOptions& o) {
  HttpServerOptions s;
  s.flag = "--http-listen";
  s.allow = o.allow;
  s.threads = o.threads;
  s.limits.read_timeout = std::chrono::seconds(60);
  s.limits.write_timeout = std::chrono::seconds(60);
  s.max_body_bytes = std::max<uint64_t>(o.max_shard_bytes, 1);
  s.body_limit_hint =
      "a shard larger than the agent's whole memory budget (--memory-budget) cannot be held; "
      "raise the budget or save smaller shards";
  s.hosts = o.hosts;
  s.hosts.emplace_back(kHyperPodServiceHost);
  s.hosts_flag = "--http-host";
  return s;
}

}  // namespace

Result<std::unique_ptr<HttpApi>> HttpApi::Create(HttpApiDeps deps, HttpApiOptions options) {
  const std::string path = deps.root + "/" + std::string(kHttpNamespacesFileName);
  TC_ASSIGN_OR_RETURN(std::unique_ptr<HttpNamespaces> ns, HttpNamespaces::Open(path));
  for (const auto& [name, c] : ns->All()) deps.tier->SetNamespaceKeep(name, c.steps_retained);
  return std::unique_ptr<HttpApi>(new HttpApi(std::move(deps), std::move(options), std::move(ns)));
}

HttpApi::HttpApi(HttpApiDeps deps, HttpApiOptions options, std::unique_ptr<HttpNamespaces> namespaces)
    : d_(std::move(deps)),
      options_(std::move(options)),
      namespaces_(std::move(namespaces)),
      http_(std::make_unique<HttpServer>(ServerOptions(options_))) {
  AddRoutes();
}

HttpApi::~HttpApi() { http_->Stop(); }

void HttpApi::AddRoutes() {
  httplib::Server& s = http_->server();
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  // Every route answers: one that returned without a status would go out as
  // the library's default 200 with an empty body, which a client takes for
  // success (an upload cut short read as stored).
  auto unanswered = [](Req q, Res r) {
    if (r.status != -1) return;
    SetError(r, Internal("tierckptd answered nothing to " + q.method + " " + q.path +
                         "; this is a bug: the request may not have taken effect, retry it"));
  };
  auto answered = [unanswered](std::function<void(Req, Res)> route) -> httplib::Server::Handler {
    return [route, unanswered](Req q, Res r) {
      route(q, r);
      unanswered(q, r);
    };
  };
  // A request in absolute form ("GET http://host:9200/v1/..."), as a client sends it to an HTTP proxy,
  // is served too: HTTP_PROXY pointed at the agent redirects the library's default URL (docs/http-api.md).
  const std::string origin = R"((?:http://[^/]+)?)";
  const std::string ns_path = origin + R"(/v1/cp/namespaces/([^/]+))";
  const std::string shard_path = origin + R"(/v1/cp/checkpoints/([^/]+)/([^/]+)/([^/]+))";
  s.Get(ns_path, answered([this](Req q, Res r) { GetNamespace(q, r); }));
  s.Post(ns_path, answered([this](Req q, Res r) { CreateNamespace(q, r); }));
  s.Delete(ns_path, answered([this](Req q, Res r) { DeleteNamespace(q, r); }));
  s.Get(origin + R"(/v1/cp/checkpoints/([^/]+)/latest)", answered([this](Req q, Res r) { Latest(q, r); }));
  s.Get(shard_path, answered([this](Req q, Res r) { GetShard(q, r); }));
  s.Delete(shard_path, answered([this](Req q, Res r) { DeleteShard(q, r); }));
  s.Post(shard_path, httplib::Server::HandlerWithContentReader(
                         [this, unanswered](Req q, Res r, const httplib::ContentReader& body) {
                           PostShard(q, r, body);
                           unanswered(q, r);
                         }));
  s.Post(origin + "/v1/cp/cluster/reset", answered([this](Req q, Res r) { Reset(q, r); }));
  s.Get(origin + "/health", [](Req, Res r) { r.set_content(R"({"status":"healthy"})", "application/json"); });
}

// ---- Namespaces ----

void HttpApi::GetNamespace(const httplib::Request& req, httplib::Response& res) {
  const std::string ns = req.matches[1];
  if (Status st = ValidateNamespace(ns); !st.ok()) return SetError(res, st);
  std::optional<HttpNamespace> c = namespaces_->Get(ns);
  if (!c) return SetError(res, NotFound("namespace '" + ns + "' not found; POST it with ?num_ranks=N first"));
  SetJson(res, 200, {{"num_ranks", c->num_ranks}, {"steps_to_retain_per_rank", c->steps_retained}});
}

void HttpApi::CreateNamespace(const httplib::Request& req, httplib::Response& res) {
  const std::string ns = req.matches[1];
  if (Status st = ValidateNamespace(ns); !st.ok()) return SetError(res, st);
  Result<uint64_t> ranks = QueryNumber(req, "num_ranks", std::nullopt);
  if (!ranks.ok()) return SetError(res, ranks.status());
  Result<uint64_t> keep = QueryNumber(req, "steps_retained", 3);
  if (!keep.ok()) return SetError(res, keep.status());
  HttpNamespace c{static_cast<uint32_t>(std::min<uint64_t>(*ranks, UINT32_MAX)),
                  static_cast<uint32_t>(std::min<uint64_t>(*keep, UINT32_MAX))};
  // A namespace this API did not create but that holds steps is a native
  // job's: its steps_retained would drop that job's steps at once, and a
  // later DELETE or reset the rest (decision 76).
  if (!namespaces_->Get(ns)) {
    if (const std::vector<StepInfo> steps = d_.tier->ListSteps(ns); !steps.empty()) {
      return SetError(res, AlreadyExists("namespace '" + ns + "' holds " + std::to_string(steps.size()) +
                                         " step(s) in memory saved by a tierckpt job (not through this API); "
                                         "use another namespace for this job, or remove those steps first "
                                         "(`tierckpt ls " + ns + "`, `tierckpt rm " + ns + " STEP`)"));
    }
  }
  if (Status st = namespaces_->Create(ns, c); !st.ok()) return SetError(res, st);
  d_.tier->SetNamespaceKeep(ns, c.steps_retained);
  Log(LogLevel::kInfo, "http_namespace_created")
      .Kv("ns", ns)
      .Kv("num_ranks", c.num_ranks)
      .Kv("steps_retained", c.steps_retained);
  SetJson(res, 200, {{"status", "created"}});
}

void HttpApi::DeleteNamespace(const httplib::Request& req, httplib::Response& res) {
  const std::string ns = req.matches[1];
  if (Status st = ValidateNamespace(ns); !st.ok()) return SetError(res, st);
  if (!namespaces_->Get(ns)) return SetError(res, NotFound("namespace '" + ns + "' not found"));
  if (Status st = DropNamespaceSteps(ns); !st.ok()) return SetError(res, st);
  Result<bool> removed = namespaces_->Remove(ns);
  if (!removed.ok()) return SetError(res, removed.status());
  d_.tier->SetNamespaceKeep(ns, 0);
  Log(LogLevel::kInfo, "http_namespace_deleted").Kv("ns", ns);
  SetJson(res, 200, {{"status", "deleted"}});
}

Status HttpApi::DropNamespaceSteps(const std::string& ns) {
  {
    MutexLock lock(&mu_);
    for (auto it = pending_.lower_bound({ns, 0}); it != pending_.end() && it->first.first == ns;) {
      it = pending_.erase(it);
    }
  }
  for (const StepInfo& s : d_.tier->ListSteps(ns)) {
    if (!s.committed) {
      TC_RETURN_IF_ERROR(d_.tier->AbortStep(ns, s.step, kHttpWriter));
      continue;
    }
    Result<bool> dropped = d_.tier->DeleteStep(ns, s.step);
    if (!dropped.ok() && dropped.status().code() == Code::kFailedPrecondition) {
      // Being persisted right now: its upload finishes first.
      d_.tier->WaitPersist(ns, s.step, std::chrono::seconds(60)).status().IgnoreError();
      dropped = d_.tier->DeleteStep(ns, s.step);
    }
    if (!dropped.ok()) return dropped.status();
  }
  return Status::Ok();
}

void HttpApi::Reset(const httplib::Request&, httplib::Response& res) {
  const std::map<std::string, HttpNamespace> all = namespaces_->All();
  for (const auto& [ns, c] : all) {
    if (Status st = DropNamespaceSteps(ns); !st.ok()) return SetError(res, st.WithContext("resetting"));
    Result<bool> removed = namespaces_->Remove(ns);
    if (!removed.ok()) return SetError(res, removed.status());
    d_.tier->SetNamespaceKeep(ns, 0);
  }
  Log(LogLevel::kWarn, "http_cluster_reset").Kv("namespaces", static_cast<uint64_t>(all.size()));
  SetJson(res, 200, {{"status", "reset"}});
}

// ---- Checkpoints ----

void HttpApi::Latest(const httplib::Request& req, httplib::Response& res) {
  const std::string ns = req.matches[1];
  if (Status st = ValidateNamespace(ns); !st.ok()) return SetError(res, st);
  Result<uint64_t> limit = QueryNumber(req, "limit", 5);
  if (!limit.ok()) return SetError(res, limit.status());
  std::vector<uint64_t> steps;
  for (const StepInfo& s : d_.tier->ListSteps(ns)) {
    if (s.committed) steps.push_back(s.step);
  }
  if (!d_.cluster->holders().empty()) {
    // A node replaced after a loss starts with empty memory, but its replica holders keep its
    // steps and a GET restores one from them (ReadPath): list those too, as `tierckpt ls` does
    // (memory "peer"), so the job resumes from memory rather than from the durable tier.
    for (const auto& [step, holder] : d_.cluster->StepsOnHolders(ns)) steps.push_back(step);
    std::sort(steps.begin(), steps.end());
    steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  }
  if (steps.empty() && !namespaces_->Get(ns)) {
    return SetError(res, NotFound("namespace '" + ns + "' not found and holds no step in memory"));
  }
  std::sort(steps.rbegin(), steps.rend());
  if (steps.size() > *limit) steps.resize(*limit);
  SetJson(res, 200, nlohmann::json(steps));
}

void HttpApi::GetShard(const httplib::Request& req, httplib::Response& res) {
  Result<ShardRef> ref = ParseShardRef(req);
  if (!ref.ok()) return SetError(res, ref.status());
  const std::string name = ShardName(ref->rank);
  const std::string what = "shard " + name + " of step " + StepLabel(ref->ns, ref->step);
  {
    MutexLock lock(&mu_);
    if (auto it = pending_.find({ref->ns, ref->step}); it != pending_.end()) {
      return SetError(res, NotFound("step " + StepLabel(ref->ns, ref->step) +
                                    " is not complete: its shards are still being posted"));
    }
  }
  // The tier's checksum of the bytes is checked before anything is sent; a
  // copy that fails it is replaced from another tier (ReadPath's repair) once.
  for (int attempt = 0;; ++attempt) {
    Result<ServedObject> served = d_.read_path->Open(ref->ns, ref->step, name, /*repair=*/attempt > 0);
    if (!served.ok()) return SetError(res, served.status());
    // Owned by the response until its last byte is sent: the object's step
    // stays pinned (OpenedObject::pin), so its file is not recycled into
    // another object, or shrunk, under the mapping.
    struct Sending {
      OpenedObject object;
      Mapping mapping;
    };
    auto sending = std::make_shared<Sending>(Sending{std::move(served->object), Mapping()});
    const OpenedObject& o = sending->object;
    Result<Checksum> want = Checksum::Parse(o.checksum);
    if (!want.ok()) return SetError(res, want.status().WithContext(what));
    // A file that no longer holds its manifest's size (damaged at rest) would
    // raise SIGBUS through the mapping: it is a corrupt copy, repaired as one.
    Result<FileStat> st = StatOpenFd(o.fd.get(), "stat of " + what);
    if (!st.ok()) return SetError(res, st.status());
    if (st->size != o.size) {
      Log(LogLevel::kError, "http_shard_corrupt")
          .Kv("ns", ref->ns)
          .Kv("step", ref->step)
          .Kv("name", name)
          .Kv("file_bytes", st->size)
          .Kv("manifest_bytes", o.size);
      if (attempt == 0) continue;
      return SetError(res, Corruption(what + " holds " + std::to_string(st->size) + " bytes in memory, its "
                                             "manifest says " + std::to_string(o.size) +
                                             ", and no other tier holds a good copy; load another step"));
    }
    if (o.size > 0) {
      Result<Mapping> m = Mapping::Map(o.fd.get(), o.size, Mapping::Access::kReadOnly, false, what);
      if (!m.ok()) return SetError(res, m.status());
      sending->mapping = std::move(m).value();
    }
    ShardHasher hasher;
    hasher.Update(sending->mapping.data(), o.size);
    if (hasher.Checksum64() != *want) {
      Log(LogLevel::kError, "http_shard_corrupt").Kv("ns", ref->ns).Kv("step", ref->step).Kv("name", name);
      if (attempt == 0) continue;
      return SetError(res, Corruption(what + " does not match its checksum in any tier that holds it; load "
                                             "another step"));
    }
    res.status = 200;
    res.set_header(std::string(kShardMetaHeader), FormatShardMeta(hasher.Digest128()));
    const uint64_t size = o.size;
    res.set_content_provider(
        size, "application/octet-stream",
        [sending, size](size_t offset, size_t length, httplib::DataSink& sink) {
          const size_t n = std::min<size_t>({length, size - offset, size_t{4} << 20});
          return sink.write(reinterpret_cast<const char*>(sending->mapping.data()) + offset, n);
        },
        [sending](bool) {});
    return;
  }
}

void HttpApi::DeleteShard(const httplib::Request& req, httplib::Response& res) {
  Result<ShardRef> ref = ParseShardRef(req);
  if (!ref.ok()) return SetError(res, ref.status());
  const std::string name = ShardName(ref->rank);
  {
    MutexLock lock(&mu_);
    auto it = pending_.find({ref->ns, ref->step});
    if (it != pending_.end()) {
      auto sh = it->second.shards.find(ref->rank);
      if (sh == it->second.shards.end() || !sh->second.sealed) {
        return SetError(
            res, NotFound("shard " + name + " of step " + StepLabel(ref->ns, ref->step) + " was not posted"));
      }
      if (sh->second.writing || it->second.committing || it->second.aborting) {
        return SetError(res, AlreadyExists("shard " + name + " of step " + StepLabel(ref->ns, ref->step) +
                                           " is being posted or committed right now; retry"));
      }
      sh->second.writing = true;  // claimed while the tier drops it
    }
  }
  if (!d_.tier->HasCommitted(ref->ns, ref->step)) {
    Status st = d_.tier->DropObject(ref->ns, ref->step, name, kHttpWriter);
    MutexLock lock(&mu_);
    auto it = pending_.find({ref->ns, ref->step});
    if (it == pending_.end())
      return SetError(res, NotFound("step " + StepLabel(ref->ns, ref->step) + " is gone"));
    it->second.shards.erase(ref->rank);
    lock.Unlock();
    AbortIfEmpty(ref->ns, ref->step);
    if (!st.ok()) return SetError(res, st);
    return SetJson(res, 200, {{"status", "deleted"}, {"step_dropped", false}});
  }
  Result<Manifest> m = d_.tier->GetManifest(ref->ns, ref->step);
  if (!m.ok()) return SetError(res, m.status());
  if (std::none_of(m->objects.begin(), m->objects.end(),
                   [&](const ObjectEntry& e) { return e.name == name; })) {
    return SetError(res, NotFound("step " + StepLabel(ref->ns, ref->step) + " has no shard " + name));
  }
  Result<bool> dropped = d_.tier->DeleteStep(ref->ns, ref->step);
  if (!dropped.ok()) return SetError(res, dropped.status());
  Log(LogLevel::kInfo, "http_step_deleted").Kv("ns", ref->ns).Kv("step", ref->step).Kv("by_shard", name);
  SetJson(res, 200, {{"status", "deleted"}, {"step_dropped", true}});
}

}  // namespace tierckpt::agent
