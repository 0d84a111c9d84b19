#include "peer/handshaking_listener.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "common/log.h"
#include "peer/framed_connection.h"
#include "peer/handshake.h"
#include "peer/tcp_socket.h"

namespace tierckpt::peer {
namespace {
// Pause after a failed accept (e.g. out of fds) so the loop does not spin.
constexpr Millis kAcceptRetryPause{100};
}  // namespace

HandshakingListener::HandshakingListener(std::unique_ptr<ChannelAcceptor> acceptor, TransportOptions options)
    : acceptor_(std::move(acceptor)), options_(std::move(options)) {
  acceptor_thread_ = std::thread([this] { AcceptLoop(); });
  watch_thread_ = std::thread([this] { WatchLoop(); });
}

HandshakingListener::~HandshakingListener() { Close(); }

Result<std::unique_ptr<Connection>> HandshakingListener::Accept(Millis timeout) {
  MutexLock lock(&mu_);
  const auto deadline = DeadlineAfter(timeout);
  while (!closed_ && ready_.empty() && cv_.WaitUntil(deadline)) {
  }
  const bool ready = closed_ || !ready_.empty();
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
  MutexLock close_lock(&close_mu_);
  std::deque<std::unique_ptr<Connection>> unaccepted;
  {
    MutexLock lock(&mu_);
    closed_ = true;
    for (Pending& p : pending_) {
      if (p.channel) p.channel->Shutdown();
    }
    unaccepted.swap(ready_);
    cv_.SignalAll();
    watch_cv_.SignalAll();
  }
  acceptor_->Shutdown();
  if (acceptor_thread_.joinable()) acceptor_thread_.join();
  if (watch_thread_.joinable()) watch_thread_.join();
  std::list<Pending> all;
  {
    MutexLock lock(&mu_);
    all.splice(all.end(), pending_);
  }
  for (Pending& p : all) {
    if (p.thread.joinable()) p.thread.join();
  }
  uint64_t suppressed = 0;
  {
    MutexLock lock(&mu_);
    suppressed = reject_log_.TakeSuppressed();
  }
  LogSuppressed(suppressed);
}

void HandshakingListener::AcceptLoop() {
  while (true) {
    Result<std::unique_ptr<ByteChannel>> accepted = acceptor_->Accept();
    if (!accepted.ok()) {
      if (accepted.status().code() == Code::kAborted) return;
      MutexLock lock(&mu_);
      if (closed_) return;
      Log(LogLevel::kWarn, "peer_accept_failed").Kv("listener", address()).Err(accepted.status());
      const auto retry = Clock::now() + kAcceptRetryPause;
      while (!closed_ && cv_.WaitUntil(retry)) {
      }
      if (closed_) return;
      continue;
    }
    std::unique_ptr<ByteChannel> channel = std::move(*accepted);
    std::string peer = channel->peer_address();
    std::string source = PeerSource(peer);
    MutexLock lock(&mu_);
    if (closed_) return;
    MakeRoomLocked(source);
    pending_.emplace_back();
    Pending* p = &pending_.back();
    p->channel = std::move(channel);
    p->peer = std::move(peer);
    p->source = std::move(source);
    p->deadline = DeadlineAfter(options_.handshake_timeout);
    ++live_;
    ++live_by_source_[p->source];
    p->thread = std::thread([this, p] { RunHandshake(p); });
    watch_cv_.SignalAll();
  }
}

void HandshakingListener::MakeRoomLocked(const std::string& source) {
  auto live = [](const Pending& p) { return !p.done && !p.dropped.has_value(); };
  auto from_source = live_by_source_.find(source);
  if (from_source != live_by_source_.end() && from_source->second >= options_.max_pending_handshakes_per_source) {
    auto oldest = std::find_if(pending_.begin(), pending_.end(),
                               [&](const Pending& p) { return live(p) && p.source == source; });
    if (oldest == pending_.end()) return;  // not reached: the count says there is one
    DropLocked(*oldest,
               ResourceExhausted("peer " + oldest->peer + " dropped before it completed the handshake: " +
                                 std::to_string(from_source->second) + " handshakes from " + source +
                                 " were pending on " + address() +
                                 " (max_pending_handshakes_per_source) when a newer one came; an agent "
                                 "completes its handshake in milliseconds, so that host is holding "
                                 "unauthenticated connections to the peer port"));
    return;
  }
  if (live_ < options_.max_pending_handshakes) return;
  auto oldest = std::find_if(pending_.begin(), pending_.end(), live);
  if (oldest == pending_.end()) return;  // not reached: live_ > 0
  DropLocked(*oldest, ResourceExhausted("peer " + oldest->peer + " dropped before it completed the handshake: " +
                                        std::to_string(live_) + " handshakes were pending on " + address() +
                                        " (max_pending_handshakes) when a newer one came; an agent completes "
                                        "its handshake in milliseconds, so hosts are holding unauthenticated "
                                        "connections to the peer port"));
}

void HandshakingListener::DropLocked(Pending& p, Status why) {
  p.dropped = std::move(why);
  --live_;
  auto it = live_by_source_.find(p.source);
  if (it != live_by_source_.end() && --it->second == 0) live_by_source_.erase(it);
  if (p.channel) p.channel->Shutdown();
}

void HandshakingListener::RunHandshake(Pending* pending) {
  ByteChannel* ch = nullptr;
  {
    MutexLock lock(&mu_);
    ch = pending->channel.get();
  }
  const std::string peer = pending->peer;
  bool reported = false;
  HandshakeParams params;
  params.node_id = options_.node_id;
  params.secret = &options_.secret;
  params.timeout = options_.handshake_timeout;
  // Logged before the peer is told: whoever sees the refusal finds it in the
  // log already.
  params.on_refuse = [&](const Status& why) {
    Reject(peer, why);
    reported = true;
  };
  Result<PeerInfo> info = ServerHandshake(*ch, params);
  Status why = info.ok() ? Status::Ok() : info.status();
  std::unique_ptr<ByteChannel> dropped;
  {
    MutexLock lock(&mu_);
    if (pending->dropped.has_value()) {
      if (!reported) why = *pending->dropped;  // the listener cut it off; its own error is a consequence
    } else {
      --live_;
      auto it = live_by_source_.find(pending->source);
      if (it != live_by_source_.end() && --it->second == 0) live_by_source_.erase(it);
      if (why.ok() && !closed_) {
        if (ready_.size() >= options_.max_unaccepted) {
          why = ResourceExhausted("peer " + peer + " turned away: " + std::to_string(options_.max_unaccepted) +
                                  " authenticated connections on " + address() + " are waiting for Accept");
        } else {
          ready_.push_back(
              std::make_unique<FramedConnection>(std::move(pending->channel), *info, options_.connection));
          cv_.SignalAll();
        }
      }
    }
    dropped = std::move(pending->channel);  // closed below unless it became a connection
    pending->done = true;
    watch_cv_.SignalAll();
  }
  dropped.reset();
  if (!why.ok() && !reported) Reject(peer, why);
}

void HandshakingListener::WatchLoop() {
  MutexLock lock(&mu_);
  while (!closed_) {
    const Clock::time_point now = Clock::now();
    std::list<Pending> finished;
    std::optional<Clock::time_point> next = SweepLocked(now, &finished);
    uint64_t suppressed = 0;
    if (reject_log_.suppressed() > 0) {
      if (now >= reject_log_.window_end()) {
        suppressed = reject_log_.TakeSuppressed();
      } else if (!next || reject_log_.window_end() < *next) {
        next = reject_log_.window_end();
      }
    }
    if (!finished.empty() || suppressed > 0) {
      lock.Unlock();
      for (Pending& p : finished) {
        if (p.thread.joinable()) p.thread.join();
      }
      LogSuppressed(suppressed);
      lock.Lock();
      continue;
    }
    if (next) {
      watch_cv_.WaitUntil(*next);
    } else {
      watch_cv_.Wait();
    }
  }
}

std::optional<HandshakingListener::Clock::time_point> HandshakingListener::SweepLocked(
    Clock::time_point now, std::list<Pending>* finished) {
  std::optional<Clock::time_point> next;
  for (auto it = pending_.begin(); it != pending_.end();) {
    auto following = std::next(it);
    if (it->done) {
      finished->splice(finished->end(), pending_, it);
    } else if (!it->dropped.has_value()) {
      if (it->deadline <= now) {
        DropLocked(*it, Timeout("peer " + it->peer + " did not complete the handshake within " +
                                std::to_string(options_.handshake_timeout.count()) + " ms of connecting to " +
                                address() + "; dropped. An agent of the cluster completes it in milliseconds: "
                                            "a stranger is holding the peer port, or the peer is badly "
                                            "overloaded"));
      } else if (!next || it->deadline < *next) {
        next = it->deadline;
      }
    }
    it = following;
  }
  return next;
}

void HandshakingListener::Reject(const std::string& peer, const Status& why) {
  bool log = false;
  {
    MutexLock lock(&mu_);
    if (closed_) return;
    log = reject_log_.Admit(Clock::now());
    if (!log) watch_cv_.SignalAll();  // the watchdog reports the count when the window ends
  }
  if (log) {
    const char* event = why.code() == Code::kPermissionDenied ? "peer_rejected" : "peer_handshake_failed";
    Log(LogLevel::kWarn, event).Kv("listener", address()).Kv("peer", peer).Err(why);
  }
  if (options_.on_handshake_failed) options_.on_handshake_failed(peer, why);
}

void HandshakingListener::LogSuppressed(uint64_t n) const {
  if (n == 0) return;
  Log(LogLevel::kWarn, "peer_rejections_suppressed")
      .Kv("listener", address())
      .Kv("count", n)
      .Kv("burst", static_cast<uint64_t>(kRejectLogBurst))
      .Kv("window_s", static_cast<int64_t>(kRejectLogWindow.count()));
}

}  // namespace tierckpt::peer
