#include "peer/tcp_socket.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "os/descriptors.h"
#include "os/fd.h"

namespace tierckpt::peer {
namespace {

using Clock = std::chrono::steady_clock;

int PollMs(Millis wait) {
  if (wait.count() <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(wait.count(), INT_MAX));
}

Millis Left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return left.count() < 0 ? Millis(0) : left;
}

// Waits for events on fd until deadline: 1 ready, 0 timed out, -1 error
// (errno set). Retries EINTR.
int PollUntil(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, PollMs(Left(deadline)));
    if (n >= 0) return n;
    if (errno != EINTR) return -1;
  }
}

Status ApplyOptions(int fd, const SocketOptions& o, bool is_tcp, const std::string& what) {
  if (is_tcp && o.no_delay) {
    int one = 1;
    if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) {
      return ErrnoStatus("setting TCP_NODELAY on the socket for " + what);
    }
  }
  if (o.send_buffer_bytes > 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &o.send_buffer_bytes, sizeof(o.send_buffer_bytes)) != 0) {
    return ErrnoStatus("setting SO_SNDBUF on the socket for " + what);
  }
  if (o.recv_buffer_bytes > 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &o.recv_buffer_bytes, sizeof(o.recv_buffer_bytes)) != 0) {
    return ErrnoStatus("setting SO_RCVBUF on the socket for " + what);
  }
  return Status::Ok();
}

