// http_connection.h — one accepted HTTP connection of an HttpServer, and the
// httplib::Stream a request is served through (decision 81).
//
// Why not the library's own stream: cpp-httplib times each read alone, so a
// client that sends a byte every few seconds holds a serving thread for as
// long as it likes (slowloris). Here no thread waits on a client's headers
// (the HeaderWait, http_header_wait.h, does that for every connection at
// once, against one deadline per request), and once a request is routed the
// time its thread spends waiting on the client is bounded by what the client
// moved:
//
//     waited ≤ grace + bytes read and written since the headers / min_rate
//
// besides the per-read and per-write timeouts. Time the server spends working (a
// handler hashing a shard) is not waiting and costs the client nothing; a
// client that moves its bytes at min_rate or faster is never cut off.
//
// HttpConnection is owned by one place at a time (the HeaderWait, or the
// worker serving its request), so it needs no lock.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "os/fd.h"

namespace tierckpt::agent {

using HttpClock = std::chrono::steady_clock;

// What a client may cost the server; HttpServerOptions fills it.
struct HttpLimits {
  std::chrono::milliseconds header_timeout{10000};  // a request's whole header block, from its wait
  std::chrono::milliseconds read_timeout{30000};    // one read once routed
  std::chrono::milliseconds write_timeout{30000};   // one write
  std::chrono::milliseconds grace{10000};           // waiting allowed before any byte moved
  uint64_t min_bytes_per_s = 64 * 1024;             // what each further second of waiting costs
  size_t max_header_bytes = 32 * 1024;              // request line and headers together
};

struct HttpConnection {
  explicit HttpConnection(UniqueFd socket);

  UniqueFd fd;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;
  std::string in;        // bytes read from the socket, not yet consumed
  size_t in_offset = 0;  // of the first unconsumed byte in `in`
  size_t requests_left = 1;
  HttpClock::time_point deadline;  // of the headers being waited for

  size_t buffered() const { return in.size() - in_offset; }
  // Drops the consumed prefix of `in`.
  void Compact();
  // Whether the unconsumed bytes hold a whole header block (up to the empty line).
  bool HasHeaderBlock() const;
};

// The stream of one request on a connection. Reads serve `in` first. Until
// HeadersRead() (the library's setup_request hook) reads may wait only until
// conn.deadline; after it, the budget above applies.
class HttpConnectionStream final : public httplib::Stream {
 public:
  HttpConnectionStream(HttpConnection& conn, const HttpLimits& limits);

  void HeadersRead();

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return conn_.fd.get(); }

 private:
  // Waits for `events` (POLLIN/POLLOUT) within the budget and at most
  // `timeout`; false when the socket was not ready in time.
  bool Wait(short events, std::chrono::milliseconds timeout) const;

  HttpConnection& conn_;
  const HttpLimits& limits_;
  bool routed_ = false;
  uint64_t moved_ = 0;                               // bytes read and written since HeadersRead
  mutable HttpClock::duration waited_{};             // on the client since HeadersRead
};

}  // namespace tierckpt::agent
