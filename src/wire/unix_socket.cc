#include "wire/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

namespace tierckpt::wire {
namespace {

// Room for a few fds so that a peer sending more than one is detected (and
// every fd it sent is closed) instead of silently truncated.
constexpr size_t kMaxFdsPerRecv = 8;

// "Hello request", "Hello response": what a frame is, for messages.
std::string FrameName(uint16_t type) {
  uint16_t request_type = static_cast<uint16_t>(type & ~kResponseBit);
  return std::string(MsgTypeName(request_type)) +
         ((type & kResponseBit) != 0 ? " response" : " request");
}

Result<sockaddr_un> MakeAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return InvalidArgument("the Unix socket path is empty; pass a socket path");
  if (path.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("Unix socket path \"" + path + "\" is " + std::to_string(path.size()) +
                           " bytes; the limit is " + std::to_string(sizeof(addr.sun_path) - 1) +
                           " bytes, choose a shorter path (e.g. under /tmp or $XDG_RUNTIME_DIR)");
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

Result<UniqueFd> NewSocket(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("creating a Unix socket for " + path);
  return fd;
}

// connect(2) that survives EINTR: an interrupted connect keeps going in the
// kernel, so wait for it and read its outcome. Returns 0 or an errno value.
int ConnectRetrying(int fd, const sockaddr_un& addr) {
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return 0;
  int err = errno;
  if (err != EINTR && err != EINPROGRESS) return err;
  while (true) {
    pollfd p{fd, POLLOUT, 0};
    int n = ::poll(&p, 1, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) return errno;
    return so_error;
  }
}

// Milliseconds left until deadline; -1 means no deadline.
int RemainingMs(bool has_deadline, std::chrono::steady_clock::time_point deadline) {
  if (!has_deadline) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Reads exactly size bytes into buf, collecting any fds that arrive as
// SCM_RIGHTS into fds (owned at once, so none can leak). *got counts bytes
// read so far. A clean EOF returns ok with *got < size.
class FrameReader {
 public:
  FrameReader(int sock, int timeout_ms) : sock_(sock), has_deadline_(timeout_ms >= 0) {
    if (has_deadline_) {
      deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
  }

  Status Read(char* buf, size_t size, size_t* got, std::string_view what) {
    *got = 0;
    while (*got < size) {
      TC_RETURN_IF_ERROR(WaitReadable(what));
      iovec iov{buf + *got, size - *got};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRecv)];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t n = ::recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return ErrnoStatus("reading " + std::string(what) + " from the socket");
      }
      TakeFds(msg);
      if (msg.msg_flags & MSG_CTRUNC) {
        return ProtocolError("the peer sent more than " + std::to_string(kMaxFdsPerRecv) +
                             " file descriptors with one frame; at most one is allowed");
      }
      if (n == 0) return Status::Ok();  // EOF; the caller looks at *got
      *got += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  std::vector<UniqueFd>& fds() { return fds_; }

 private:
  Status WaitReadable(std::string_view what) {
    while (true) {
      int wait_ms = RemainingMs(has_deadline_, deadline_);
      pollfd p{sock_, POLLIN, 0};
      int n = ::poll(&p, 1, wait_ms);
      if (n > 0) return Status::Ok();
      if (n == 0) {
        return Timeout("no " + std::string(what) + " arrived on the socket within the timeout; " +
                       "the peer is stuck or gone");
      }
      if (errno != EINTR) return ErrnoStatus("waiting for " + std::string(what) + " on the socket");
    }
  }

  void TakeFds(msghdr& msg) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds_.emplace_back(fd);
      }
    }
  }

  int sock_;
  bool has_deadline_;
  std::chrono::steady_clock::time_point deadline_{};
  std::vector<UniqueFd> fds_;
};

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path) {
  TC_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(path));
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return AlreadyExists("socket path " + path +
                           " exists and is not a socket; remove it or choose another socket path");
    }
    TC_ASSIGN_OR_RETURN(UniqueFd probe, NewSocket(path));
    int err = ConnectRetrying(probe.get(), addr);
    if (err == 0) {
      return AlreadyExists("an agent already listens on " + path +
                           "; stop it with `tierckpt agent stop` or choose another socket path");
    }
    if (err != ECONNREFUSED) {
      return ErrnoStatus("probing the existing socket " + path, err);
    }
    // Nobody listens: a stale socket left by an agent that died.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return ErrnoStatus("removing the stale socket " + path);
    }
  } else if (errno != ENOENT) {
    return ErrnoStatus("checking the socket path " + path);
  }

  TC_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket(path));
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EADDRINUSE) {
      return AlreadyExists("an agent already listens on " + path +
                           " (it started concurrently); stop it or choose another socket path");
    }
    return ErrnoStatus("binding the Unix socket " + path +
                       " (does its directory exist and is it writable?)");
  }
  if (::chmod(path.c_str(), 0600) != 0) {
    Status s = ErrnoStatus("restricting the socket " + path + " to mode 0600");
    ::unlink(path.c_str());
    return s;
  }
  if (::listen(fd.get(), 128) != 0) {
    Status s = ErrnoStatus("listening on the Unix socket " + path);
    ::unlink(path.c_str());
    return s;
  }
  return fd;
}