std::string FormatSockaddr(const sockaddr_storage& ss) {
  const HostPort hp = HostPortOf(ss);
  return hp.host.empty() ? "unknown-address" : FormatHostPort(hp.host, hp.port);
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { ::freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> Resolve(const std::string& address, bool passive) {
  TC_ASSIGN_OR_RETURN(HostPort hp, ParseHostPort(address));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return Unavailable("resolving the host of peer address " + address + ": " + ::gai_strerror(rc) +
                       "; check the host name or use an IP literal");
  }
  return AddrInfoPtr(res);
}

class TcpChannel final : public ByteChannel {
 public:
  TcpChannel(UniqueFd fd, std::string peer) : fd_(std::move(fd)), peer_(std::move(peer)) {}
  ~TcpChannel() override { Shutdown(); }

  Status Write(std::span<const ConstBuffer> bufs, Millis stall) override {
    std::vector<iovec> iov;
    iov.reserve(bufs.size());
    for (const ConstBuffer& b : bufs) {
      if (b.size > 0) iov.push_back({const_cast<void*>(b.data), b.size});
    }
    size_t first = 0;
    while (first < iov.size()) {
      if (shut_.load()) return Unavailable("the connection to " + peer_ + " was shut down locally");
      msghdr msg{};
      msg.msg_iov = iov.data() + first;
      msg.msg_iovlen = std::min<size_t>(iov.size() - first, IOV_MAX);
      ssize_t n = ::sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoStatus("sending to peer " + peer_);
        int r = PollUntil(fd_.get(), POLLOUT, DeadlineAfter(stall));
        if (r < 0) return ErrnoStatus("waiting to send to peer " + peer_);
        if (r == 0) {
          return Timeout("peer " + peer_ + " accepted no bytes for " + std::to_string(stall.count()) +
                         " ms (its receive buffer stayed full: the peer stalled)");
        }
        continue;
      }
      auto left = static_cast<size_t>(n);
      while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (left > 0) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    return Status::Ok();
  }

  Status Read(void* buf, size_t size, Millis first, Millis stall, size_t* got) override {
    auto* dst = static_cast<char*>(buf);
    *got = 0;
    while (*got < size) {
      if (shut_.load()) return Unavailable("the connection to " + peer_ + " was shut down locally");
      ssize_t n = ::recv(fd_.get(), dst + *got, size - *got, 0);
      if (n > 0) {
        *got += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) {
        if (shut_.load()) return Unavailable("the connection to " + peer_ + " was shut down locally");
        return Status::Ok();  // end of stream
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return ErrnoStatus("receiving from peer " + peer_);
      Millis wait = *got == 0 ? first : stall;
      int r = PollUntil(fd_.get(), POLLIN, DeadlineAfter(wait));
      if (r < 0) return ErrnoStatus("waiting for data from peer " + peer_);
      if (r == 0) {
        return Timeout("peer " + peer_ + " sent nothing for " + std::to_string(wait.count()) + " ms");
      }
    }
    return Status::Ok();
  }

  void Shutdown() override {
    if (!shut_.exchange(true) && fd_.valid()) ::shutdown(fd_.get(), SHUT_RDWR);
  }

  const std::string& peer_address() const override { return peer_; }

 private:
  const UniqueFd fd_;
  const std::string peer_;
  std::atomic<bool> shut_{false};
};

class TcpAcceptor final : public ChannelAcceptor {
 public:
  TcpAcceptor(UniqueFd listen_fd, UniqueFd wake_fd, std::string address, SocketOptions options)
      : fd_(std::move(listen_fd)),
        wake_(std::move(wake_fd)),
        address_(std::move(address)),
        options_(options) {}
  ~TcpAcceptor() override { Shutdown(); }

  Result<std::unique_ptr<ByteChannel>> Accept() override {
    while (true) {
      if (shut_.load()) return Aborted("the TCP listener on " + address_ + " is shut down");
      pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
      int n = ::poll(p, 2, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("waiting for peers on " + address_);
      }
      if (shut_.load() || (p[1].revents & POLLIN) != 0) {
        return Aborted("the TCP listener on " + address_ + " is shut down");
      }
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      UniqueFd conn(
          ::accept4(fd_.get(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!conn.valid()) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) continue;
        return ErrnoStatus("accepting a peer on " + address_);
      }
      std::string peer = FormatSockaddr(ss);
      // A connection that cannot be set up (typically reset by the peer
      // already) is dropped, not reported: a failure here would pause the
      // listener, and anyone can reset connections.
      if (!ApplyOptions(conn.get(), options_, true, "peer " + peer).ok()) continue;
      return std::unique_ptr<ByteChannel>(std::make_unique<TcpChannel>(std::move(conn), std::move(peer)));
    }
  }

  void Shutdown() override {
    if (shut_.exchange(true)) return;
    SignalEventFd(wake_.get());
    ::shutdown(fd_.get(), SHUT_RDWR);
  }

  const std::string& address() const override { return address_; }

 private:
  const UniqueFd fd_;
  const UniqueFd wake_;  // eventfd: written by Shutdown to wake Accept
  const std::string address_;
  const SocketOptions options_;
  std::atomic<bool> shut_{false};
};

}  // namespace

HostPort HostPortOf(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return {host, ntohs(a->sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    return {host, ntohs(a->sin6_port)};
  }
  return {};
}

Result<HostPort> ParseHostPort(std::string_view address) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("peer address \"" + std::string(address.substr(0, 300)) + "\" " +
                           std::string(why) +
                           "; use \"host:port\", e.g. \"10.0.0.2:7100\" or \"[::1]:7100\"");
  };
  HostPort hp;
  std::string_view port;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string_view::npos) return bad("has '[' without ']'");
    hp.host = std::string(address.substr(1, close - 1));
    if (close + 1 >= address.size() || address[close + 1] != ':') return bad("lacks \":port\" after ']'");
    port = address.substr(close + 2);
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) return bad("lacks a port");
    hp.host = std::string(address.substr(0, colon));
    if (hp.host.find(':') != std::string::npos) return bad("is an IPv6 address without brackets");
    port = address.substr(colon + 1);
  }
  if (hp.host.empty()) return bad("has an empty host");
  if (port.empty() || port.size() > 5) return bad("has no valid port");
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("has a port that is not a number");
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return bad("has a port above 65535");
  hp.port = static_cast<uint16_t>(value);
  return hp;
}

std::string FormatHostPort(std::string_view host, uint16_t port) {
  std::string out;
  if (host.find(':') != std::string_view::npos) {
    out = "[" + std::string(host) + "]";
  } else {
    out = std::string(host);
  }
  return out + ":" + std::to_string(port);
}

