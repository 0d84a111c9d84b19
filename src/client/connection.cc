#include "client/connection.h"

#include <string>
#include <utility>

#include "wire/unix_socket.h"

namespace tierckpt::client {

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& socket_path) {
  TC_ASSIGN_OR_RETURN(UniqueFd sock, wire::ConnectUnix(socket_path));
  return std::unique_ptr<Connection>(new Connection(socket_path, std::move(sock)));
}

Status Connection::MarkBroken(Status why) {
  broken_ = why.ToString();
  sock_.Reset();
  return why;
}

Result<Connection::Reply> Connection::Call(wire::MsgType type, std::string_view payload,
                                           int timeout_ms) {
  const auto type_number = static_cast<uint16_t>(type);
  const std::string what = std::string(wire::MsgTypeName(type_number)) + " request to tierckptd at " +
                           socket_path_;
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_.empty()) {
    return Unavailable("the connection to tierckptd at " + socket_path_ + " is no longer usable (" +
                       broken_ + "); connect again, and check the agent with `tierckpt agent status`");
  }
  const uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  Status sent = wire::SendFrame(sock_.get(), type_number, id, payload);
  if (!sent.ok()) {
    return MarkBroken(Unavailable("sending the " + what + " failed: " + sent.message() +
                                  "; is the agent still running? (`tierckpt agent status`)"));
  }
  Result<wire::Frame> frame = wire::RecvFrame(sock_.get(), timeout_ms);
  if (!frame.ok()) {
    const Status& s = frame.status();
    if (s.code() == Code::kProtocolError) {
      return MarkBroken(ProtocolError("the " + what + " got a malformed response: " + s.message()));
    }
    if (s.code() == Code::kTimeout) {
      return MarkBroken(Timeout("the " + what + " got no response within " + std::to_string(timeout_ms) +
                                " ms: " + s.message()));
    }
    return MarkBroken(Unavailable("the " + what + " got no response (" + s.message() +
                                  "); the agent may have exited: see its log, or `tierckpt agent status`"));
  }
  const uint16_t want_type = static_cast<uint16_t>(type_number | wire::kResponseBit);
  if (frame->header.type != want_type || frame->header.request_id != id) {
    return MarkBroken(ProtocolError(
        "the " + what + " (id " + std::to_string(id) + ") got a response of type " +
        std::to_string(frame->header.type) + " with id " + std::to_string(frame->header.request_id) +
        "; expected type " + std::to_string(want_type) + " with id " + std::to_string(id) +
        " (client and agent out of step; check both are the same version)"));
  }
  Result<std::string> body = wire::DecodeResponse(frame->payload);
  if (!body.ok()) {
    if (body.status().code() == Code::kProtocolError) {
      return MarkBroken(body.status().WithContext("the " + what + " got a malformed response"));
    }
    return body.status();  // the agent's answer
  }
  Reply reply;
  reply.body = std::move(body).value();
  reply.fd = std::move(frame->fd);
  return reply;
}

}  // namespace tierckpt::client
