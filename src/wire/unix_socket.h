// unix_socket.h — framed messages over a Unix stream socket, with fd passing
// and peer credentials.
//
// SendFrame writes the header and payload (and at most one fd as SCM_RIGHTS
// on the first byte). RecvFrame reads exactly one frame, decoding and
// checking the header before allocating the payload, so an oversized or
// malformed frame costs nothing and is answered with kProtocolError; a clean
// EOF before any byte is kUnavailable("peer closed"). Both retry EINTR.
//
// Thread safety: a socket may be used by one sender and one receiver at a
// time; callers serialise.
#pragma once

#include <sys/types.h>

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
// does). The parent directory must exist.
Result<UniqueFd> ListenUnix(const std::string& path);
// Connects; kUnavailable with the path and a hint ("is tierckptd running?
// start it with `tierckpt agent start`") when nobody listens.
Result<UniqueFd> ConnectUnix(const std::string& path);

// timeout_ms < 0 waits forever.
Status SendFrame(int sock, uint16_t type, uint32_t request_id, std::string_view payload,
                 int fd_to_pass = -1);
Result<Frame> RecvFrame(int sock, int timeout_ms = -1);

struct PeerCred {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};
Result<PeerCred> GetPeerCred(int sock);

}  // namespace tierckpt::wire
