// http_header_wait.cc — see http_header_wait.h.
#include "ops/http_header_wait.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "common/log.h"

namespace tierckpt::agent {
namespace {

// A one-off answer to a client whose request never reached a route; best
// effort (the client may be gone), and the connection is closed after it.
void Answer(const HttpConnection& conn, int status, std::string_view reason, const std::string& why) {
  const std::string body = why + "\n";
  const std::string msg = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                          "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
  (void)::send(conn.fd.get(), msg.data(), msg.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

enum class Next { kWait, kReady, kDrop };

}  // namespace

HeaderWait::HeaderWait(const HttpLimits& limits, size_t max_waiting, std::string flag, Ready ready)
    : limits_(limits),
      max_waiting_(std::max<size_t>(max_waiting, 1)),
      flag_(std::move(flag)),
      ready_(std::move(ready)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  thread_ = std::thread([this] { Loop(); });
}

HeaderWait::~HeaderWait() { Stop(); }

void HeaderWait::Add(std::unique_ptr<HttpConnection> conn) {
  conn->deadline = HttpClock::now() + limits_.header_timeout;
  {
    MutexLock l(&mu_);
    if (stopping_) return;  // closed by the unique_ptr
    added_.push_back(std::move(conn));
  }
  Wake();
}

void HeaderWait::Stop() {
  {
    MutexLock l(&mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  MutexLock l(&mu_);
  added_.clear();
  waiting_ = 0;
}

size_t HeaderWait::waiting() const {
  MutexLock l(&mu_);
  return waiting_;
}

void HeaderWait::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
}

void HeaderWait::Loop() {
  std::vector<std::unique_ptr<HttpConnection>> conns;  // this thread's alone
  std::vector<pollfd> fds;
  uint64_t timed_out = 0;  // clients cut off since the last log line
  HttpClock::time_point last_log{};
  for (;;) {
    {
      MutexLock l(&mu_);
      if (stopping_) break;
      for (auto& c : added_) conns.push_back(std::move(c));
      added_.clear();
    }
    // Whole blocks already buffered (a pipelined request) go on at once;
    // waits past their deadline end.
    const HttpClock::time_point now = HttpClock::now();
    std::erase_if(conns, [&](std::unique_ptr<HttpConnection>& c) {
      if (c->HasHeaderBlock()) {
        ready_(std::move(c));
        return true;
      }
      if (now < c->deadline) return false;
      if (c->buffered() > 0) {
        ++timed_out;
        Answer(*c, 408, "Request Timeout",
               "the request's headers did not arrive within " +
                   std::to_string(limits_.header_timeout.count() / 1000) + " s (" + flag_ +
                   "); send each request whole, without pauses");
      }
      return true;  // an idle keep-alive connection closes without an answer
    });
    if (timed_out > 0 && now - last_log >= std::chrono::seconds(10)) {
      Log(LogLevel::kWarn, "http_header_timeout").Kv("flag", flag_).Kv("clients", timed_out);
      timed_out = 0;
      last_log = now;
    }
    if (conns.size() > max_waiting_) {  // the oldest waits go first
      std::sort(conns.begin(), conns.end(),
                [](const auto& a, const auto& b) { return a->deadline < b->deadline; });
      conns.erase(conns.begin(), conns.begin() + static_cast<ptrdiff_t>(conns.size() - max_waiting_));
    }
    {
      MutexLock l(&mu_);
      waiting_ = conns.size();
    }

    fds.assign(1, pollfd{wake_.get(), POLLIN, 0});
    HttpClock::time_point next = HttpClock::time_point::max();
    for (const auto& c : conns) {
      fds.push_back(pollfd{c->fd.get(), POLLIN, 0});
      next = std::min(next, c->deadline);
    }
    int timeout_ms = -1;
    if (next != HttpClock::time_point::max()) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(next - HttpClock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 60000));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) continue;  // timeout or EINTR
    if (fds[0].revents != 0) {
      uint64_t count;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    // fds[i + 1] is conns[i]; handed-on and dropped entries are erased after.
    for (size_t i = 0; i < conns.size(); ++i) {
      if (fds[i + 1].revents == 0) continue;
      HttpConnection& c = *conns[i];
      Next next_step = Next::kWait;
      const size_t room = limits_.max_header_bytes + 1 - std::min(c.buffered(), limits_.max_header_bytes);
      const size_t old = c.in.size();
      c.in.resize(old + room);
      ssize_t n;
      do {
        n = ::recv(c.fd.get(), c.in.data() + old, room, MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      c.in.resize(old + static_cast<size_t>(std::max<ssize_t>(n, 0)));
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        next_step = Next::kDrop;  // the client closed, or the connection failed
      } else if (c.HasHeaderBlock()) {
        next_step = Next::kReady;
      } else if (c.buffered() > limits_.max_header_bytes) {
        Answer(c, 431, "Request Header Fields Too Large",
               "the request line and headers are over " + std::to_string(limits_.max_header_bytes) +
                   " bytes (" + flag_ + ")");
        next_step = Next::kDrop;
      }
      if (next_step == Next::kReady) ready_(std::move(conns[i]));
      if (next_step == Next::kDrop) conns[i].reset();
    }
    std::erase_if(conns, [](const auto& c) { return c == nullptr; });
  }
}

}  // namespace tierckpt::agent
