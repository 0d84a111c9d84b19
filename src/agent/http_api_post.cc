// http_api_post.cc — the upload of a shard (POST /v1/cp/checkpoints/{ns}/
// {rank}/{step}) and the commit of a step whose shards are all in; see
// http_api.h.
#include <algorithm>
#include <cstring>

#include "agent/http_api.h"
#include "agent/http_api_util.h"
#include "agent/http_shard_meta.h"
#include "common/log.h"
#include "common/names.h"
#include "os/mapping.h"
#include "replication/commit.h"

namespace tierckpt::agent {

bool HttpApi::ClaimShard(const std::string& ns, uint64_t step, uint32_t rank, Status* why) {
  MutexLock lock(&mu_);
  Pending& p = pending_[{ns, step}];
  Shard& sh = p.shards[rank];
  if (p.committing || p.aborting || sh.writing) {
    *why = AlreadyExists("shard " + ShardName(rank) + " of step " + StepLabel(ns, step) + " is being " +
                         (p.committing ? "committed"
                          : p.aborting ? "dropped"
                                       : "posted by another request") +
                         " right now; retry");
    if (!sh.writing && !sh.sealed) p.shards.erase(rank);
    return false;
  }
  sh.writing = true;
  return true;
}

std::optional<std::vector<std::string>> HttpApi::ReleaseShard(const std::string& ns, uint64_t step,
                                                              uint32_t rank, bool sealed,
                                                              uint32_t num_ranks) {
  MutexLock lock(&mu_);
  auto it = pending_.find({ns, step});
  if (it == pending_.end()) return std::nullopt;  // the namespace was deleted meanwhile
  Pending& p = it->second;
  Shard& sh = p.shards[rank];
  sh.writing = false;
  sh.sealed = sealed;
  if (!sealed) p.shards.erase(rank);
  if (p.committing || p.shards.size() < num_ranks) return std::nullopt;
  std::vector<std::string> names;
  for (const auto& [r, s] : p.shards) {
    if (s.writing || !s.sealed || r >= num_ranks) return std::nullopt;
    names.push_back(ShardName(r));
  }
  p.committing = true;
  return names;
}

namespace {

// Reads and discards a body refused before it was read, so the client, still
// sending it, reads the answer instead of a reset connection.
void Drain(const httplib::ContentReader& body) {
  body([](const char*, size_t) { return true; });
}

}  // namespace

void HttpApi::PostShard(const httplib::Request& req, httplib::Response& res,
                        const httplib::ContentReader& body) {
  auto refuse = [&](const Status& st) {
    Drain(body);
    SetError(res, st);
  };
  Result<ShardRef> ref = ParseShardRef(req);
  if (!ref.ok()) return refuse(ref.status());
  const std::string& ns = ref->ns;
  const uint64_t step = ref->step;
  const std::string name = ShardName(ref->rank);
  const std::string what = "shard " + name + " of step " + StepLabel(ns, step);
  // (A Transfer-Encoding of any spelling with a Content-Length never gets
  // here: HttpServer refuses the pair before routing.)
  if (!req.has_header("Content-Length") || req.has_header("Transfer-Encoding")) {
    return SetJson(res, 411,
                   {{"detail", "POST of " + what +
                                   " has no Content-Length; send the body with its length "
                                   "(chunked bodies are not accepted: the shard's memory is sized first)"}});
  }
  Result<uint64_t> size = ParseNumber(req.get_header_value("Content-Length"), "Content-Length");
  if (!size.ok()) return refuse(size.status());
  Result<std::optional<std::string>> want128 =
      ParseShardMeta(req.get_header_value(std::string(kShardMetaHeader).c_str()));
  if (!want128.ok()) return refuse(want128.status().WithContext("POST of " + what));
  std::optional<HttpNamespace> nsc = namespaces_->Get(ns);
  if (!nsc) {
    return refuse(
        NotFound("namespace '" + ns + "' not found; POST /v1/cp/namespaces/" + ns + "?num_ranks=N first"));
  }
  if (ref->rank >= nsc->num_ranks) {
    return refuse(InvalidArgument("rank " + std::to_string(ref->rank) + " is outside namespace '" + ns +
                                  "', which has num_ranks " + std::to_string(nsc->num_ranks) +
                                  " (ranks 0 to " + std::to_string(nsc->num_ranks - 1) + ")"));
  }
  if (d_.tier->HasCommitted(ns, step)) {
    return refuse(AlreadyExists("step " + StepLabel(ns, step) +
                                " is committed and cannot change; save another step, or DELETE this one "
                                "first"));
  }
  Status claim_error;
  if (!ClaimShard(ns, step, ref->rank, &claim_error)) return refuse(claim_error);

  // Streams the body into the shard's object; false leaves nothing of it.
  auto upload = [&]() -> Status {
    // A shard posted again while its step is written replaces the earlier copy.
    TC_RETURN_IF_ERROR(d_.tier->DropObject(ns, step, name, kHttpWriter));
    Result<CreatedObject> created = d_.tier->CreateObject(ns, step, name, *size, 0, kHttpWriter);
    if (!created.ok()) {
      Drain(body);
      return created.status();
    }
    CreatedObject obj = std::move(created).value();
    Mapping map;
    if (*size > 0) {
      TC_ASSIGN_OR_RETURN(map, Mapping::Map(obj.fd.get(), *size, Mapping::Access::kReadWrite, false, what));
    }
    ShardHasher hasher;
    uint64_t got = 0;
    bool overflow = false;
    const bool read = body([&](const char* data, size_t len) {
      if (len > *size - got) {
        overflow = true;
        return false;
      }
      std::memcpy(map.data() + got, data, len);
      hasher.Update(map.data() + got, len);
      got += len;
      return true;
    });
    if (overflow) return InvalidArgument("the body of " + what + " is longer than its Content-Length");
    if (!read || got != *size) {
      return Aborted("the body of " + what + " ended after " + std::to_string(got) + " of " +
                     std::to_string(*size) +
                     " bytes (the client went away or stalled); nothing of it was kept");
    }
    if (want128.value() && *want128.value() != hasher.Digest128()) {
      return InvalidArgument("the body of " + what + " does not match its Shard-Meta checksum (sent " +
                             *want128.value() + ", received bytes hash to " + hasher.Digest128() +
                             "); it was corrupted on the way or the header is wrong; nothing of it was kept");
    }
    map = Mapping();
    return d_.tier->SealObject(ns, step, name, *size, hasher.Checksum64().ToString(), kHttpWriter);
  };
  Status up = upload();
  if (!up.ok()) {
    d_.tier->DropObject(ns, step, name, kHttpWriter).IgnoreError();
    ReleaseShard(ns, step, ref->rank, false, nsc->num_ranks);
    AbortIfEmpty(ns, step);
    Log(LogLevel::kWarn, "http_shard_refused").Kv("ns", ns).Kv("step", step).Kv("name", name).Err(up);
    // Answered even when the body ended early: a client still listening
    // must read a failure (a client gone away makes the write fail, harmlessly).
    if (up.code() == Code::kAborted) return SetError(res, InvalidArgument(up.message()));
    return SetError(res, up);
  }
  std::optional<std::vector<std::string>> complete = ReleaseShard(ns, step, ref->rank, true, nsc->num_ranks);
  bool committed = false;
  if (complete) {
    if (Status st = CommitComplete(ns, step, nsc->num_ranks, std::move(*complete)); !st.ok()) {
      return SetError(res,
                      st.WithContext("committing step " + StepLabel(ns, step) + " after its last shard"));
    }
    committed = true;
  }
  SetJson(res, 200, {{"status", "ok"}, {"committed", committed}});
}

void HttpApi::AbortIfEmpty(const std::string& ns, uint64_t step) {
  {
    MutexLock lock(&mu_);
    auto it = pending_.find({ns, step});
    if (it == pending_.end() || !it->second.shards.empty() || it->second.committing || it->second.aborting)
      return;
    it->second.aborting = true;
  }
  d_.tier->AbortStep(ns, step, kHttpWriter).IgnoreError();
  MutexLock lock(&mu_);
  pending_.erase({ns, step});
}

Status HttpApi::CommitComplete(const std::string& ns, uint64_t step, uint32_t num_ranks,
                               std::vector<std::string> names) {
  wire::CommitStepRequest req;
  req.ns = ns;
  req.step = step;
  req.world_size = num_ranks;
  req.expected_objects = std::move(names);
  Result<Manifest> m = CommitOnNode(CommitDeps{d_.tier, d_.cluster}, req, kHttpWriter);
  std::vector<uint64_t> abandoned;
  {
    MutexLock lock(&mu_);
    pending_.erase({ns, step});
    if (m.ok()) {  // older attempts still being written never will be
      for (auto it = pending_.lower_bound({ns, 0});
           it != pending_.end() && it->first.first == ns && it->first.second < step;) {
        const bool busy =
            it->second.committing || std::any_of(it->second.shards.begin(), it->second.shards.end(),
                                                 [](const auto& s) { return s.second.writing; });
        if (busy) {
          ++it;
          continue;
        }
        abandoned.push_back(it->first.second);
        it = pending_.erase(it);
      }
    }
  }
  for (uint64_t old : abandoned) {
    Log(LogLevel::kWarn, "http_step_abandoned").Kv("ns", ns).Kv("step", old).Kv("newer", step);
    d_.tier->AbortStep(ns, old, kHttpWriter).IgnoreError();
  }
  if (!m.ok()) {
    if (!d_.tier->HasCommitted(ns, step)) d_.tier->AbortStep(ns, step, kHttpWriter).IgnoreError();
    return m.status();
  }
  Log(LogLevel::kInfo, "http_step_committed")
      .Kv("ns", ns)
      .Kv("step", step)
      .Kv("shards", static_cast<uint64_t>(m->objects.size()))
      .Kv("bytes", m->TotalBytes());
  return Status::Ok();
}

}  // namespace tierckpt::agent
