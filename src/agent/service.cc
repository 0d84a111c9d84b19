#include "agent/service.h"

#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "os/descriptors.h"
#include "os/files.h"
#include "wire/protocol.h"

namespace tierckpt::agent {
namespace {

// Payload buffers at least this large are handed back to the system with
// malloc_trim once freed: glibc keeps freed arena memory otherwise.
constexpr size_t kTrimAfterBytes = 1u << 20;

std::string Mib(uint64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

// A descriptor held in reserve, released to accept (and refuse) a client at
// EMFILE; invalid when even that cannot be opened (RefuseForFdLimit copes).
UniqueFd SpareFd() {
  Result<UniqueFd> fd = OpenFile("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd.ok() ? std::move(fd).value() : UniqueFd();
}

}  // namespace

Service::Service(ServiceOptions options, RequestHandler* handler)
    : options_(std::move(options)), handler_(handler) {
  // Set once here (Stop reads it from any thread); Listen fails without it.
  Result<UniqueFd> wake = OpenEventFd("the service's wake-up eventfd");
  if (wake.ok()) {
    wake_fd_ = std::move(wake).value();
  } else {
    Log(LogLevel::kError, "service").Err(wake.status());
  }
}

Service::~Service() {
  Stop();
  MutexLock lock(&mu_);
  for (auto& [id, c] : conns_) {
    if (c.thread.joinable()) c.thread.detach();  // only if Run never joined (it always does)
  }
}

Status Service::Listen() {
  if (!wake_fd_.valid()) return ErrnoStatus("creating the service's wake-up eventfd");
  effective_max_connections_ = std::max<size_t>(1, options_.max_connections);
  rlimit nofile{};
  if (::getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    fd_limit_ = nofile.rlim_cur;
    // Half the fds for connections; the rest for objects, stores and peers.
    const size_t by_fds = std::max<size_t>(4, fd_limit_ / 2);
    if (by_fds < effective_max_connections_) {
      Log(LogLevel::kWarn, "service")
          .Kv("max_connections", static_cast<uint64_t>(by_fds))
          .Kv("fd_limit", static_cast<uint64_t>(fd_limit_))
          .Kv("why", "lowered to half the open-file limit; raise `ulimit -n` (LimitNOFILE=) to serve more clients");
      effective_max_connections_ = by_fds;
    }
  }
  // Pending connections never fill more than half the table, so greeted
  // clients always find room.
  max_pending_ = std::clamp<size_t>(options_.max_pending_hello, 1, std::max<size_t>(1, effective_max_connections_ / 2));
  reserve_fd_ = SpareFd();
  TC_ASSIGN_OR_RETURN(listen_fd_, wire::ListenUnix(options_.socket_path, options_.listen_backlog));
  return Status::Ok();
}

void Service::Stop() {
  stopping_ = true;
  if (wake_fd_.valid()) SignalEventFd(wake_fd_.get());
}

size_t Service::connections() const {
  MutexLock lock(&mu_);
  return conns_.size() - closing_;
}

void Service::Run(int extra_stop_fd, const std::function<void()>& on_stopping) {
  while (!stopping_) {
    pollfd fds[3] = {{listen_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}, {extra_stop_fd, POLLIN, 0}};
    int n = ::poll(fds, extra_stop_fd >= 0 ? 3 : 2, 1000);
    ReapFinished();
    if (n < 0) {
      if (errno == EINTR) continue;
      Log(LogLevel::kError, "service").Err(ErrnoStatus("poll on " + options_.socket_path));
      break;
    }
    if (fds[1].revents != 0) break;
    if (extra_stop_fd >= 0 && fds[2].revents != 0) break;
    if (fds[0].revents != 0) Accept();
  }
  stopping_ = true;
  if (on_stopping) on_stopping();
  listen_fd_.Reset();
  // Best effort: a socket left behind is replaced by the next agent's Listen.
  RemoveFile(options_.socket_path, IfMissing::kOk).IgnoreError();
  {
    MutexLock lock(&mu_);
    for (auto& [id, c] : conns_) {
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
    }
  }
  // Join outside mu_: exiting threads take it to deregister.
  for (;;) {
    std::thread t;
    {
      MutexLock lock(&mu_);
      for (auto& [id, c] : conns_) {
        if (c.thread.joinable()) {
          t = std::move(c.thread);
          break;
        }
      }
    }
    if (!t.joinable()) break;
    t.join();
  }
  MutexLock lock(&mu_);
  conns_.clear();
  finished_.clear();
  pending_ = 0;
  closing_ = 0;
}

void Service::ReapFinished() {
  std::vector<std::thread> done;
  {
    MutexLock lock(&mu_);
    for (uint64_t id : finished_) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      done.push_back(std::move(it->second.thread));
      conns_.erase(it);
      --closing_;
    }
    finished_.clear();
  }
  for (auto& t : done) {
    if (t.joinable()) t.join();
  }
}

void Service::Refuse(UniqueFd fd, const wire::PeerCred& peer, const Status& why) {
  // A fresh connection's send buffer is empty: this never waits.
  (void)wire::SendFrame(fd.get(), static_cast<uint16_t>(wire::MsgType::kHello) | wire::kResponseBit, 0,
                        wire::EncodeResponse(why, ""), -1, /*timeout_ms=*/0);
  Log(LogLevel::kWarn, "connection refused").Kv("pid", static_cast<int64_t>(peer.pid)).Err(why);
}

void Service::RefuseForFdLimit(int accept_errno) {
  Status why = ResourceExhausted(
      std::string("connection refused: tierckptd is out of file descriptors (") +
      std::strerror(accept_errno) + ", limit " + std::to_string(fd_limit_) + ") with " +
      std::to_string(connections()) + " connections open; close idle clients, or restart the agent with a "
      "higher `ulimit -n`");
  if (!reserve_fd_.valid()) {
    Log(LogLevel::kWarn, "accept").Err(why);
    ::usleep(100 * 1000);  // nothing to answer with; let connections close
    return;
  }
  reserve_fd_.Reset();
  UniqueFd fd = AcceptConnection(listen_fd_.get()).fd;  // a failure: nothing to refuse
  if (fd.valid()) {
    wire::PeerCred peer;
    if (Result<wire::PeerCred> p = wire::GetPeerCred(fd.get()); p.ok()) peer = *p;
    Refuse(std::move(fd), peer, why);
  }
  reserve_fd_ = SpareFd();
}

void Service::Accept() {
  Accepted accepted = AcceptConnection(listen_fd_.get());
  UniqueFd fd = std::move(accepted.fd);
  if (!fd.valid()) {
    const int err = accepted.err;
    if (err == EMFILE || err == ENFILE) {
      RefuseForFdLimit(err);
    } else if (err != EAGAIN && err != EINTR && err != ECONNABORTED) {
      Log(LogLevel::kWarn, "accept").Err(ErrnoStatus("accept on " + options_.socket_path, err));
    }
    return;
  }
  Result<wire::PeerCred> peer = wire::GetPeerCred(fd.get());
  if (!peer.ok()) {
    Log(LogLevel::kWarn, "connection rejected").Err(peer.status());
    return;
  }
  if (peer->uid != ::geteuid() && peer->uid != 0) {
    Log(LogLevel::kWarn, "connection rejected")
        .Kv("pid", static_cast<int64_t>(peer->pid))
        .Kv("uid", static_cast<uint64_t>(peer->uid))
        .Kv("agent_uid", static_cast<uint64_t>(::geteuid()))
        .Kv("why", "peer uid is neither the agent's uid nor root");
    return;
  }
  MutexLock lock(&mu_);
  const size_t live = conns_.size() - closing_;
  if (live >= effective_max_connections_) {
    Refuse(std::move(fd), *peer,
           ResourceExhausted("connection refused: tierckptd already serves " + std::to_string(live) +
                             " connections, its limit; close idle "
                             "clients and retry (see `tierckpt agent status`)"));
    return;
  }
  if (pending_ >= max_pending_) EvictOldestPendingLocked();
  uint64_t id = next_id_++;
  Conn& c = conns_[id];
  c.fd = fd.get();
  ++pending_;
  c.thread = std::thread([this, id, f = std::move(fd), p = *peer]() mutable { Serve(id, std::move(f), p); });
}

void Service::EvictOldestPendingLocked() {
  for (auto& [id, c] : conns_) {  // ids grow with time: the first is the oldest
    if (!c.pending || c.evicted || c.fd < 0) continue;
    c.evicted = true;
    --pending_;
    ++closing_;
    // Its thread is inside RecvFrame: end-of-file wakes it, and it says why.
    ::shutdown(c.fd, SHUT_RD);
    return;
  }
}

Result<wire::Frame> Service::ReadFrame(int fd, const ConnectionState& conn, uint64_t* admitted,
                                       wire::FrameHeader* header) {
  wire::RecvLimits limits;
  limits.idle_timeout_ms = conn.hello_done ? -1 : options_.hello_timeout_ms;
  limits.frame_timeout_ms = options_.frame_timeout_ms;
  limits.admit = [&](const wire::FrameHeader& h) -> Status {
    *header = h;
    const uint32_t max = wire::MaxRequestPayload(h.type);
    const std::string what = std::string(wire::MsgTypeName(h.type)) + " request";
    if (h.payload_len > max) {
      return InvalidArgument("a " + what + " of " + std::to_string(h.payload_len) + " payload bytes exceeds the " +
                           std::to_string(max) + "-byte limit for that request (docs/protocol.md); nothing of "
                           "it was read and the connection is closed");
    }
    const uint64_t limit = options_.max_buffered_request_bytes;
    uint64_t cur = buffered_.load();
    do {
      if (cur + h.payload_len > limit) {
        return ResourceExhausted("tierckptd is already receiving " + std::to_string(cur) +
                                 " bytes of requests on other connections and cannot take this " + what +
                                 " of " + std::to_string(h.payload_len) + " bytes (limit " + Mib(limit) +
                                 " in all); retry shortly");
      }
    } while (!buffered_.compare_exchange_weak(cur, cur + h.payload_len));
    *admitted = h.payload_len;
    return Status::Ok();
  };
  return wire::RecvFrame(fd, limits);
}

void Service::Serve(uint64_t id, UniqueFd fd, wire::PeerCred peer) {
  ConnectionState conn;
  conn.id = id;
  conn.peer = peer;
  bool had_large_frame = false;  // then trim the heap when the connection ends
  Log(LogLevel::kDebug, "connection open").Kv("conn", id).Kv("pid", static_cast<int64_t>(peer.pid));
  for (;;) {
    uint64_t admitted = 0;
    wire::FrameHeader header;  // request_id 0 until a header is read
    header.request_id = 0;
    Result<wire::Frame> frame = ReadFrame(fd.get(), conn, &admitted, &header);
    if (admitted >= kTrimAfterBytes) had_large_frame = true;
    bool evicted = false;
    {
      MutexLock lock(&mu_);
      auto it = conns_.find(id);
      if (it != conns_.end()) {
        evicted = it->second.evicted;
        if (it->second.pending && !evicted) {
          it->second.pending = false;
          --pending_;
        }
      }
    }
    if (evicted) {
      Status why = ResourceExhausted("connection closed by tierckptd: it sent no complete request while " +
                                     std::to_string(max_pending_) + " newer connections waited "
                                     "for their Hello; send Hello as soon as you connect");
      Log(LogLevel::kWarn, "connection closed").Kv("conn", id).Kv("pid", static_cast<int64_t>(peer.pid)).Err(why);
      (void)wire::SendFrame(fd.get(), wire::kResponseBit, 0, wire::EncodeResponse(why, ""), -1, 0);
      buffered_ -= admitted;
      break;
    }
    if (!frame.ok()) {
      const Status& st = frame.status();
      buffered_ -= admitted;
      if (st.code() == Code::kUnavailable || stopping_) break;  // the client left, or we stop
      Log(LogLevel::kWarn, st.code() == Code::kTimeout ? "connection timed out" : "bad frame")
          .Kv("conn", id)
          .Kv("pid", static_cast<int64_t>(peer.pid))
          .Err(st);
      // Answer the request whose header was read with its own id and type,
      // so the client reports this error and not a mismatch.
      const uint16_t type = header.request_id != 0 ? static_cast<uint16_t>(header.type | wire::kResponseBit)
                                                   : wire::kResponseBit;
      (void)wire::SendFrame(fd.get(), type, header.request_id, wire::EncodeResponse(st, ""), -1,
                            /*timeout_ms=*/1000);
      break;
    }
    Reply reply;
    uint16_t type = 0;
    uint32_t request_id = 0;
    std::string_view request_name;
    size_t payload_bytes = 0;
    {
      const wire::Frame request = std::move(frame).value();
      reply = handler_->Handle(conn, request);
      type = static_cast<uint16_t>(request.header.type | wire::kResponseBit);
      request_id = request.header.request_id;
      request_name = wire::MsgTypeName(request.header.type);
      payload_bytes = request.payload.capacity();
    }  // the payload is freed here, before the (maybe slow) send
    buffered_ -= admitted;
    if (payload_bytes >= kTrimAfterBytes) ::malloc_trim(0);
    Status sent = wire::SendFrame(fd.get(), type, request_id,
                                  wire::EncodeResponse(reply.status, reply.status.ok() ? reply.body : ""),
                                  reply.status.ok() && reply.fd.valid() ? reply.fd.get() : -1,
                                  options_.send_timeout_ms);
    if (reply.stop_after) Stop();
    if (!sent.ok()) {
      // The client sees only a closed connection: say here what happened.
      Log(LogLevel::kWarn, "reply not sent")
          .Kv("conn", id)
          .Kv("pid", static_cast<int64_t>(peer.pid))
          .Kv("request", request_name)
          .Err(sent);
      break;
    }
    if (reply.close_after) break;
  }
  handler_->OnClose(conn);
  if (had_large_frame) ::malloc_trim(0);  // a partial large payload was freed on the way out
  Log(LogLevel::kDebug, "connection closed").Kv("conn", id);
  MutexLock lock(&mu_);
  fd.Reset();  // under mu_, so Run never shuts down a recycled fd number
  finished_.push_back(id);
  if (auto it = conns_.find(id); it != conns_.end()) {
    it->second.fd = -1;
    if (it->second.pending && !it->second.evicted) --pending_;
    if (!it->second.evicted) ++closing_;  // an evicted one was counted when evicted
    it->second.pending = false;
  }
}

}  // namespace tierckpt::agent
