// connection.h — one request/response channel to the agent over its socket.
//
// Call() sends one request frame and reads its response under one mutex, so
// requests on a connection never interleave. Request ids increase from 1. A
// response with another id or type, a malformed frame or a transport error
// marks the connection broken: that call fails (kProtocolError, or
// kUnavailable/kTimeout for transport errors) and every later call fails with
// kUnavailable naming the socket, since the byte stream can no longer be
// trusted to be in step. An error *answer* from the agent (a well-formed
// response with a non-zero code) is returned as-is and leaves the connection
// usable.
//
// Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"
#include "wire/protocol.h"

namespace tierckpt::client {

class Connection {
 public:
  // Connects to the agent's socket; kUnavailable with a hint when nobody
  // listens there.
  static Result<std::unique_ptr<Connection>> Open(const std::string& socket_path);

  struct Reply {
    std::string body;  // the response body after the status envelope
    UniqueFd fd;       // invalid unless the response carried an fd
  };
  // timeout_ms < 0 waits forever for the response.
  Result<Reply> Call(wire::MsgType type, std::string_view payload, int timeout_ms = -1);

  const std::string& socket_path() const { return socket_path_; }

 private:
  Connection(std::string socket_path, UniqueFd sock)
      : socket_path_(std::move(socket_path)), sock_(std::move(sock)) {}
  Status MarkBroken(Status why);

  // Const after construction.
  const std::string socket_path_;

  std::mutex mu_;
  // Guarded by mu_.
  UniqueFd sock_;
  uint32_t next_id_ = 1;
  std::string broken_;  // why the connection is unusable; "" while healthy
};

}  // namespace tierckpt::client
