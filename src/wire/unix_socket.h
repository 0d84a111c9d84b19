// unix_socket.h — framed messages over a Unix stream socket, with fd passing,
// peer credentials, and the checks that make a socket path trustworthy.
//
// SendFrame writes the header and payload (and at most one fd as SCM_RIGHTS
// on the first byte). RecvFrame reads exactly one frame, decoding and
// checking the header before any payload byte is read, so an oversized or
// malformed frame costs nothing and is answered with kProtocolError (or what
// RecvLimits::admit returns); the payload buffer then grows with the bytes
// that really arrive (never with what the header announces). A clean EOF
// before any byte is kUnavailable("peer closed"). Every wait is bounded by a
// timeout the caller gives (kTimeout when it passes; < 0 waits forever); all
// calls retry EINTR.
//
// Thread safety: a socket may be used by one sender and one receiver at a
// time; callers serialise. The free functions keep no state.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <string_view>

#include "os/fd.h"
#include "tierckpt/status.h"
#include "wire/protocol.h"

namespace tierckpt::wire {

struct Frame {
  FrameHeader header;
  std::string payload;
  UniqueFd fd;  // invalid unless an fd came with the frame
};

// Creates the listening socket at path with mode 0600 (removing a stale
// socket file first if nothing listens on it; kAlreadyExists if an agent
// does). The parent directory must exist; the caller checks it is private
// (CheckSocketDir). backlog is listen(2)'s accept-queue length.
Result<UniqueFd> ListenUnix(const std::string& path, int backlog = 128);
// Connects within timeout_ms (< 0: no limit). kUnavailable with the path and
// a hint ("is tierckptd running? start it with `tierckpt agent start`") when
// nobody listens; kFailedPrecondition ("... at <path>: it is a regular file,
// not a socket") when the path holds something other than a socket, which no
// agent start would cure; kTimeout when the listener's accept queue stays full for
// the whole timeout (an overloaded or stuck agent), naming the path.
Result<UniqueFd> ConnectUnix(const std::string& path, int timeout_ms = -1);

// Sends one frame. timeout_ms < 0 waits forever for the peer to make room;
// otherwise kTimeout once the whole frame has not gone out within it. A peer
// that closed is kUnavailable.
Status SendFrame(int sock, uint16_t type, uint32_t request_id, std::string_view payload,
                 int fd_to_pass = -1, int timeout_ms = -1);

// Limits on one received frame (the agent's defence against idle, slow and
// oversized requests).
struct RecvLimits {
  // How long to wait for the frame's first byte; < 0 forever.
  int idle_timeout_ms = -1;
  // How long the rest may take once the first byte arrived; < 0 forever.
  int frame_timeout_ms = -1;
  // Called with the decoded header before any payload byte is read or
  // allocated. A non-ok Status rejects the frame: RecvFrame returns it
  // unchanged and leaves the payload unread (the caller must close).
  std::function<Status(const FrameHeader&)> admit;
};
Result<Frame> RecvFrame(int sock, const RecvLimits& limits);
// One deadline for the whole frame: timeout_ms after the call (< 0 forever).
Result<Frame> RecvFrame(int sock, int timeout_ms = -1);

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
Result<PeerCred> GetPeerCred(int sock);

// Checks that the directory holding a socket can be trusted by a process
// expecting the socket to belong to trusted_uid: dir is a real directory (not
// a symlink) owned by trusted_uid or root and writable by neither group nor
// others, and every ancestor is owned by trusted_uid or root and, when group
// or others may write it, sticky (like /tmp), so nobody else can replace the
// path. kPermissionDenied naming the directory, its owner and mode, both
// uids and the fix otherwise; kNotFound if dir is missing.
Status CheckSocketDir(const std::string& dir, uid_t trusted_uid);

}  // namespace tierckpt::wire
