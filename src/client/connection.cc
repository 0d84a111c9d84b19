#include "client/connection.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>

#include "os/files.h"
#include "wire/unix_socket.h"

namespace tierckpt::client {
namespace {

// How long to look for the agent's answer after it stopped reading a request.
constexpr int kRefusalReadMs = 2000;

// Milliseconds left of timeout_ms since start; -1 when timeout_ms < 0.
int Remaining(int timeout_ms, std::chrono::steady_clock::time_point start) {
  if (timeout_ms < 0) return -1;
  auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  return spent.count() >= timeout_ms ? 0 : timeout_ms - static_cast<int>(spent.count());
}

}  // namespace

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& socket_path, const ConnectOptions& options) {
  const uid_t me = ::geteuid();
  const uid_t expected = options.agent_uid < 0 ? me : static_cast<uid_t>(options.agent_uid);
  const std::string dir = DirName(socket_path);
  Status dir_ok = wire::CheckSocketDir(dir.empty() ? "." : dir, expected);
  if (dir_ok.code() == Code::kNotFound) {
    return Unavailable("cannot connect to tierckptd at " + socket_path + ": its directory does not exist; is "
                       "tierckptd running? start it with `tierckpt agent start`, or set TIERCKPT_SOCKET to the "
                       "socket of the agent you want");
  }
  if (!dir_ok.ok()) {
    return Status(dir_ok.code(), "refusing to talk to tierckptd at " + socket_path + ": " + dir_ok.message());
  }
  TC_ASSIGN_OR_RETURN(UniqueFd sock, wire::ConnectUnix(socket_path, options.timeout_ms));
  TC_ASSIGN_OR_RETURN(wire::PeerCred peer, wire::GetPeerCred(sock.get()));
  if (peer.uid != expected && peer.uid != 0) {
    return PermissionDenied(
        "refusing to talk to tierckptd at " + socket_path + ": the process listening there (pid " +
        std::to_string(peer.pid) + ") runs as uid " + std::to_string(peer.uid) + ", but this client (uid " +
        std::to_string(me) + ") trusts only an agent running as uid " + std::to_string(expected) +
        " or root; another user may be impersonating the agent. Start your own agent (`tierckpt agent start`) "
        "or point TIERCKPT_SOCKET at it");
  }
  return std::unique_ptr<Connection>(new Connection(socket_path, std::move(sock), peer.uid, peer.pid));
}

Status Connection::MarkBroken(Status why) {
  broken_ = why.ToString();
  sock_.Reset();
  return why;
}

Status Connection::AnswerAfterFailedSend(Status why, uint32_t id, std::string_view what) {
  Result<wire::Frame> frame = wire::RecvFrame(sock_.get(), kRefusalReadMs);
  if (frame.ok() && (frame->header.request_id == id || frame->header.request_id == 0)) {
    Status answer = wire::DecodeResponse(frame->payload).status();
    if (!answer.ok() && answer.code() != Code::kProtocolError) {
      return Status(answer.code(), "tierckptd at " + socket_path_ + " refused the " + std::string(what) + ": " +
                                       answer.message());
    }
    if (!answer.ok()) return Status(answer.code(), "the " + std::string(what) + " failed: " + answer.message());
  }
  return why;
}

Result<Connection::Reply> Connection::Call(wire::MsgType type, std::string_view payload, int timeout_ms) {
  const auto start = std::chrono::steady_clock::now();
  const auto type_number = static_cast<uint16_t>(type);
  const std::string request = std::string(wire::MsgTypeName(type_number)) + " request";
  const std::string what = request + " to tierckptd at " + socket_path_;
  MutexLock lock(&mu_);
  if (!broken_.empty()) {
    return Unavailable("the connection to tierckptd at " + socket_path_ + " is no longer usable (" +
                       broken_ + "); connect again, and check the agent with `tierckpt agent status`");
  }
  if (payload.size() > wire::MaxRequestPayload(type_number)) {
    return InvalidArgument("the " + what + " would carry " + std::to_string(payload.size()) +
                           " payload bytes; the agent takes at most " +
                           std::to_string(wire::MaxRequestPayload(type_number)) +
                           " for this request (docs/protocol.md): split it");
  }
  const uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  Status sent = wire::SendFrame(sock_.get(), type_number, id, payload, -1, timeout_ms);
  if (!sent.ok()) {
    if (sent.code() == Code::kTimeout) {
      return MarkBroken(Timeout("sending the " + what + " timed out after " + std::to_string(timeout_ms) +
                                " ms: " + sent.message() + "; the agent is stuck or overloaded (see its log)"));
    }
    return MarkBroken(AnswerAfterFailedSend(
        Unavailable("sending the " + what + " failed: " + sent.message() +
                    "; is the agent still running? (`tierckpt agent status`)"),
        id, request));
  }
  Result<wire::Frame> frame = wire::RecvFrame(sock_.get(), Remaining(timeout_ms, start));
  if (!frame.ok()) {
    const Status& s = frame.status();
    if (s.code() == Code::kProtocolError) {
      return MarkBroken(ProtocolError("the " + what + " got a malformed response: " + s.message()));
    }
    if (s.code() == Code::kTimeout) {
      return MarkBroken(Timeout("the " + what + " got no response within " + std::to_string(timeout_ms) +
                                " ms; the agent is stuck or overloaded (see its log and `tierckpt agent "
                                "status`), or the request needs a longer timeout"));
    }
    return MarkBroken(Unavailable("the " + what + " got no response (" + s.message() +
                                  "); the agent may have exited: see its log, or `tierckpt agent status`"));
  }
  if (frame->header.request_id == 0 && id != 0) {
    // The agent refused before reading the request (a limit): say why.
    Status answer = wire::DecodeResponse(frame->payload).status();
    if (!answer.ok()) {
      return MarkBroken(Status(answer.code(), "tierckptd at " + socket_path_ + " (before the " + request +
                                                  " was read): " + answer.message()));
    }
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
