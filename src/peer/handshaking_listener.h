// handshaking_listener.h — the Listener of every byte-stream transport: an
// acceptor thread takes raw channels from a ChannelAcceptor and runs each
// server handshake on its own thread, so a slow, silent or hostile peer
// never delays the others; authenticated connections queue for Accept().
//
// Bounds: at most options.max_pending_handshakes handshakes at once and
// options.max_unaccepted connections waiting for Accept(); a peer beyond
// either is closed at once and reported. Every turned-away peer is logged
// (event peer_rejected for kPermissionDenied, peer_handshake_failed
// otherwise, with the peer's address) and passed to
// options.on_handshake_failed. Failures caused by Close() are not reported.
//
// Thread safety: as Listener (transport.h). One mutex guards the handshake
// list and the queue; it is never held while a handshake runs or while the
// failure hook is called.
#pragma once

#include <condition_variable>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "peer/byte_channel.h"
#include "peer/transport.h"

namespace tierckpt::peer {

class HandshakingListener final : public Listener {
 public:
  // Starts the acceptor thread. Precondition: ValidateTransportOptions(options).ok().
  HandshakingListener(std::unique_ptr<ChannelAcceptor> acceptor, TransportOptions options);
  ~HandshakingListener() override;

  const std::string& address() const override { return acceptor_->address(); }
  Result<std::unique_ptr<Connection>> Accept(Millis timeout) override;
  void Close() override;

 private:
  struct Pending {
    std::unique_ptr<ByteChannel> channel;  // guarded by mu_ (moved out on success)
    std::thread thread;
    bool done = false;  // guarded by mu_
  };

  void AcceptLoop();
  void RunHandshake(Pending* pending);
  // Reports and logs a turned-away peer unless the listener is closing.
  void Reject(const std::string& peer, const Status& why);
  // Joins and removes finished handshakes.
  void Reap();

  // Const after construction.
  const std::unique_ptr<ChannelAcceptor> acceptor_;
  const TransportOptions options_;

  std::mutex close_mu_;  // serialises Close()
  std::thread acceptor_thread_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool closed_ = false;                            // guarded by mu_
  std::list<Pending> pending_;                     // guarded by mu_
  std::deque<std::unique_ptr<Connection>> ready_;  // guarded by mu_
};

}  // namespace tierckpt::peer
