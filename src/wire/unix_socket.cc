#include "wire/unix_socket.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

#include "os/files.h"
#include "os/fs_stat.h"

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

using Clock = std::chrono::steady_clock;

// An absolute deadline, or none.
class Deadline {
 public:
  static Deadline After(int timeout_ms) {
    Deadline d;
    if (timeout_ms >= 0) {
      d.set_ = true;
      d.at_ = Clock::now() + std::chrono::milliseconds(timeout_ms);
    }
    return d;
  }
  bool set() const { return set_; }
  // Milliseconds left for poll(2): -1 without a deadline, 0 once it passed.
  int RemainingMs() const {
    if (!set_) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now());
    if (left.count() <= 0) return 0;
    return left.count() > std::numeric_limits<int>::max() ? std::numeric_limits<int>::max()
                                                          : static_cast<int>(left.count());
  }

 private:
  bool set_ = false;
  Clock::time_point at_{};
};

// Waits until fd is ready for events or the deadline passes. Ok when ready
// (or in error: the next syscall says which), kTimeout naming `what` when
// the deadline passed.
Status WaitFor(int fd, short events, const Deadline& deadline, std::string_view what) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, deadline.RemainingMs());
    if (n > 0) return Status::Ok();
    if (n == 0) return Timeout(std::string(what));
    if (errno != EINTR) return ErrnoStatus("waiting on the socket for " + std::string(what));
  }
}

// One connect(2) attempt loop on a non-blocking socket until the deadline.
// Returns 0 or an errno value; ETIMEDOUT when the listener's accept queue
// stayed full (EAGAIN) until the deadline.
int ConnectUntil(int fd, const sockaddr_un& addr, const Deadline& deadline) {
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) return 0;
    int err = errno;
    if (err == EINTR) continue;
    if (err == EAGAIN) {  // AF_UNIX: the listener's accept queue is full
      int left = deadline.RemainingMs();
      if (left == 0) return ETIMEDOUT;
      auto nap = left < 0 ? backoff : std::min(backoff, std::chrono::milliseconds(left));
      std::this_thread::sleep_for(nap);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
      continue;
    }
    if (err != EINPROGRESS) return err;
    Status ready = WaitFor(fd, POLLOUT, deadline, "connect");
    if (!ready.ok()) return ready.code() == Code::kTimeout ? ETIMEDOUT : EIO;
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) return errno;
    return so_error;
  }
}

// A connected (or failed) non-blocking socket to path; *err is 0 or errno.
Result<UniqueFd> ConnectSocket(const std::string& path, const sockaddr_un& addr, const Deadline& deadline,
                               int* err) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus("creating a Unix socket for " + path);
  *err = ConnectUntil(fd.get(), addr, deadline);
  return fd;
}

// Reads exactly size bytes into buf, collecting any fds that arrive as
// SCM_RIGHTS into fds (owned at once, so none can leak). *got counts bytes
// read so far. A clean EOF returns ok with *got < size. Waits until the
// first byte of the frame are bounded by first_deadline; once a byte has
// arrived, by the frame deadline (frame_timeout_ms after that byte, or
// first_deadline when frame_timeout_ms is kKeepDeadline).
class FrameReader {
 public:
  static constexpr int kKeepDeadline = -2;

  FrameReader(int sock, Deadline first_deadline, int frame_timeout_ms)
      : sock_(sock), deadline_(first_deadline), frame_timeout_ms_(frame_timeout_ms) {}

  Status Read(char* buf, size_t size, size_t* got) {
    *got = 0;
    while (*got < size) {
      TC_RETURN_IF_ERROR(WaitFor(sock_, POLLIN, deadline_, "frame"));
      iovec iov{buf + *got, size - *got};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRecv)];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      ssize_t n = ::recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
        return ErrnoStatus("reading a frame from the socket");
      }
      TakeFds(msg);
      if (msg.msg_flags & MSG_CTRUNC) {
        return ProtocolError("the peer sent more than " + std::to_string(kMaxFdsPerRecv) +
                             " file descriptors with one frame; at most one is allowed");
      }
      if (n == 0) return Status::Ok();  // EOF; the caller looks at *got
      if (total_ == 0 && frame_timeout_ms_ != kKeepDeadline) deadline_ = Deadline::After(frame_timeout_ms_);
      *got += static_cast<size_t>(n);
      total_ += static_cast<size_t>(n);
    }
    return Status::Ok();
  }

  std::vector<UniqueFd>& fds() { return fds_; }
  size_t total() const { return total_; }

 private:
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
  Deadline deadline_;
  int frame_timeout_ms_;
  size_t total_ = 0;
  std::vector<UniqueFd> fds_;
};

