// http_header_wait.h — the one thread of an HttpServer that waits for
// requests to arrive (decision 81).
//
// A connection is handed here when it is accepted and after each answer it
// keeps alive. One poll(2) loop reads what its clients send until a whole
// header block is buffered, then hands the connection to `ready` (which runs
// the request on a worker). No worker thread ever waits on a client's
// headers, so clients that send slowly, or not at all, cannot take the
// workers from the others (slowloris).
//
// Each wait has one deadline, HttpLimits::header_timeout from the hand-over:
// a client that has not sent its whole header block by then is answered 408
// (nothing sent: closed without an answer, an idle keep-alive). A block over
// HttpLimits::max_header_bytes is answered 431. At most `max_waiting`
// connections wait; one more closes the oldest (a client that sends its
// request at once never waits long enough to be the oldest).
//
// Thread-safe: Add from any thread; Stop (or the destructor) closes every
// waiting connection and joins; an Add after Stop closes the connection.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "ops/http_connection.h"
#include "os/fd.h"

namespace tierckpt::agent {

class HeaderWait {
 public:
  using Ready = std::function<void(std::unique_ptr<HttpConnection>)>;
  // flag: the option that configures the server, for logs.
  HeaderWait(const HttpLimits& limits, size_t max_waiting, std::string flag, Ready ready);
  ~HeaderWait();
  HeaderWait(const HeaderWait&) = delete;
  HeaderWait& operator=(const HeaderWait&) = delete;

  // Starts the wait for the connection's next request, until now + header_timeout.
  void Add(std::unique_ptr<HttpConnection> conn);
  void Stop();

  // Connections waiting now (for tests and the status page).
  size_t waiting() const;

 private:
  void Loop();
  // Reads what is there; false when the connection is done with (closed, answered or handed on).
  bool ReadFrom(HttpConnection& conn);
  void Wake();

  const HttpLimits& limits_;
  const size_t max_waiting_;
  const std::string flag_;
  const Ready ready_;
  UniqueFd wake_;  // eventfd: Add and Stop interrupt the poll

  mutable Mutex mu_;
  std::vector<std::unique_ptr<HttpConnection>> added_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  size_t waiting_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace tierckpt::agent
