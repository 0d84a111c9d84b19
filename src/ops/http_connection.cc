// http_connection.cc — see http_connection.h.
#include "ops/http_connection.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "peer/tcp_socket.h"

namespace tierckpt::agent {
namespace {

constexpr size_t kReadAhead = 16 * 1024;  // small reads fill `in` by this much

void AddressOf(const sockaddr_storage& ss, std::string* ip, int* port) {
  peer::HostPort hp = peer::HostPortOf(ss);
  *ip = std::move(hp.host);
  *port = hp.port;
}

}  // namespace

HttpConnection::HttpConnection(UniqueFd socket) : fd(std::move(socket)) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) AddressOf(ss, &remote_ip, &remote_port);
  len = sizeof(ss);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len) == 0) AddressOf(ss, &local_ip, &local_port);
}

void HttpConnection::Compact() {
  in.erase(0, in_offset);
  in_offset = 0;
}

bool HttpConnection::HasHeaderBlock() const {
  // The block ends with an empty line: CRLF CRLF, or LF CRLF after a bare-LF
  // line (which the library skips). A bare LF LF never ends it there either.
  return std::string_view(in).substr(in_offset).find("\n\r\n") != std::string_view::npos;
}

HttpConnectionStream::HttpConnectionStream(HttpConnection& conn, const HttpLimits& limits)
    : conn_(conn), limits_(limits) {}

void HttpConnectionStream::HeadersRead() { routed_ = true; }

bool HttpConnectionStream::Wait(short events, std::chrono::milliseconds timeout) const {
  using std::chrono::duration_cast;
  using std::chrono::milliseconds;
  const HttpClock::time_point start = HttpClock::now();
  HttpClock::duration allowed;
  if (!routed_) {
    allowed = std::min<HttpClock::duration>(conn_.deadline - start, timeout);
  } else {
    const auto earned = std::chrono::duration<double>(static_cast<double>(moved_) /
                                                      static_cast<double>(std::max<uint64_t>(limits_.min_bytes_per_s, 1)));
    allowed = limits_.grace + duration_cast<HttpClock::duration>(earned) - waited_;
    allowed = std::min<HttpClock::duration>(allowed, timeout);
  }
  // Out of budget, the socket may still be ready now: a poll that does not wait.
  const int timeout_ms = static_cast<int>(std::max<int64_t>(0, duration_cast<milliseconds>(allowed).count()));
  pollfd p{conn_.fd.get(), events, 0};
  int n;
  do {
    n = ::poll(&p, 1, timeout_ms);
  } while (n < 0 && errno == EINTR && HttpClock::now() - start < allowed);
  if (routed_) waited_ += HttpClock::now() - start;
  // POLLHUP/POLLERR: ready, so that the read or write that follows sees the error.
  return n > 0;
}

bool HttpConnectionStream::is_readable() const { return conn_.buffered() > 0 || Wait(POLLIN, limits_.read_timeout); }

bool HttpConnectionStream::is_writable() const { return Wait(POLLOUT, limits_.write_timeout); }

ssize_t HttpConnectionStream::read(char* ptr, size_t size) {
  if (size == 0) return 0;
  if (conn_.buffered() == 0) {
    conn_.Compact();
    if (!Wait(POLLIN, limits_.read_timeout)) return -1;
    if (size >= kReadAhead) {  // a body's large reads go straight to the caller
      ssize_t n;
      do {
        n = ::recv(conn_.fd.get(), ptr, size, MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n > 0 && routed_) moved_ += static_cast<uint64_t>(n);
      return n;
    }
    conn_.in.resize(kReadAhead);
    ssize_t n;
    do {
      n = ::recv(conn_.fd.get(), conn_.in.data(), kReadAhead, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    conn_.in.resize(static_cast<size_t>(std::max<ssize_t>(n, 0)));
    if (n <= 0) return n;
    if (routed_) moved_ += static_cast<uint64_t>(n);
  }
  const size_t take = std::min(size, conn_.buffered());
  std::memcpy(ptr, conn_.in.data() + conn_.in_offset, take);
  conn_.in_offset += take;
  return static_cast<ssize_t>(take);
}

ssize_t HttpConnectionStream::write(const char* ptr, size_t size) {
  if (!Wait(POLLOUT, limits_.write_timeout)) return -1;
  ssize_t n;
  do {
    n = ::send(conn_.fd.get(), ptr, size, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n > 0) moved_ += static_cast<uint64_t>(n);
  return n;
}

void HttpConnectionStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = conn_.remote_ip;
  port = conn_.remote_port;
}

void HttpConnectionStream::get_local_ip_and_port(std::string& ip, int& port) const {
  ip = conn_.local_ip;
  port = conn_.local_port;
}

}  // namespace tierckpt::agent