// Explains a kTimeout from FrameReader: nothing yet, or a partial frame.
Status RecvTimeout(const FrameReader& reader, size_t expected, const RecvLimits& limits) {
  if (reader.total() == 0) {
    return Timeout("no frame arrived on the socket within " + std::to_string(limits.idle_timeout_ms) +
                   " ms; the peer is idle, stuck or gone");
  }
  return Timeout("only " + std::to_string(reader.total()) + " of " +
                 (expected == 0 ? std::string("the header's ") + std::to_string(kFrameHeaderSize)
                                : std::to_string(expected)) +
                 " bytes of a frame arrived within " +
                 std::to_string(limits.frame_timeout_ms >= 0 ? limits.frame_timeout_ms : limits.idle_timeout_ms) +
                 " ms; the peer is too slow or stuck mid-frame");
}

// The one message for a socket path that holds something other than a
// socket (a regular file, a directory, a FIFO): `doing` says what failed on
// which path ("cannot connect to tierckptd at <path>"), `advice` what to do.
Status NotASocket(Code code, const std::string& doing, const FileStat& st, std::string_view advice) {
  const std::string kind(EntryTypeName(st.type));
  return Status(code, doing + ": it is a " + kind + ", not a socket; " + std::string(advice));
}

// Who owns path, in words for messages.
std::string Describe(const FileStat& st) {
  char mode[8];
  std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.mode));
  return "owned by uid " + std::to_string(st.uid) + ", mode " + mode;
}

}  // namespace

Result<UniqueFd> ListenUnix(const std::string& path, int backlog) {
  TC_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(path));
  TC_ASSIGN_OR_RETURN(FileStat st, StatFile(path, Follow::kNo, IfMissing::kOk, "checking the socket path"));
  if (st.type != EntryType::kMissing) {
    if (!st.is_socket) {
      return NotASocket(Code::kAlreadyExists, "cannot listen on " + path, st,
                        "remove it or choose another socket path");
    }
    int err = 0;
    TC_ASSIGN_OR_RETURN(UniqueFd probe, ConnectSocket(path, addr, Deadline::After(1000), &err));
    if (err == 0 || err == ETIMEDOUT) {  // ETIMEDOUT: its accept queue is full, so it lives
      return AlreadyExists("an agent already listens on " + path +
                           "; stop it with `tierckpt agent stop` or choose another socket path");
    }
    if (err != ECONNREFUSED) {
      return ErrnoStatus("probing the existing socket " + path, err);
    }
    // Nobody listens: a stale socket left by an agent that died.
    TC_RETURN_IF_ERROR(RemoveFile(path, IfMissing::kOk, "removing the stale socket"));
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
  if (Status s = ChmodPath(path, 0600, "setting mode 0600 on the socket"); !s.ok()) {
    RemoveFile(path, IfMissing::kOk).IgnoreError();  // the chmod failure is the one to report
    return s;
  }
  if (::listen(fd.get(), backlog) != 0) {
    Status s = ErrnoStatus("listening on the Unix socket " + path);
    RemoveFile(path, IfMissing::kOk).IgnoreError();  // the listen failure is the one to report
    return s;
  }
  return fd;
}