Result<UniqueFd> ConnectUnix(const std::string& path) {
  TC_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(path));
  TC_ASSIGN_OR_RETURN(UniqueFd fd, NewSocket(path));
  int err = ConnectRetrying(fd.get(), addr);
  if (err == 0) return fd;
  if (err == ENOENT || err == ECONNREFUSED) {
    return Unavailable("cannot connect to tierckptd at " + path + ": " + std::strerror(err) +
                       "; is tierckptd running? start it with `tierckpt agent start`, or set "
                       "TIERCKPT_SOCKET to the socket of the agent you want");
  }
  if (err == EACCES || err == EPERM) {
    return PermissionDenied("cannot connect to tierckptd at " + path + ": " + std::strerror(err) +
                            "; the socket belongs to another user, run as that user or start "
                            "your own agent with `tierckpt agent start`");
  }
  return ErrnoStatus("connecting to tierckptd at " + path, err);
}

Status SendFrame(int sock, uint16_t type, uint32_t request_id, std::string_view payload,
                 int fd_to_pass) {
  if (payload.size() > kMaxPayload) {
    return InvalidArgument("cannot send a " + FrameName(type) + " frame of " +
                           std::to_string(payload.size()) + " payload bytes: the limit is " +
                           std::to_string(kMaxPayload) + " bytes");
  }
  FrameHeader h;
  h.type = type;
  h.request_id = request_id;
  h.payload_len = static_cast<uint32_t>(payload.size());
  uint8_t header[kFrameHeaderSize];
  EncodeHeader(h, header);

  iovec iov[2] = {{header, kFrameHeaderSize},
                  {const_cast<char*>(payload.data()), payload.size()}};
  size_t iov_start = 0;
  size_t left = kFrameHeaderSize + payload.size();
  bool fd_pending = fd_to_pass >= 0;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  while (left > 0) {
    msghdr msg{};
    msg.msg_iov = &iov[iov_start];
    msg.msg_iovlen = 2 - iov_start;
    if (fd_pending) {
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
    }
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        pollfd p{sock, POLLOUT, 0};
        if (::poll(&p, 1, -1) < 0 && errno != EINTR) return ErrnoStatus("waiting to send a frame");
        continue;
      }
      if (errno == EPIPE || errno == ECONNRESET) {
        return Unavailable("sending a " + FrameName(type) +
                           " frame: the peer closed the connection");
      }
      return ErrnoStatus("sending a " + FrameName(type) + " frame");
    }
    fd_pending = false;  // the fd rode on the first byte sent
    size_t sent = static_cast<size_t>(n);
    left -= sent;
    while (sent > 0) {
      size_t take = sent < iov[iov_start].iov_len ? sent : iov[iov_start].iov_len;
      iov[iov_start].iov_base = static_cast<char*>(iov[iov_start].iov_base) + take;
      iov[iov_start].iov_len -= take;
      sent -= take;
      if (iov[iov_start].iov_len == 0 && iov_start < 1) ++iov_start;
    }
  }
  return Status::Ok();
}

Result<Frame> RecvFrame(int sock, int timeout_ms) {
  FrameReader reader(sock, timeout_ms);
  uint8_t header[kFrameHeaderSize];
  size_t got = 0;
  TC_RETURN_IF_ERROR(reader.Read(reinterpret_cast<char*>(header), kFrameHeaderSize, &got,
                                 "frame header"));
  if (got == 0) return Unavailable("peer closed the connection");
  if (got < kFrameHeaderSize) {
    return ProtocolError("truncated frame: the peer closed the connection after " +
                         std::to_string(got) + " of " + std::to_string(kFrameHeaderSize) +
                         " header bytes");
  }
  Frame frame;
  TC_ASSIGN_OR_RETURN(frame.header, DecodeHeader(header));
  frame.payload.resize(frame.header.payload_len);
  TC_RETURN_IF_ERROR(reader.Read(frame.payload.data(), frame.payload.size(), &got,
                                 "frame payload"));
  if (got < frame.payload.size()) {
    return ProtocolError("truncated frame: the peer closed the connection after " +
                         std::to_string(got) + " of " + std::to_string(frame.payload.size()) +
                         " payload bytes of a " + FrameName(frame.header.type) + " frame");
  }
  std::vector<UniqueFd>& fds = reader.fds();
  if (fds.size() > 1) {
    return ProtocolError("the peer sent " + std::to_string(fds.size()) +
                         " file descriptors with one frame; at most one is allowed");
  }
  if (fds.size() == 1) frame.fd = std::move(fds[0]);
  return frame;
}

Result<PeerCred> GetPeerCred(int sock) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus("reading the peer credentials (SO_PEERCRED) of a socket");
  }
  PeerCred out;
  out.pid = cred.pid;
  out.uid = cred.uid;
  out.gid = cred.gid;
  return out;
}

}  // namespace tierckpt::wire
