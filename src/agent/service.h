// service.h — the agent's local service: a Unix socket accept loop with one
// thread per connection, framing (wire/unix_socket.h) and peer checks.
//
// Each accepted connection must come from our own uid or root (SO_PEERCRED);
// others are logged and closed without a word. A connection's thread reads
// one frame, asks the RequestHandler for a Reply, and sends it (with the
// Reply's fd as SCM_RIGHTS). Other connections are unaffected by anything a
// connection does. What one client can hold is bounded (ServiceOptions):
//
//   - live connections: above max_connections (lowered to half the process's
//     RLIMIT_NOFILE) a new one gets one kResourceExhausted response frame
//     (request id 0) saying so and is closed; out of fds (EMFILE), the same
//     with the fd limit, through a reserved fd;
//   - connections that have not sent a complete first frame: at most
//     max_pending_hello, and at most half the connection limit (a real client
//     sends Hello at once); a new one beyond
//     that closes the oldest, and each must send Hello within
//     hello_timeout_ms; after Hello a connection may idle as long as it likes;
//   - a frame must arrive whole within frame_timeout_ms of its first byte;
//   - a request's payload may not exceed wire::MaxRequestPayload(type), and
//     all connections together may not be receiving more than
//     max_buffered_request_bytes of payload: both are checked from the header
//     before a byte of payload is read, and answered with an error frame
//     carrying the request's id and type (kInvalidArgument / kResourceExhausted)
//     before the connection closes; payload buffers grow only with bytes that
//     really arrived, and are returned to the system (malloc_trim) when a
//     large one is freed;
//   - a response must be taken by the client within send_timeout_ms.
//
// A frame that cannot be read (bad magic/version, over a limit, truncation,
// timeout mid-frame) is answered with an error frame (request id 0 unless
// the header was read, best effort) and the connection is closed, and the
// reason is logged; a Reply with close_after closes it after sending.
//
// Run() serves until Stop() (any thread) or until extra_stop_fd becomes
// readable (the agent passes a signalfd). On the way out it calls
// on_stopping (so the agent can wake blocked requests), shuts every
// connection down, joins the threads and unlinks the socket.
//
// Thread safety: Listen/Run from one thread; Stop and connections() from any.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "os/fd.h"
#include "tierckpt/status.h"
#include "wire/unix_socket.h"

namespace tierckpt::agent {

struct ConnectionState {
  uint64_t id = 0;  // unique, >= 1
  wire::PeerCred peer;
  bool hello_done = false;
  std::string client;  // from Hello
  std::string writer;  // from Hello: the writer id of the steps it writes ("" = anonymous)
  // (namespace, step) of every step it created objects in with
  // CreateNextObject, until a BeginSave of another step of that namespace
  // looks at it (agent/handlers.h).
  std::set<std::pair<std::string, uint64_t>> created_in;
};

struct Reply {
  Status status;
  std::string body;
  UniqueFd fd;               // passed with the response when valid
  bool close_after = false;  // close the connection after sending
  bool stop_after = false;   // stop the whole service after sending (Shutdown)
};

class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  virtual Reply Handle(ConnectionState& conn, const wire::Frame& frame) = 0;
  // The connection is gone (after its last Handle).
  virtual void OnClose(ConnectionState& conn) = 0;
};

struct ServiceOptions {
  std::string socket_path;
  // Live connections at most (further lowered to half of RLIMIT_NOFILE).
  size_t max_connections = 1024;
  // Connections still waiting for their first complete frame at most (and
  // at most half of the connection limit); a new one beyond this closes the
  // oldest of them.
  size_t max_pending_hello = 64;
  // A new connection must send Hello within this; a started frame must be
  // complete within frame_timeout_ms; a response must leave within
  // send_timeout_ms. Milliseconds, > 0.
  int hello_timeout_ms = 10'000;
  int frame_timeout_ms = 30'000;
  int send_timeout_ms = 30'000;
  // Request payload bytes being received, all connections together.
  uint64_t max_buffered_request_bytes = 256ull << 20;
  // listen(2) backlog: connections the kernel queues before accept.
  int listen_backlog = 512;
};

class Service {
 public:
  Service(ServiceOptions options, RequestHandler* handler);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Creates the listening socket (mode 0600; its directory must exist).
  Status Listen();
  void Run(int extra_stop_fd = -1, const std::function<void()>& on_stopping = {});
  void Stop();
  // Live connections (not counting those already closing).
  size_t connections() const;

 private:
  struct Conn {
    int fd = -1;  // owned by the connection thread; used here only for shutdown(2)
    std::thread thread;
    bool pending = true;   // no complete frame received yet
    bool evicted = false;  // closed to make room for a newer pending connection
  };
  void Accept();
  // Answers a connection we will not serve with one error frame (id 0) and
  // closes it.
  void Refuse(UniqueFd fd, const wire::PeerCred& peer, const Status& why);
  // Accept() at EMFILE: frees the reserved fd to accept and refuse one.
  void RefuseForFdLimit(int accept_errno);
  // Closes the oldest pending connection when a new one would exceed
  // max_pending_hello.
  void EvictOldestPendingLocked() REQUIRES(mu_);
  void Serve(uint64_t id, UniqueFd fd, wire::PeerCred peer);
  // Reads the next frame under the limits; admitted is set to the payload
  // bytes reserved from buffered_ (release them after the frame is freed).
  Result<wire::Frame> ReadFrame(int fd, const ConnectionState& conn, uint64_t* admitted,
                                wire::FrameHeader* header);
  void ReapFinished();

  // Const after construction (effective_max_connections_ after Listen).
  const ServiceOptions options_;
  RequestHandler* const handler_;
  size_t effective_max_connections_ = 0;
  size_t max_pending_ = 1;  // max_pending_hello, at most half of effective_max_connections_
  size_t fd_limit_ = 0;

  UniqueFd reserve_fd_;  // Run thread only: released to accept at EMFILE
  std::atomic<uint64_t> buffered_{0};  // request payload bytes admitted and not yet freed

  UniqueFd listen_fd_;  // Listen/Run thread only
  UniqueFd wake_fd_;    // eventfd written by Stop()
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;  // Run thread only

  mutable Mutex mu_;
  std::map<uint64_t, Conn> conns_ GUARDED_BY(mu_);
  std::vector<uint64_t> finished_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;  // conns_ with pending && !evicted
  size_t closing_ GUARDED_BY(mu_) = 0;  // conns_ evicted or finished, not yet reaped
};

}  // namespace tierckpt::agent