Result<UniqueFd> ConnectUnix(const std::string& path, int timeout_ms) {
  TC_ASSIGN_OR_RETURN(sockaddr_un addr, MakeAddress(path));
  int err = 0;
  TC_ASSIGN_OR_RETURN(UniqueFd fd, ConnectSocket(path, addr, Deadline::After(timeout_ms), &err));
  if (err == 0) {
    // Back to blocking mode for callers that read or write it directly; this
    // module's own reads and writes never block past their deadline.
    int flags = ::fcntl(fd.get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) {
      return ErrnoStatus("making the socket connected to " + path + " blocking");
    }
    return fd;
  }
  if (err == ECONNREFUSED) {
    // connect(2) says ECONNREFUSED for a path that is no socket at all (a
    // regular file left there, a directory): that is no agent that is
    // down, and no `tierckpt agent start` could listen there either.
    Result<FileStat> st = StatFile(path, Follow::kYes, IfMissing::kOk, "checking the socket path");
    if (st.ok() && st->type != EntryType::kMissing && !st->is_socket) {
      return NotASocket(Code::kFailedPrecondition, "cannot connect to tierckptd at " + path, *st,
                        "set TIERCKPT_SOCKET (or --socket) to the socket of a running agent, or move the " +
                            std::string(EntryTypeName(st->type)) +
                            " away so that `tierckpt agent start` can listen there");
    }
  }
  if (err == ENOENT || err == ECONNREFUSED) {
    return Unavailable("cannot connect to tierckptd at " + path + ": " + std::strerror(err) +
                       "; is tierckptd running? start it with `tierckpt agent start`, or set "
                       "TIERCKPT_SOCKET to the socket of the agent you want");
  }
  if (err == ETIMEDOUT) {
    return Timeout("cannot connect to tierckptd at " + path + " within " + std::to_string(timeout_ms) +
                   " ms: its queue of connections waiting to be accepted stayed full; the agent is "
                   "overloaded or stuck (see its log and `tierckpt agent status`), or something floods "
                   "it with connections");
  }
  if (err == EACCES || err == EPERM) {
    return PermissionDenied("cannot connect to tierckptd at " + path + ": " + std::strerror(err) +
                            "; the socket belongs to another user, run as that user or start "
                            "your own agent with `tierckpt agent start`");
  }
  return ErrnoStatus("connecting to tierckptd at " + path, err);
}