std::string PeerSource(std::string_view peer_address) {
  Result<HostPort> hp = ParseHostPort(peer_address);
  if (!hp.ok()) return std::string(peer_address);
  in_addr v4{};
  if (::inet_pton(AF_INET, hp->host.c_str(), &v4) == 1) return hp->host;
  const std::string host = hp->host.substr(0, hp->host.find('%'));  // without the zone
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) != 1) return hp->host;  // a name
  char text[INET6_ADDRSTRLEN] = {};
  if (IN6_IS_ADDR_V4MAPPED(&v6)) {
    std::memcpy(&v4, &v6.s6_addr[12], sizeof(v4));
    ::inet_ntop(AF_INET, &v4, text, sizeof(text));
    return text;
  }
  std::memset(&v6.s6_addr[8], 0, 8);
  ::inet_ntop(AF_INET6, &v6, text, sizeof(text));
  return std::string(text) + "/64";
}

Result<std::unique_ptr<ChannelAcceptor>> TcpBind(const std::string& address, const SocketOptions& options) {
  TC_ASSIGN_OR_RETURN(AddrInfoPtr res, Resolve(address, true));
  Status last = Unavailable("no usable address for " + address);
  for (addrinfo* ai = res.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoStatus("creating a socket to listen on " + address);
      continue;
    }
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
      return ErrnoStatus("setting SO_REUSEADDR to listen on " + address);
    }
    // Accepted sockets inherit the buffer sizes; setting them here lets the
    // window scale be negotiated for them.
    TC_RETURN_IF_ERROR(ApplyOptions(fd.get(), options, false, "listening on " + address));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno == EADDRINUSE) {
        return AlreadyExists("peer listen address " + address +
                             " is in use; stop the other agent or choose another --peer-port");
      }
      last = ErrnoStatus("binding the peer listen address " + address);
      continue;
    }
    if (::listen(fd.get(), 512) != 0) return ErrnoStatus("listening on " + address);
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      return ErrnoStatus("reading the bound port of " + address);
    }
    TC_ASSIGN_OR_RETURN(UniqueFd wake, OpenEventFd("the wake-up eventfd for the listener on " + address));
    return std::unique_ptr<ChannelAcceptor>(
        std::make_unique<TcpAcceptor>(std::move(fd), std::move(wake), FormatSockaddr(ss), options));
  }
  return last;
}

Result<std::unique_ptr<ByteChannel>> TcpDial(const std::string& address, Millis timeout,
                                             const SocketOptions& options) {
  Clock::time_point deadline = DeadlineAfter(timeout);
  TC_ASSIGN_OR_RETURN(AddrInfoPtr res, Resolve(address, false));
  Status last = Unavailable("no usable address for peer " + address);
  for (addrinfo* ai = res.get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoStatus("creating a socket to connect to peer " + address);
      continue;
    }
    TC_RETURN_IF_ERROR(ApplyOptions(fd.get(), options, true, "peer " + address));
    int err = 0;
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        int r = PollUntil(fd.get(), POLLOUT, deadline);
        if (r == 0) {
          return Timeout("connecting to peer " + address + " did not complete within " +
                         std::to_string(timeout.count()) + " ms; is the host reachable?");
        }
        if (r < 0) return ErrnoStatus("waiting to connect to peer " + address);
        socklen_t len = sizeof(err);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    if (err == 0) {
      sockaddr_storage ss{};
      std::memcpy(&ss, ai->ai_addr, std::min<size_t>(ai->ai_addrlen, sizeof(ss)));
      return std::unique_ptr<ByteChannel>(std::make_unique<TcpChannel>(std::move(fd), FormatSockaddr(ss)));
    }
    last = ErrnoStatus("connecting to peer " + address, err);
    if (err == ECONNREFUSED) {
      last = Unavailable(last.message() + "; is the peer agent running and listening on that port?");
    }
  }
  return last;
}

}  // namespace tierckpt::peer
