// connection.h — one request/response channel to the agent over its socket.
//
// Open() trusts the socket only if its directory is private to the expected
// agent uid (wire::CheckSocketDir) and the process listening on it runs as
// that uid or as root (SO_PEERCRED); otherwise kPermissionDenied naming both
// uids. Connecting is bounded by a timeout (an agent whose accept queue is
// full is kTimeout, not a hang).
//
// Call() sends one request frame and reads its response under one mutex, so
// requests on a connection never interleave; both the send and the wait for
// the response are bounded by the call's timeout. Request ids increase from
// 1. The agent's refusal of a connection or a request (an error frame with
// request id 0, or an answer that arrives after the agent stopped reading a
// request it will not take) is returned as the agent's Status, with its code
// and message. A response with another id or type, a malformed frame or a
// transport error marks the connection broken: that call fails
// (kProtocolError, or kUnavailable/kTimeout for transport errors) and every
// later call fails with kUnavailable naming the socket, since the byte
// stream can no longer be trusted to be in step. An error *answer* from the
// agent (a well-formed response with a non-zero code) is returned as-is and
// leaves the connection usable.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "os/fd.h"
#include "tierckpt/status.h"
#include "wire/protocol.h"

namespace tierckpt::client {

struct ConnectOptions {
  // Connecting, including waiting for room in the agent's accept queue.
  // < 0 waits forever.
  int timeout_ms = 10'000;
  // The uid the agent must run as (root is always accepted); -1 = this
  // process's effective uid.
  int64_t agent_uid = -1;
};

class Connection {
 public:
  // Checks the socket's directory, connects, and checks the agent's uid;
  // kUnavailable with a hint when nobody listens there, kPermissionDenied
  // when the directory or the listener is not trusted, kTimeout when the
  // agent does not accept within the timeout.
  static Result<std::unique_ptr<Connection>> Open(const std::string& socket_path,
                                                  const ConnectOptions& options = {});

  struct Reply {
    std::string body;  // the response body after the status envelope
    UniqueFd fd;       // invalid unless the response carried an fd
  };
  // timeout_ms < 0 waits forever for the request to go out and its response.
  Result<Reply> Call(wire::MsgType type, std::string_view payload, int timeout_ms = -1);

  const std::string& socket_path() const { return socket_path_; }
  // The agent's uid and pid as the kernel reported them at connect.
  uid_t agent_uid() const { return agent_uid_; }
  pid_t agent_pid() const { return agent_pid_; }

 private:
  Connection(std::string socket_path, UniqueFd sock, uid_t agent_uid, pid_t agent_pid)
      : socket_path_(std::move(socket_path)), agent_uid_(agent_uid), agent_pid_(agent_pid), sock_(std::move(sock)) {}
  Status MarkBroken(Status why) REQUIRES(mu_);
  // After a failed send: the agent may have answered (refused) before it
  // closed; returns its error Status, or `why` when nothing usable came.
  Status AnswerAfterFailedSend(Status why, uint32_t id, std::string_view what) REQUIRES(mu_);

  // Const after construction.
  const std::string socket_path_;
  const uid_t agent_uid_;
  const pid_t agent_pid_;

  Mutex mu_;
  // Guarded by mu_.
  UniqueFd sock_ GUARDED_BY(mu_);
  uint32_t next_id_ GUARDED_BY(mu_) = 1;
  std::string broken_ GUARDED_BY(mu_);  // why the connection is unusable; "" while healthy
};

}  // namespace tierckpt::client