Status SendFrame(int sock, uint16_t type, uint32_t request_id, std::string_view payload,
                 int fd_to_pass, int timeout_ms) {
  if (payload.size() > kMaxPayload) {
    return InvalidArgument("cannot send a " + FrameName(type) + " frame of " +
                           std::to_string(payload.size()) + " payload bytes: the limit is " +
                           std::to_string(kMaxPayload) + " bytes");
  }
  const Deadline deadline = Deadline::After(timeout_ms);
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
    // MSG_DONTWAIT: a full socket buffer waits in poll below, under the deadline.
    ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        Status ready = WaitFor(sock, POLLOUT, deadline, "room to send");
        if (ready.code() == Code::kTimeout) {
          return Timeout("sending a " + FrameName(type) + " frame: the peer read none of the last " +
                         std::to_string(left) + " of " + std::to_string(kFrameHeaderSize + payload.size()) +
                         " bytes within " + std::to_string(timeout_ms) + " ms; it is stuck or not reading");
        }
        TC_RETURN_IF_ERROR(ready);
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

namespace {

Result<Frame> RecvFrameWith(int sock, const RecvLimits& limits, int frame_timeout_ms) {
  FrameReader reader(sock, Deadline::After(limits.idle_timeout_ms), frame_timeout_ms);
  uint8_t header[kFrameHeaderSize];
  size_t got = 0;
  Status read = reader.Read(reinterpret_cast<char*>(header), kFrameHeaderSize, &got);
  if (read.code() == Code::kTimeout) return RecvTimeout(reader, 0, limits);
  TC_RETURN_IF_ERROR(read);
  if (got == 0) return Unavailable("peer closed the connection");
  if (got < kFrameHeaderSize) {
    return ProtocolError("truncated frame: the peer closed the connection after " +
                         std::to_string(got) + " of " + std::to_string(kFrameHeaderSize) +
                         " header bytes");
  }
  Frame frame;
  TC_ASSIGN_OR_RETURN(frame.header, DecodeHeader(header));
  if (limits.admit) TC_RETURN_IF_ERROR(limits.admit(frame.header));
  // Only address space is reserved for the announced payload; pages are
  // touched (and become resident) chunk by chunk as bytes really arrive, so
  // a header announcing a large payload costs no memory until it is sent.
  constexpr size_t kChunk = 1u << 20;
  const size_t want = frame.header.payload_len;
  frame.payload.reserve(want);
  size_t filled = 0;
  while (filled < want) {
    const size_t next = std::min(want, filled + kChunk);
    frame.payload.resize(next);  // within the reserved capacity: no copy
    read = reader.Read(frame.payload.data() + filled, next - filled, &got);
    if (read.code() == Code::kTimeout) return RecvTimeout(reader, kFrameHeaderSize + want, limits);
    TC_RETURN_IF_ERROR(read);
    filled += got;
    if (filled < next) {
      return ProtocolError("truncated frame: the peer closed the connection after " +
                           std::to_string(filled) + " of " + std::to_string(want) +
                           " payload bytes of a " + FrameName(frame.header.type) + " frame");
    }
  }
  std::vector<UniqueFd>& fds = reader.fds();
  if (fds.size() > 1) {
    return ProtocolError("the peer sent " + std::to_string(fds.size()) +
                         " file descriptors with one frame; at most one is allowed");
  }
  if (fds.size() == 1) frame.fd = std::move(fds[0]);
  return frame;
}

}  // namespace

Result<Frame> RecvFrame(int sock, const RecvLimits& limits) {
  return RecvFrameWith(sock, limits, limits.frame_timeout_ms);
}

Result<Frame> RecvFrame(int sock, int timeout_ms) {
  RecvLimits limits;
  limits.idle_timeout_ms = timeout_ms;
  return RecvFrameWith(sock, limits, FrameReader::kKeepDeadline);
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

namespace tierckpt::wire {

Status CheckSocketDir(const std::string& dir, uid_t trusted_uid) {
  if (dir.empty()) return InvalidArgument("the socket directory is empty; give the socket an absolute path");
  std::string abs = dir;
  if (abs[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof(cwd)) == nullptr) return ErrnoStatus("resolving the socket directory " + dir);
    abs = std::string(cwd) + "/" + abs;
  }
  auto trusted = [&](uid_t uid) { return uid == trusted_uid || uid == 0; };
  const std::string whose = "uid " + std::to_string(trusted_uid) + (trusted_uid == 0 ? "" : " or root");
  // Every prefix, from "/" down to dir itself.
  size_t pos = 0;
  while (pos != std::string::npos) {
    size_t next = abs.find('/', pos + 1);
    std::string prefix = abs.substr(0, next == std::string::npos ? abs.size() : next);
    pos = next;
    if (prefix.empty()) prefix = "/";
    if (prefix.size() > 1 && prefix.back() == '/') continue;  // "a//b"
    const bool leaf = next == std::string::npos || abs.find_first_not_of('/', next) == std::string::npos;
    TC_ASSIGN_OR_RETURN(FileStat lst,
                        StatFile(prefix, Follow::kNo, IfMissing::kFail, "checking the socket directory"));
    if (lst.type == EntryType::kSymlink && !trusted(lst.uid)) {
      return PermissionDenied("socket directory " + dir + ": " + prefix + " is a symbolic link " +
                              Describe(lst) + ", not by " + whose +
                              "; another user could redirect the socket: use a path without it");
    }
    TC_ASSIGN_OR_RETURN(FileStat st,
                        StatFile(prefix, Follow::kYes, IfMissing::kFail, "checking the socket directory"));
    if (st.type != EntryType::kDirectory) {
      return PermissionDenied("socket directory " + dir + ": " + prefix + " is not a directory");
    }
    if (!trusted(st.uid)) {
      return PermissionDenied("socket directory " + prefix + " is " + Describe(st) + ", not by " + whose +
                              " (this process expects the agent to run as uid " + std::to_string(trusted_uid) +
                              "): another user could run an impostor agent there; remove it, or choose a "
                              "directory you own with --socket / TIERCKPT_SOCKET (or set XDG_RUNTIME_DIR)");
    }
    const bool others_write = (st.mode & (S_IWGRP | S_IWOTH)) != 0;
    if (others_write && (leaf || (st.mode & S_ISVTX) == 0)) {
      return PermissionDenied("socket directory " + prefix + " is " + Describe(st) +
                              ": group or others may write it, so another user could replace the socket; "
                              "`chmod go-w " + prefix + "` (0700 is best) or choose a private directory");
    }
    if (leaf) break;
  }
  return Status::Ok();
}

}  // namespace tierckpt::wire
