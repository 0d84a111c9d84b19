#include "peer/handshaking_listener.h"

#include <iterator>
#include <utility>

#include "common/log.h"
#include "peer/framed_connection.h"
#include "peer/handshake.h"

namespace tierckpt::peer {
namespace {
// Pause after a failed accept (e.g. out of fds) so the loop does not spin.
constexpr Millis kAcceptRetryPause{100};
}  // namespace

HandshakingListener::HandshakingListener(std::unique_ptr<ChannelAcceptor> acceptor, TransportOptions options)
    : acceptor_(std::move(acceptor)), options_(std::move(options)) {
  acceptor_thread_ = std::thread([this] { AcceptLoop(); });
}

HandshakingListener::~HandshakingListener() { Close(); }

Result<std::unique_ptr<Connection>> HandshakingListener::Accept(Millis timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  bool ready = cv_.wait_until(lock, DeadlineAfter(timeout), [&] { return closed_ || !ready_.empty(); });
  if (closed_) return Unavailable("the peer listener on " + address() + " is closed");
  if (!ready) {
    return Timeout("no peer connected to " + address() + " within " + std::to_string(timeout.count()) +
                   " ms");
  }
  std::unique_ptr<Connection> c = std::move(ready_.front());
  ready_.pop_front();
  return c;
}

void HandshakingListener::Close() {
  std::lock_guard<std::mutex> close_lock(close_mu_);
  std::deque<std::unique_ptr<Connection>> unaccepted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    for (Pending& p : pending_) {
      if (p.channel) p.channel->Shutdown();
    }
    unaccepted.swap(ready_);
    cv_.notify_all();
  }
  acceptor_->Shutdown();
  if (acceptor_thread_.joinable()) acceptor_thread_.join();
  std::list<Pending> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.splice(all.end(), pending_);
  }
  for (Pending& p : all) {
    if (p.thread.joinable()) p.thread.join();
  }
}

void HandshakingListener::AcceptLoop() {
  while (true) {
    Result<std::unique_ptr<ByteChannel>> accepted = acceptor_->Accept();
    if (!accepted.ok()) {
      if (accepted.status().code() == Code::kAborted) return;
      std::unique_lock<std::mutex> lock(mu_);
      if (closed_) return;
      Log(LogLevel::kWarn, "peer_accept_failed").Kv("listener", address()).Err(accepted.status());
      cv_.wait_for(lock, kAcceptRetryPause, [&] { return closed_; });
      if (closed_) return;
      continue;
    }
    Reap();
    std::unique_ptr<ByteChannel> channel = std::move(*accepted);
    std::string peer = channel->peer_address();
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_) return;
    if (pending_.size() >= options_.max_pending_handshakes) {
      lock.unlock();
      channel.reset();
      Reject(peer, ResourceExhausted("peer " + peer +
                                     " turned away: " + std::to_string(options_.max_pending_handshakes) +
                                     " handshakes are already in progress on " + address()));
      continue;
    }
    pending_.emplace_back();
    Pending* p = &pending_.back();
    p->channel = std::move(channel);
    p->thread = std::thread([this, p] { RunHandshake(p); });
  }
}

void HandshakingListener::RunHandshake(Pending* pending) {
  ByteChannel* ch = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ch = pending->channel.get();
  }
  HandshakeParams params;
  params.node_id = options_.node_id;
  params.secret = &options_.secret;
  params.timeout = options_.handshake_timeout;
  Result<PeerInfo> info = ServerHandshake(*ch, params);
  std::string peer = ch->peer_address();
  Status why = info.ok() ? Status::Ok() : info.status();
  std::unique_ptr<ByteChannel> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (why.ok() && !closed_) {
      if (ready_.size() >= options_.max_unaccepted) {
        why = ResourceExhausted("peer " + peer + " turned away: " + std::to_string(options_.max_unaccepted) +
                                " connections on " + address() + " are waiting for Accept");
      } else {
        ready_.push_back(
            std::make_unique<FramedConnection>(std::move(pending->channel), *info, options_.connection));
        cv_.notify_all();
      }
    }
    dropped = std::move(pending->channel);  // closed below unless it became a connection
    pending->done = true;
  }
  dropped.reset();
  if (!why.ok()) Reject(peer, why);
}

void HandshakingListener::Reject(const std::string& peer, const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
  }
  const char* event = why.code() == Code::kPermissionDenied ? "peer_rejected" : "peer_handshake_failed";
  Log(LogLevel::kWarn, event).Kv("listener", address()).Kv("peer", peer).Err(why);
  if (options_.on_handshake_failed) options_.on_handshake_failed(peer, why);
}

void HandshakingListener::Reap() {
  std::list<Pending> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      auto next = std::next(it);
      if (it->done) finished.splice(finished.end(), pending_, it);
      it = next;
    }
  }
  for (Pending& p : finished) {
    if (p.thread.joinable()) p.thread.join();
  }
}

}  // namespace tierckpt::peer
