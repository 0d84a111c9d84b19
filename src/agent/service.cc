#include "agent/service.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/log.h"
#include "wire/protocol.h"

namespace tierckpt::agent {

Service::Service(ServiceOptions options, RequestHandler* handler)
    : options_(std::move(options)), handler_(handler), wake_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

Service::~Service() {
  Stop();
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : conns_) {
    if (c.thread.joinable()) c.thread.detach();  // only if Run never joined (it always does)
  }
}

Status Service::Listen() {
  if (!wake_fd_.valid()) return ErrnoStatus("creating the service's wake-up eventfd");
  TC_ASSIGN_OR_RETURN(listen_fd_, wire::ListenUnix(options_.socket_path));
  return Status::Ok();
}

void Service::Stop() {
  stopping_ = true;
  uint64_t one = 1;
  if (wake_fd_.valid()) (void)!::write(wake_fd_.get(), &one, sizeof(one));
}

size_t Service::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return conns_.size();
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
  ::unlink(options_.socket_path.c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, c] : conns_) {
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
    }
  }
  // Join outside mu_: exiting threads take it to deregister.
  for (;;) {
    std::thread t;
    {
      std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  conns_.clear();
  finished_.clear();
}

void Service::ReapFinished() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id : finished_) {
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      done.push_back(std::move(it->second.thread));
      conns_.erase(it);
    }
    finished_.clear();
  }
  for (auto& t : done) {
    if (t.joinable()) t.join();
  }
}

void Service::Accept() {
  UniqueFd fd(::accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!fd.valid()) {
    if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
      Log(LogLevel::kWarn, "accept").Err(ErrnoStatus("accept on " + options_.socket_path));
      if (errno == EMFILE || errno == ENFILE) ::usleep(100 * 1000);  // let connections close
    }
    return;
  }
  Result<wire::PeerCred> peer = wire::GetPeerCred(fd.get());
  if (!peer.ok()) {
    Log(LogLevel::kWarn, "connection rejected").Err(peer.status());
    return;
  }
  if (peer->uid != ::getuid() && peer->uid != 0) {
    Log(LogLevel::kWarn, "connection rejected")
        .Kv("pid", static_cast<int64_t>(peer->pid))
        .Kv("uid", static_cast<uint64_t>(peer->uid))
        .Kv("why", "peer uid is neither the agent's uid nor root");
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (conns_.size() >= options_.max_connections) {
    Status busy = Unavailable("tierckptd already serves " + std::to_string(conns_.size()) +
                              " connections (the limit); close idle clients and retry");
    (void)wire::SendFrame(fd.get(), static_cast<uint16_t>(wire::MsgType::kHello) | wire::kResponseBit, 0,
                          wire::EncodeResponse(busy, ""));
    Log(LogLevel::kWarn, "connection rejected").Kv("pid", static_cast<int64_t>(peer->pid)).Err(busy);
    return;
  }
  uint64_t id = next_id_++;
  Conn& c = conns_[id];
  c.fd = fd.get();
  c.thread = std::thread([this, id, f = std::move(fd), p = *peer]() mutable { Serve(id, std::move(f), p); });
}

void Service::Serve(uint64_t id, UniqueFd fd, wire::PeerCred peer) {
  ConnectionState conn;
  conn.id = id;
  conn.peer = peer;
  Log(LogLevel::kDebug, "connection open").Kv("conn", id).Kv("pid", static_cast<int64_t>(peer.pid));
  for (;;) {
    Result<wire::Frame> frame = wire::RecvFrame(fd.get(), -1);
    if (!frame.ok()) {
      const Status& st = frame.status();
      if (st.code() == Code::kProtocolError && !stopping_) {
        Log(LogLevel::kWarn, "bad frame").Kv("conn", id).Kv("pid", static_cast<int64_t>(peer.pid)).Err(st);
        (void)wire::SendFrame(fd.get(), wire::kResponseBit, 0, wire::EncodeResponse(st, ""));
      }
      break;
    }
    Reply reply = handler_->Handle(conn, *frame);
    uint16_t type = static_cast<uint16_t>(frame->header.type | wire::kResponseBit);
    Status sent = wire::SendFrame(fd.get(), type, frame->header.request_id,
                                  wire::EncodeResponse(reply.status, reply.status.ok() ? reply.body : ""),
                                  reply.status.ok() && reply.fd.valid() ? reply.fd.get() : -1);
    if (reply.stop_after) Stop();
    if (!sent.ok()) {
      // The client sees only a closed connection: say here what happened.
      Log(LogLevel::kWarn, "reply not sent")
          .Kv("conn", id)
          .Kv("pid", static_cast<int64_t>(peer.pid))
          .Kv("request", wire::MsgTypeName(frame->header.type))
          .Err(sent);
      break;
    }
    if (reply.close_after) break;
  }
  handler_->OnClose(conn);
  Log(LogLevel::kDebug, "connection closed").Kv("conn", id);
  std::lock_guard<std::mutex> lock(mu_);
  fd.Reset();  // under mu_, so Run never shuts down a recycled fd number
  finished_.push_back(id);
  if (auto it = conns_.find(id); it != conns_.end()) it->second.fd = -1;
}

}  // namespace tierckpt::agent
