// Client: requests to the agent, and the copy paths into and out of shared
// memory (which run outside the connection's lock).
#include "tierckpt/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include "client/client_internal.h"
#include "client/connection.h"
#include "client/mapping_cache.h"
#include "client/read_verify.h"
#include "client/responses.h"
#include "client/sweeper.h"
#include "common/checksum.h"
#include "os/fs_stat.h"
#include "os/parallel.h"
#include "wire/protocol.h"

namespace tierckpt {
namespace {

using client::Connection;
using client::MappingCache;
using wire::MsgType;

// Extra time the client waits beyond a WaitDurable timeout for the agent's
// answer before declaring the connection dead.
constexpr int kWaitDurableGraceMs = 60'000;
// How soon an idle client releases mappings of segments the agent deleted.
constexpr auto kIdleSweepInterval = std::chrono::seconds(1);

std::string StepPath(std::string_view ns, uint64_t step) {
  return std::string(ns) + "/" + std::to_string(step);
}
std::string ObjectPath(std::string_view ns, uint64_t step, std::string_view name) {
  return StepPath(ns, step) + "/" + std::string(name);
}

std::string EncodeStep(std::string_view ns, uint64_t step) {
  wire::StepRequest r;
  r.ns = std::string(ns);
  r.step = step;
  return r.Encode();
}

}  // namespace

struct Client::Impl {
  // Const after Connect.
  ClientOptions options;
  std::string node_id;
  std::string durable_base;
  std::unique_ptr<Connection> conn;
  std::shared_ptr<MappingCache> cache;
  // What the reads did (read_counters()).
  std::atomic<uint64_t> hashed{0};
  std::atomic<uint64_t> attested{0};
  std::atomic<uint64_t> unverified{0};
  // Counts a read's check.
  void Count(client::ReadCheck check) {
    switch (check) {
      case client::ReadCheck::kHash:
        hashed.fetch_add(1, std::memory_order_relaxed);
        break;
      case client::ReadCheck::kAttested:
        attested.fetch_add(1, std::memory_order_relaxed);
        break;
      case client::ReadCheck::kUnverified:
        unverified.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
  std::unique_ptr<client::Sweeper> sweeper;  // declared last: stops first

  // With the timeout of the request's class (ClientOptions).
  Result<Connection::Reply> Call(MsgType type, std::string_view payload) {
    return conn->Call(type, payload, TimeoutFor(type));
  }
  Result<Connection::Reply> Call(MsgType type, std::string_view payload, int timeout_ms) {
    return conn->Call(type, payload, timeout_ms);
  }
  // The one place that says how long each request may take.
  int TimeoutFor(MsgType type) const {
    switch (type) {
      case MsgType::kHello:
        return options.connect_timeout_ms;
      case MsgType::kBeginStep:
      case MsgType::kBeginSave:
      case MsgType::kCreateObject:
      case MsgType::kCreateNextObject:
      case MsgType::kBeginSaveCreateNext:
      case MsgType::kSealObject:
      case MsgType::kAbortStep:
      case MsgType::kStats:
      case MsgType::kShutdown:
        return options.request_timeout_ms;
      default:
        return options.long_request_timeout_ms;
    }
  }
  Status CallStatus(MsgType type, std::string_view payload) { return Call(type, payload).status(); }
  // CreateNextObject or BeginSaveCreateNext (type), mapped.
  Result<WritableObject> CreateNext(MsgType type, std::string_view ns, uint64_t step,
                                    const ObjectNamePattern& pattern, uint64_t size, uint64_t* index);

  // A CreateObject-like request for an object of size bytes (path: ns/step/name
  // for messages).
  Result<Connection::Reply> CallCreate(MsgType type, std::string_view payload, const std::string& path,
                                       uint64_t size) {
    if (size > std::numeric_limits<size_t>::max()) {
      return InvalidArgument("object " + path + " of " + std::to_string(size) +
                             " bytes does not fit in this process's address space");
    }
    Result<Connection::Reply> reply = Call(type, payload);
    // Mappings of deleted segments keep tmpfs pages alive; release them and
    // retry once when the memory tier reports it is full.
    if (!reply.ok() && reply.status().code() == Code::kResourceExhausted && cache->SweepDeleted() > 0) {
      reply = Call(type, payload);
    }
    if (!reply.ok()) return reply.status();
    // Swept after the answer, before writing: the agent may just have deleted
    // segments to make room for this object, and their pages stay allocated
    // while we map them.
    cache->MaybeSweep();
    if (!reply->fd.valid()) {
      return ProtocolError("tierckptd answered " +
                           std::string(wire::MsgTypeName(static_cast<uint16_t>(type))) + " for object " +
                           path + " without a file descriptor (check client and agent are the same version)");
    }
    return reply;
  }

  // The WritableObject over a created object's fd.
  Result<WritableObject> MapCreated(UniqueFd fd, std::string_view ns, uint64_t step, std::string_view name,
                                    uint64_t size) {
    const std::string what = "object " + ObjectPath(ns, step, name);
    TC_ASSIGN_OR_RETURN(MappingCache::Lease lease,
                        cache->Acquire(std::move(fd), size, Mapping::Access::kReadWrite, what));
    WritableObject obj;
    obj.impl_ = std::make_unique<WritableObject::Impl>();
    obj.impl_->ns = std::string(ns);
    obj.impl_->step = step;
    obj.impl_->name = std::string(name);
    obj.impl_->size = size;
    obj.impl_->lease = std::move(lease);
    return obj;
  }
  Result<std::string> CallJson(MsgType type, std::string_view payload) {
    TC_ASSIGN_OR_RETURN(Connection::Reply reply, Call(type, payload));
    return client::JsonFromBody(reply.body, wire::MsgTypeName(static_cast<uint16_t>(type)));
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  if (impl->options.socket_path.empty()) impl->options.socket_path = DefaultSocketPath();
  impl->options.copy_threads = std::max(1, impl->options.copy_threads);
  client::ConnectOptions connect;
  connect.timeout_ms = impl->options.connect_timeout_ms;
  connect.agent_uid = impl->options.agent_uid;
  TC_ASSIGN_OR_RETURN(impl->conn, Connection::Open(impl->options.socket_path, connect));

  wire::HelloRequest hello;
  hello.pid = static_cast<uint32_t>(::getpid());
  hello.client = impl->options.client_name;
  hello.writer = impl->options.writer_id;
  TC_ASSIGN_OR_RETURN(Connection::Reply reply, impl->Call(MsgType::kHello, hello.Encode()));
  Result<wire::HelloResponse> h = wire::HelloResponse::Decode(reply.body);
  if (!h.ok()) return h.status().WithContext("tierckptd at " + impl->options.socket_path + " answered Hello");
  impl->node_id = std::move(h->node_id);
  impl->durable_base = std::move(h->durable);

  MappingCache::Options cache_options;
  cache_options.capacity_bytes = impl->options.mapping_cache_bytes;
  impl->cache = std::make_shared<MappingCache>(cache_options);
  if (cache_options.capacity_bytes > 0) {
    impl->sweeper = std::make_unique<client::Sweeper>(impl->cache, kIdleSweepInterval);
  }
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

std::string ClientOptions::RandomWriterId() {
  std::random_device rd;
  std::string id = "w-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 8; ++i) {
    uint32_t v = rd();
    for (int k = 0; k < 4; ++k) id += kHex[(v >> (4 * k)) & 0xf];
  }
  return id;
}

const std::string& Client::node_id() const { return impl_->node_id; }
const std::string& Client::socket_path() const { return impl_->options.socket_path; }
const std::string& Client::durable_base() const { return impl_->durable_base; }

// ---- Writing ----

Status Client::BeginStep(std::string_view ns, uint64_t step) {
  return impl_->CallStatus(MsgType::kBeginStep, EncodeStep(ns, step));
}

Status Client::BeginSave(std::string_view ns, uint64_t step) {
  return impl_->CallStatus(MsgType::kBeginSave, EncodeStep(ns, step));
}

Result<WritableObject> Client::CreateObject(std::string_view ns, uint64_t step, std::string_view name,
                                            uint64_t size) {
  wire::CreateObjectRequest req;
  req.ns = std::string(ns);
  req.step = step;
  req.name = std::string(name);
  req.size = size;
  TC_ASSIGN_OR_RETURN(Connection::Reply reply, impl_->CallCreate(MsgType::kCreateObject, req.Encode(),
                                                                 ObjectPath(ns, step, name), size));
  return impl_->MapCreated(std::move(reply.fd), ns, step, name, size);
}

Result<WritableObject> Client::CreateNextObject(std::string_view ns, uint64_t step,
                                                const ObjectNamePattern& pattern, uint64_t size,
                                                uint64_t* index) {
  return impl_->CreateNext(MsgType::kCreateNextObject, ns, step, pattern, size, index);
}

Result<WritableObject> Client::BeginSaveCreateNext(std::string_view ns, uint64_t step,
                                                   const ObjectNamePattern& pattern, uint64_t size,
                                                   uint64_t* index) {
  return impl_->CreateNext(MsgType::kBeginSaveCreateNext, ns, step, pattern, size, index);
}

Result<WritableObject> Client::Impl::CreateNext(MsgType type, std::string_view ns, uint64_t step,
                                                const ObjectNamePattern& pattern, uint64_t size,
                                                uint64_t* index) {
  wire::CreateNextObjectRequest req;
  req.ns = std::string(ns);
  req.step = step;
  req.prefix = pattern.prefix;
  req.first = pattern.first;
  req.suffix = pattern.suffix;
  req.size = size;
  const std::string what = ObjectPath(ns, step, pattern.prefix + "<n>" + pattern.suffix);
  TC_ASSIGN_OR_RETURN(Connection::Reply reply, CallCreate(type, req.Encode(), what, size));
  Result<wire::CreateNextObjectResponse> resp = wire::CreateNextObjectResponse::Decode(reply.body);
  if (!resp.ok())
    return resp.status().WithContext("tierckptd's " +
                                     std::string(wire::MsgTypeName(static_cast<uint16_t>(type))) +
                                     " response for object " + what);
  if (index != nullptr) *index = resp->index;
  return MapCreated(std::move(reply.fd), ns, step, resp->name, size);
}

Status Client::Seal(WritableObject& object, std::string_view checksum) {
  if (!object.impl_)
    return FailedPrecondition("Seal of an empty WritableObject (CreateObject did not fill it)");
  WritableObject::Impl& o = *object.impl_;
  if (o.sealed)
    return FailedPrecondition("object " + ObjectPath(o.ns, o.step, o.name) + " is already sealed");
  wire::SealObjectRequest req;
  req.ns = o.ns;
  req.step = o.step;
  req.name = o.name;
  req.size = o.size;
  req.checksum = std::string(checksum);
  TC_RETURN_IF_ERROR(impl_->CallStatus(MsgType::kSealObject, req.Encode()));
  o.sealed = true;
  // The lease stays until the WritableObject is destroyed: views of data()
  // (a torch tensor over it, say) may outlive Seal, and the mapping must not be
  // handed to another object under them. They may read it; with
  // protect_sealed a write through them faults (mapping_cache.h).
  if (!impl_->options.protect_sealed) return Status::Ok();
  return o.lease.MakeReadOnly(ObjectPath(o.ns, o.step, o.name));
}

Status Client::WriteObject(std::string_view ns, uint64_t step, std::string_view name, const void* data,
                           size_t size) {
  TC_ASSIGN_OR_RETURN(WritableObject obj, CreateObject(ns, step, name, size));
  if (!impl_->options.client_checksum) {
    if (size > 0) std::memcpy(obj.data(), data, size);
    return Seal(obj, "");  // the agent hashes the bytes at rest
  }
  Checksum sum = CopyAndChecksum(obj.data(), data, size);
  return Seal(obj, sum.ToString());
}

Status Client::WriteObjects(std::string_view ns, uint64_t step, const std::vector<ObjectSource>& objects) {
  return ParallelFor(objects.size(), impl_->options.copy_threads, [&](size_t i) {
    const ObjectSource& o = objects[i];
    return WriteObject(ns, step, o.name, o.data, o.size).WithContext("writing object " + o.name);
  });
}

Result<Manifest> Client::Commit(std::string_view ns, uint64_t step, const CommitOptions& options) {
  wire::CommitStepRequest req;
  req.ns = std::string(ns);
  req.step = step;
  req.world_size = options.world_size;
  req.persist = options.persist;
  req.expected_objects = options.expected_objects;
  req.members = options.members;
  TC_ASSIGN_OR_RETURN(std::string json, impl_->CallJson(MsgType::kCommitStep, req.Encode()));
  return Manifest::Parse(json, "the manifest of " + StepPath(ns, step) + " returned by CommitStep");
}

Status Client::Abort(std::string_view ns, uint64_t step) {
  return impl_->CallStatus(MsgType::kAbortStep, EncodeStep(ns, step));
}

// ---- Durable tier ----

Status Client::Persist(std::string_view ns, uint64_t step) {
  return impl_->CallStatus(MsgType::kPersist, EncodeStep(ns, step));
}

Status Client::WaitDurable(std::string_view ns, uint64_t step, std::chrono::milliseconds timeout) {
  wire::WaitDurableRequest req;
  req.ns = std::string(ns);
  req.step = step;
  // The wire field is u32 ms; longer waits are capped (~49 days).
  const auto max_ms = static_cast<int64_t>(std::numeric_limits<uint32_t>::max() - 1);
  const int64_t ms = std::clamp<int64_t>(timeout.count(), 0, max_ms);
  req.timeout_ms = static_cast<uint32_t>(ms);
  // The caller's explicit timeout, not a request class's: zero waits forever.
  int recv_timeout = -1;
  if (ms > 0 && ms < std::numeric_limits<int>::max() - kWaitDurableGraceMs) {
    recv_timeout = static_cast<int>(ms) + kWaitDurableGraceMs;
  }
  return impl_->Call(MsgType::kWaitDurable, req.Encode(), recv_timeout).status();
}

Status Client::Restore(std::string_view ns, uint64_t step) {
  return impl_->CallStatus(MsgType::kRestore, EncodeStep(ns, step));
}

// ---- Reading ----

Result<StepListing> Client::Listing(std::string_view ns) {
  wire::ListRequest req;
  req.ns = std::string(ns);
  req.include_durable = true;
  TC_ASSIGN_OR_RETURN(std::string json, impl_->CallJson(MsgType::kList, req.Encode()));
  return client::ParseStepList(json);
}

Result<std::vector<StepSummary>> Client::List(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(StepListing listing, Listing(ns));
  return std::move(listing.steps);
}

Result<uint64_t> Client::LatestStep(std::string_view ns) {
  TC_ASSIGN_OR_RETURN(std::vector<StepSummary> steps, List(ns));
  return client::NewestCommittedStep(steps, ns);
}

Result<Manifest> Client::Show(std::string_view ns, uint64_t step) {
  TC_ASSIGN_OR_RETURN(std::string json, impl_->CallJson(MsgType::kShow, EncodeStep(ns, step)));
  return client::ParseShowBody(json, ns, step);
}

Result<ObjectView> Client::Open(std::string_view ns, uint64_t step, std::string_view name) {
  return OpenObject(ns, step, name, /*repair=*/false);
}

Result<ObjectView> Client::OpenVerified(std::string_view ns, uint64_t step, std::string_view name,
                                        const ReadVerify& verify) {
  Result<ObjectView> opened = OpenObject(ns, step, name, /*repair=*/false);
  if (!opened.ok() && opened.status().code() == Code::kCorruption) {  // resized at rest: repair it
    TC_ASSIGN_OR_RETURN(ObjectView fresh, OpenObject(ns, step, name, /*repair=*/true));
    impl_->Count(client::ReadCheck::kHash);
    TC_RETURN_IF_ERROR(fresh.Verify());
    TC_RETURN_IF_ERROR(fresh.Unchanged());
    return fresh;
  }
  TC_ASSIGN_OR_RETURN(ObjectView view, std::move(opened));
  const client::ReadCheck check = client::DecideReadCheck(verify, view.impl_->verified_age_ms);
  impl_->Count(check);
  if (check != client::ReadCheck::kHash) return view;
  Status st = view.Verify();
  if (st.ok()) st = view.Unchanged();  // the file was not recycled under the hash
  if (st.ok()) return view;
  if (st.code() != Code::kCorruption) return st;
  view = ObjectView();  // unmaps the bad copy before the agent replaces it
  TC_ASSIGN_OR_RETURN(ObjectView fresh, OpenObject(ns, step, name, /*repair=*/true));
  TC_RETURN_IF_ERROR(fresh.Verify());
  TC_RETURN_IF_ERROR(fresh.Unchanged());
  return fresh;
}

Result<ObjectView> Client::OpenToCopy(std::string_view ns, uint64_t step, std::string_view name,
                                      const ReadVerify& verify) {
  Result<ObjectView> opened = OpenObject(ns, step, name, /*repair=*/false);
  if (!opened.ok() && opened.status().code() == Code::kCorruption)
    return OpenVerified(ns, step, name, verify);
  TC_ASSIGN_OR_RETURN(ObjectView view, std::move(opened));
  const client::ReadCheck check = client::DecideReadCheck(verify, view.impl_->verified_age_ms);
  impl_->Count(check);
  view.impl_->hash_due = check == client::ReadCheck::kHash;
  return view;
}

Result<ObjectView> Client::OpenObject(std::string_view ns, uint64_t step, std::string_view name,
                                      bool repair) {
  wire::OpenObjectRequest req;
  req.ns = std::string(ns);
  req.step = step;
  req.name = std::string(name);
  req.repair = repair;
  TC_ASSIGN_OR_RETURN(Connection::Reply reply, impl_->Call(MsgType::kOpenObject, req.Encode()));
  impl_->cache->MaybeSweep();
  const std::string what = "object " + ObjectPath(ns, step, name);
  Result<wire::OpenObjectResponse> resp = wire::OpenObjectResponse::Decode(reply.body);
  if (!resp.ok()) return resp.status().WithContext("tierckptd's OpenObject response for " + what);
  if (!reply.fd.valid()) {
    return ProtocolError("tierckptd answered OpenObject for " + what +
                         " without a file descriptor (check client and agent are the same version)");
  }
  Result<Checksum> expected = Checksum::Parse(resp->checksum);
  if (!expected.ok()) return expected.status().WithContext("tierckptd's OpenObject response for " + what);
  if (resp->size > std::numeric_limits<size_t>::max()) {
    return InvalidArgument(what + " of " + std::to_string(resp->size) +
                           " bytes does not fit in this process's address space");
  }
  // A committed object's file is never resized by the agent: another size is
  // damage at rest (a truncation), which the repair path replaces.
  TC_ASSIGN_OR_RETURN(FileStat st, StatOpenFd(reply.fd.get(), "fstat the fd of " + what));
  if (st.size != resp->size) {
    return Corruption(
        what + " in the memory tier holds " + std::to_string(st.size) + " bytes but its manifest says " +
        std::to_string(resp->size) +
        ": the copy at rest was truncated or extended (OpenVerified and ReadObjects ask the agent to "
        "restore it from another tier; `tierckpt verify` reports it)");
  }
  TC_ASSIGN_OR_RETURN(MappingCache::Lease lease, impl_->cache->Acquire(std::move(reply.fd), resp->size,
                                                                       Mapping::Access::kReadOnly, what));
  ObjectView view;
  view.impl_ = std::make_unique<ObjectView::Impl>();
  view.impl_->ns = std::string(ns);
  view.impl_->step = step;
  view.impl_->name = std::string(name);
  view.impl_->checksum = std::move(resp->checksum);
  view.impl_->expected = *expected;
  view.impl_->repaired = std::move(resp->repaired);
  view.impl_->verified_age_ms = resp->verified_age_ms;
  view.impl_->ino = st.ino;
  view.impl_->ctime_ns = st.ctime_ns;
  view.impl_->mtime_ns = st.mtime_ns;
  view.impl_->lease = std::move(lease);
  return view;
}

Status Client::ReadObjects(std::string_view ns, uint64_t step, const std::vector<ObjectDest>& objects,
                           const ReadVerify& verify) {
  return ParallelFor(objects.size(), impl_->options.copy_threads, [&](size_t i) -> Status {
    const ObjectDest& d = objects[i];
    const std::string context = "reading object " + d.name;
    Result<ObjectView> view = Open(ns, step, d.name);
    if (!view.ok() && view.status().code() == Code::kCorruption) {  // resized at rest: repair it
      impl_->Count(client::ReadCheck::kHash);
      view = OpenObject(ns, step, d.name, /*repair=*/true);
      if (!view.ok()) return view.status().WithContext(context);
      if (view->size() != d.size) {
        return InvalidArgument(context + ": the destination holds " + std::to_string(d.size) +
                               " bytes but the object has " + std::to_string(view->size()));
      }
      return view->CopyTo(d.data, d.size).WithContext(context);
    }
    if (!view.ok()) return view.status().WithContext(context);
    if (view->size() != d.size) {
      return InvalidArgument(context + ": the destination holds " + std::to_string(d.size) +
                             " bytes but the object has " + std::to_string(view->size()));
    }
    const client::ReadCheck check = client::DecideReadCheck(verify, view->impl_->verified_age_ms);
    impl_->Count(check);
    Status copied = Status::Ok();
    if (check != client::ReadCheck::kHash) {
      if (d.size > 0) std::memcpy(d.data, view->data(), d.size);
    } else {
      copied = view->CopyTo(d.data, d.size);
    }
    if (copied.ok()) copied = view->Unchanged();  // the file was not recycled under the copy
    if (copied.code() != Code::kCorruption) return copied.WithContext(context);
    *view = ObjectView();  // unmaps the bad copy before the agent replaces it
    if (check != client::ReadCheck::kHash) impl_->Count(client::ReadCheck::kHash);
    view = OpenObject(ns, step, d.name, /*repair=*/true);
    if (!view.ok()) return view.status().WithContext(context);
    copied = view->CopyTo(d.data, d.size);
    if (copied.ok()) copied = view->Unchanged();
    return copied.WithContext(context);
  });
}

ReadCounters Client::read_counters() const {
  return ReadCounters{impl_->hashed.load(std::memory_order_relaxed),
                      impl_->attested.load(std::memory_order_relaxed),
                      impl_->unverified.load(std::memory_order_relaxed)};
}

// ---- Administration ----

Result<std::string> Client::Verify(std::string_view ns, uint64_t step) {
  return impl_->CallJson(MsgType::kVerify, EncodeStep(ns, step));
}

Result<std::string> Client::Stats() { return impl_->CallJson(MsgType::kStats, ""); }

Status Client::DeleteStep(std::string_view ns, uint64_t step, bool durable_too, bool keep_replicas) {
  wire::DeleteStepRequest req;
  req.ns = std::string(ns);
  req.step = step;
  req.durable_too = durable_too;
  req.keep_replicas = keep_replicas;
  return impl_->CallStatus(MsgType::kDeleteStep, req.Encode());
}

Result<std::string> Client::Prune(std::string_view ns, uint32_t keep_memory, uint32_t keep_durable) {
  wire::PruneRequest req;
  req.ns = std::string(ns);
  req.keep_memory = keep_memory;
  req.keep_durable = keep_durable;
  return impl_->CallJson(MsgType::kPrune, req.Encode());
}

Result<std::string> Client::BindDurable(std::string_view ns, std::string_view base) {
  wire::BindDurableRequest req;
  req.ns = std::string(ns);
  req.base = std::string(base);
  TC_ASSIGN_OR_RETURN(std::string body, impl_->CallJson(MsgType::kBindDurable, req.Encode()));
  return client::ParseBindDurable(body);
}

Status Client::SetPolicy(std::string_view ns, uint32_t keep_memory, uint32_t keep_durable,
                         uint64_t persist_every) {
  wire::SetPolicyRequest req;
  req.ns = std::string(ns);
  req.keep_memory = keep_memory;
  req.keep_durable = keep_durable;
  req.persist_every = persist_every;
  return impl_->CallStatus(MsgType::kSetPolicy, req.Encode());
}

Status Client::Shutdown() { return impl_->CallStatus(MsgType::kShutdown, ""); }

}  // namespace tierckpt
