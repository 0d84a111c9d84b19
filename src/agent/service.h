// service.h — the agent's local service: a Unix socket accept loop with one
// thread per connection, framing (wire/unix_socket.h) and peer checks.
//
// Each accepted connection must come from our own uid or root (SO_PEERCRED);
// others are logged and closed without a word. Above max_connections live
// connections a new one gets one kUnavailable response frame (request id 0)
// and is closed. A connection's thread reads one frame, asks the
// RequestHandler for a Reply, and sends it (with the Reply's fd as
// SCM_RIGHTS). A frame that cannot be read (bad magic/version, oversized
// payload_len — rejected from the header alone —, truncation) is answered
// with a kProtocolError frame (request id 0, best effort) and the connection
// is closed; a Reply with close_after closes it after sending. Other
// connections are unaffected.
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
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "os/fd.h"
#include "tierckpt/status.h"
#include "wire/unix_socket.h"

namespace tierckpt::agent {

struct ConnectionState {
  uint64_t id = 0;  // unique, >= 1
  wire::PeerCred peer;
  bool hello_done = false;
  std::string client;  // from Hello
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
  size_t max_connections = 1024;
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
  size_t connections() const;

 private:
  struct Conn {
    int fd = -1;  // owned by the connection thread; used here only for shutdown(2)
    std::thread thread;
  };
  void Accept();
  void Serve(uint64_t id, UniqueFd fd, wire::PeerCred peer);
  void ReapFinished();

  // Const after construction.
  const ServiceOptions options_;
  RequestHandler* const handler_;

  UniqueFd listen_fd_;  // Listen/Run thread only
  UniqueFd wake_fd_;    // eventfd written by Stop()
  std::atomic<bool> stopping_{false};
  uint64_t next_id_ = 1;  // Run thread only

  mutable std::mutex mu_;
  std::map<uint64_t, Conn> conns_;    // guarded by mu_
  std::vector<uint64_t> finished_;    // guarded by mu_
};

}  // namespace tierckpt::agent
