// peer_store.cc — see peer_store.h.
#include "replication/peer_store.h"

#include <span>
#include <utility>

#include "common/names.h"
#include "os/files.h"
#include "os/fs_stat.h"
#include "os/mapping.h"

namespace tierckpt::agent {
namespace {

bool Broken(const Status& s) {
  switch (s.code()) {
    case Code::kUnavailable:
    case Code::kTimeout:
    case Code::kIoError:
    case Code::kProtocolError:
      return true;
    default:
      return false;
  }
}

}  // namespace

PeerObjectStore::PeerObjectStore(peer::Transport* transport, PeerStoreTarget target, peer::Millis timeout)
    : transport_(transport),
      target_(std::move(target)),
      timeout_(timeout),
      describe_("peer " + target_.node_id + " at " + target_.address +
                (target_.origin == target_.node_id ? std::string() : " (replica of " + target_.origin + ")")) {}

std::string PeerObjectStore::Describe() const { return describe_; }

Status PeerObjectStore::ReadOnly(std::string_view op) const {
  return FailedPrecondition(std::string(op) + " on " + describe_ +
                            ": a peer's memory tier is read-only from here");
}

Result<std::unique_ptr<peer::Connection>> PeerObjectStore::Take() {
  {
    MutexLock lock(&mu_);
    if (!idle_.empty()) {
      std::unique_ptr<peer::Connection> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  Result<std::unique_ptr<peer::Connection>> c = transport_->Connect(target_.address, timeout_, target_.node_id);
  if (!c.ok()) return c.status().WithContext("connecting to " + describe_);
  return c;
}

void PeerObjectStore::Give(std::unique_ptr<peer::Connection> conn) {
  if (conn == nullptr) return;
  MutexLock lock(&mu_);
  idle_.push_back(std::move(conn));
}

Result<peer::Frame> PeerObjectStore::Call(std::unique_ptr<peer::Connection>& conn, PeerMsg type,
                                          const PeerRequest& request) {
  peer::Frame f;
  f.type = static_cast<uint16_t>(type);
  f.request_id = next_request_++;
  f.payload = EncodePeerRequest(type, request);
  Status sent = conn->Send(f);
  if (!sent.ok()) {
    conn.reset();
    return sent;
  }
  Result<peer::Message> m = conn->Receive(timeout_);
  if (!m.ok()) {
    conn.reset();  // a late reply must not answer the next request
    return m.status();
  }
  if (m->kind == peer::Message::Kind::kStream) {
    if (!conn->DiscardStream().ok()) conn.reset();
    return ProtocolError(describe_ + " answered " + std::string(PeerMsgName(f.type)) + " with a stream");
  }
  if (m->frame.request_id != f.request_id) {
    conn.reset();
    return ProtocolError(describe_ + " answered request " + std::to_string(m->frame.request_id) +
                         " when " + std::to_string(f.request_id) + " was asked");
  }
  if (m->frame.type == static_cast<uint16_t>(PeerMsg::kError)) return DecodePeerError(m->frame.payload);
  return std::move(m->frame);
}

Result<Manifest> PeerObjectStore::ReadManifest(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  Result<std::unique_ptr<peer::Connection>> conn = Take();
  Result<peer::Frame> r = conn.ok() ? Call(*conn, PeerMsg::kGetManifest, {target_.origin, std::string(ns), step, ""})
                                    : Result<peer::Frame>(conn.status());
  if (conn.ok()) Give(std::move(*conn));
  if (!r.ok()) {
    return r.status().WithContext("reading the manifest of " + std::string(ns) + " step " +
                                  std::to_string(step) + " from " + describe_);
  }
  if (r->type != static_cast<uint16_t>(PeerMsg::kManifest)) {
    return ProtocolError(describe_ + " answered GetManifest with " + std::string(PeerMsgName(r->type)));
  }
  TC_ASSIGN_OR_RETURN(Manifest m, Manifest::Parse(r->payload, describe_));
  if (m.ns != ns || m.step != step) {
    return Corruption(describe_ + " sent the manifest of " + m.ns + " step " + std::to_string(m.step) +
                      " when " + std::string(ns) + " step " + std::to_string(step) + " was asked");
  }
  return m;
}

Result<std::vector<uint64_t>> PeerObjectStore::ListCommittedSteps(std::string_view ns) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  Result<std::unique_ptr<peer::Connection>> conn = Take();
  Result<peer::Frame> r = conn.ok() ? Call(*conn, PeerMsg::kListSteps, {target_.origin, std::string(ns), 0, ""})
                                    : Result<peer::Frame>(conn.status());
  if (conn.ok()) Give(std::move(*conn));
  if (!r.ok()) return r.status().WithContext("listing " + std::string(ns) + " on " + describe_);
  if (r->type != static_cast<uint16_t>(PeerMsg::kSteps)) {
    return ProtocolError(describe_ + " answered ListSteps with " + std::string(PeerMsgName(r->type)));
  }
  return DecodeSteps(r->payload);
}

Result<uint64_t> PeerObjectStore::ObjectSize(std::string_view ns, uint64_t step, std::string_view name) {
  TC_ASSIGN_OR_RETURN(Manifest m, ReadManifest(ns, step));
  for (const auto& e : m.objects) {
    if (e.name == name) return e.size;
  }
  return NotFound("object " + QuoteForMessage(name) + " of " + std::string(ns) + " step " +
                  std::to_string(step) + " is not in its manifest on " + describe_);
}

Status PeerObjectStore::ReadObject(std::string_view ns, uint64_t step, std::string_view name, uint64_t offset,
                                   void* dst, size_t size) {
  if (offset != 0) {
    return InvalidArgument("reading object " + QuoteForMessage(name) + " of " + std::string(ns) + " step " +
                           std::to_string(step) + " from " + describe_ + " at offset " + std::to_string(offset) +
                           ": peers send whole objects only");
  }
  return Fetch(ns, step, name, dst, -1, size).status();
}

Result<Checksum> PeerObjectStore::ReadObjectVerified(std::string_view ns, uint64_t step, std::string_view name,
                                                     void* dst, size_t size) {
  return Fetch(ns, step, name, dst, -1, size);
}

Status PeerObjectStore::ReadObjectToFile(std::string_view ns, uint64_t step, std::string_view name, int fd,
                                         uint64_t size) {
  return ReadObjectToFileHashed(ns, step, name, fd, size).status();
}

Result<std::string> PeerObjectStore::ReadObjectToFileHashed(std::string_view ns, uint64_t step,
                                                            std::string_view name, int fd, uint64_t size) {
  if (fd < 0) return InvalidArgument("ReadObjectToFile from " + describe_ + ": no destination file descriptor");
  // A recycled segment (its pages already allocated) is received straight
  // into a mapping of it: one copy fewer than a receive buffer + pwrite. A
  // fresh file takes pwrite, which spares the kernel zeroing pages that a
  // mapping would fault in first (docs/decisions.md #11).
  Result<FileStat> st = StatOpenFd(fd, "stat the destination of " + std::string(name));
  if (size > 0 && st.ok() && st->allocated_bytes >= size) {
    Result<Mapping> map = Mapping::Map(fd, static_cast<size_t>(size), Mapping::Access::kReadWrite,
                                       /*populate=*/true, "the destination of " + std::string(name));
    if (map.ok()) {
      TC_ASSIGN_OR_RETURN(Checksum sum, Fetch(ns, step, name, map->data(), -1, static_cast<size_t>(size)));
      return sum.ToString();
    }
  }
  TC_ASSIGN_OR_RETURN(Checksum sum, Fetch(ns, step, name, nullptr, fd, static_cast<size_t>(size)));
  return sum.ToString();
}

Result<Checksum> PeerObjectStore::Fetch(std::string_view ns, uint64_t step, std::string_view name, void* dst,
                                        int fd, size_t size) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  TC_RETURN_IF_ERROR(ValidateObjectName(name));
  const std::string what = "object " + QuoteForMessage(name) + " of " + std::string(ns) + " step " +
                           std::to_string(step) + " from " + describe_;
  TC_ASSIGN_OR_RETURN(std::unique_ptr<peer::Connection> conn, Take());
  Result<Checksum> got = ReceiveObject(conn, ns, step, name, what, dst, fd, size);
  Give(std::move(conn));
  return got;
}

Result<Checksum> PeerObjectStore::ReceiveObject(std::unique_ptr<peer::Connection>& conn, std::string_view ns,
                                                uint64_t step, std::string_view name, const std::string& what,
                                                void* dst, int fd, size_t size) {
  peer::Frame f;
  f.type = static_cast<uint16_t>(PeerMsg::kGetObject);
  f.request_id = next_request_++;
  f.payload = EncodePeerRequest(PeerMsg::kGetObject, {target_.origin, std::string(ns), step, std::string(name)});
  if (Status sent = conn->Send(f); !sent.ok()) {
    conn.reset();
    return sent.WithContext("reading " + what);
  }
  Result<peer::Message> m = conn->Receive(timeout_);
  if (!m.ok()) {
    conn.reset();
    return m.status().WithContext("reading " + what);
  }
  if (m->kind == peer::Message::Kind::kControl) {
    if (m->frame.type == static_cast<uint16_t>(PeerMsg::kError)) {
      return DecodePeerError(m->frame.payload).WithContext("reading " + what);
    }
    conn.reset();
    return ProtocolError(describe_ + " answered GetObject with " + std::string(PeerMsgName(m->frame.type)));
  }
  if (m->stream.request_id != f.request_id || m->stream.size != size) {
    if (!conn->DiscardStream().ok()) conn.reset();
    return Corruption("reading " + what + ": the peer sent " + std::to_string(m->stream.size) +
                      " bytes for request " + std::to_string(m->stream.request_id) + " where " +
                      std::to_string(size) + " bytes were expected for request " + std::to_string(f.request_id) +
                      "; the copies differ, restore from another tier");
  }
  Result<Checksum> got =
      dst != nullptr || size == 0
          ? conn->ReceiveStreamBody(std::span<uint8_t>(static_cast<uint8_t*>(dst), size))
          : conn->ReceiveStreamPieces([fd](uint64_t offset, const uint8_t* data, size_t n) -> Status {
              return PwriteAll(fd, data, n, offset, "the restore destination");
            });
  if (!got.ok()) {
    if (Broken(got.status())) conn.reset();
    return got.status().WithContext("reading " + what);
  }
  return got;
}

Status PeerObjectStore::PutObject(std::string_view, uint64_t, std::string_view, const void*, size_t) {
  return ReadOnly("PutObject");
}
Status PeerObjectStore::CommitStep(const Manifest&) { return ReadOnly("CommitStep"); }
Result<std::vector<std::string>> PeerObjectStore::ListNamespaces() { return ReadOnly("ListNamespaces"); }
Status PeerObjectStore::DeleteStep(std::string_view, uint64_t) { return ReadOnly("DeleteStep"); }
Result<int> PeerObjectStore::SweepUncommitted(std::string_view, const SweepOptions&) {
  return ReadOnly("SweepUncommitted");
}

}  // namespace tierckpt::agent
