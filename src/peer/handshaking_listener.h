// handshaking_listener.h — the Listener of every byte-stream transport: an
// acceptor thread takes raw channels from a ChannelAcceptor and runs each
// server handshake on its own thread, so a slow, silent or hostile peer
// never delays the others; authenticated connections queue for Accept().
//
// Strangers (docs/peer-protocol.md, "Strangers on the peer port"). Until it
// has proved the cluster secret, a connection is a pending handshake, and
// pending handshakes are bounded three ways (TransportOptions):
//   - a hard deadline, handshake_timeout from the accept: a watchdog thread
//     shuts the channel down then, however the peer trickles its bytes;
//   - max_pending_handshakes_per_source (tcp_socket.h PeerSource): a
//     newcomer from a source at its limit drops that source's oldest pending
//     handshake;
//   - max_pending_handshakes in total: a newcomer beyond it drops the oldest
//     pending handshake.
// A newcomer is always let in and the oldest one dropped, never the other
// way round: a stranger's connection is old by the time an agent connects
// (an agent's handshake takes milliseconds), so idle strangers cannot lock
// agents out, and one source can only ever displace itself. Authenticated
// connections leave the pending set and count against none of these; at most
// options.max_unaccepted of them wait for Accept() (more are closed).
//
// Every turned-away peer is passed to options.on_handshake_failed and
// logged (event peer_rejected for kPermissionDenied, peer_handshake_failed
// otherwise, with the peer's address and the reason; a peer the handshake
// refuses is logged before its Reject leaves) within a budget of
// kRejectLogBurst lines per kRejectLogWindow; beyond it one line,
// event peer_rejections_suppressed, counts the rest when the window ends
// (or at Close). Failures caused by Close() are not reported.
//
// Thread safety: as Listener (transport.h). One mutex guards the pending
// set, the queue and the log budget; it is never held while a handshake
// runs, while a thread is joined, or while the failure hook is called.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "peer/byte_channel.h"
#include "peer/event_budget.h"
#include "peer/transport.h"

namespace tierckpt::peer {

// Rejections logged per window; the rest are counted in one summary line.
inline constexpr size_t kRejectLogBurst = 10;
inline constexpr std::chrono::seconds kRejectLogWindow{10};

class HandshakingListener final : public Listener {
 public:
  // Starts the acceptor and watchdog threads. Precondition:
  // ValidateTransportOptions(options).ok().
  HandshakingListener(std::unique_ptr<ChannelAcceptor> acceptor, TransportOptions options);
  ~HandshakingListener() override;

  const std::string& address() const override { return acceptor_->address(); }
  Result<std::unique_ptr<Connection>> Accept(Millis timeout) override;
  void Close() override;

 private:
  using Clock = std::chrono::steady_clock;

  struct Pending {
    std::unique_ptr<ByteChannel> channel;  // guarded by mu_ (moved out when done)
    std::string peer;                      // const after admission
    std::string source;                    // const after admission: PeerSource(peer)
    Clock::time_point deadline;            // const after admission
    std::thread thread;
    // Why the listener cut the handshake off (deadline, displaced by a newer
    // one); set at most once, with the channel shut down.
    std::optional<Status> dropped;  // guarded by mu_
    bool done = false;              // guarded by mu_
  };

  void AcceptLoop();
  void WatchLoop();
  void RunHandshake(Pending* pending);
  // Makes room for a newcomer from `source`: drops that source's oldest
  // pending handshake when it is at its limit, else the oldest of all when
  // the total is at its limit.
  void MakeRoomLocked(const std::string& source) REQUIRES(mu_);
  // Counts p out of the live handshakes, records why and shuts its channel
  // down (its thread then ends and reports `why`).
  void DropLocked(Pending& p, Status why) REQUIRES(mu_);
  // Drops handshakes past their deadline and moves finished ones to
  // *finished (to be joined outside the lock). Returns the next deadline.
  std::optional<Clock::time_point> SweepLocked(Clock::time_point now, std::list<Pending>* finished)
      REQUIRES(mu_);
  // Logs (within the budget) and reports a turned-away peer unless the
  // listener is closing.
  void Reject(const std::string& peer, const Status& why);
  // Logs n rejections the budget suppressed (nothing when n is 0).
  void LogSuppressed(uint64_t n) const;

  // Const after construction.
  const std::unique_ptr<ChannelAcceptor> acceptor_;
  const TransportOptions options_;

  Mutex close_mu_;  // serialises Close()
  std::thread acceptor_thread_;
  std::thread watch_thread_;

  Mutex mu_;
  CondVar cv_{&mu_};        // Accept() waiters: ready_ or closed_
  CondVar watch_cv_{&mu_};  // the watchdog: a new or finished handshake, closed_
  bool closed_ GUARDED_BY(mu_) = false;
  std::list<Pending> pending_ GUARDED_BY(mu_);                    // in admission order (oldest first)
  size_t live_ GUARDED_BY(mu_) = 0;                               // pending, neither done nor dropped
  std::map<std::string, size_t> live_by_source_ GUARDED_BY(mu_);  // live_ per source (no zero entries)
  std::deque<std::unique_ptr<Connection>> ready_ GUARDED_BY(mu_);
  EventBudget reject_log_ GUARDED_BY(mu_){kRejectLogBurst, kRejectLogWindow};
};

}  // namespace tierckpt::peer
