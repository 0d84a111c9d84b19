#include "peer/mem_channel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <utility>
#include <vector>

namespace tierckpt::peer {
namespace {

using Clock = std::chrono::steady_clock;

// One direction: a ring buffer of fixed capacity.
struct Pipe {
  explicit Pipe(size_t capacity) : buf(capacity) {}
  Mutex mu;
  CondVar cv{&mu};
  std::vector<uint8_t> buf GUARDED_BY(mu);
  size_t head GUARDED_BY(mu) = 0;  // first unread byte
  size_t used GUARDED_BY(mu) = 0;
  bool writer_closed GUARDED_BY(mu) = false;  // no more bytes will come
  bool reader_closed GUARDED_BY(mu) = false;  // nobody will read
};

class MemChannel final : public ByteChannel {
 public:
  MemChannel(std::shared_ptr<Pipe> in, std::shared_ptr<Pipe> out, std::string peer)
      : in_(std::move(in)), out_(std::move(out)), peer_(std::move(peer)) {}
  ~MemChannel() override { Shutdown(); }

  Status Write(std::span<const ConstBuffer> bufs, Millis stall) override {
    Pipe& p = *out_;
    for (const ConstBuffer& b : bufs) {
      const auto* src = static_cast<const uint8_t*>(b.data);
      size_t left = b.size;
      while (left > 0) {
        MutexLock lock(&p.mu);
        const auto deadline = DeadlineAfter(stall);
        while (!(p.used < p.buf.size() || p.reader_closed || p.writer_closed) && p.cv.WaitUntil(deadline)) {
        }
        const bool ready = p.used < p.buf.size() || p.reader_closed || p.writer_closed;
        if (p.writer_closed) return Unavailable("in-memory channel to " + peer_ + " was shut down locally");
        if (p.reader_closed) return Unavailable("in-memory peer " + peer_ + " closed the connection");
        if (!ready) {
          return Timeout("in-memory peer " + peer_ + " took no bytes for " + std::to_string(stall.count()) +
                         " ms (it stopped reading)");
        }
        size_t cap = p.buf.size();
        size_t tail = (p.head + p.used) % cap;
        size_t n = std::min({left, cap - p.used, cap - tail});
        std::memcpy(p.buf.data() + tail, src, n);
        p.used += n;
        src += n;
        left -= n;
        p.cv.SignalAll();
      }
    }
    return Status::Ok();
  }

  Status Read(void* buf, size_t size, Millis first, Millis stall, size_t* got) override {
    Pipe& p = *in_;
    auto* dst = static_cast<uint8_t*>(buf);
    *got = 0;
    while (*got < size) {
      MutexLock lock(&p.mu);
      Millis wait = *got == 0 ? first : stall;
      const auto deadline = DeadlineAfter(wait);
      while (!(p.used > 0 || p.writer_closed || p.reader_closed) && p.cv.WaitUntil(deadline)) {
      }
      const bool ready = p.used > 0 || p.writer_closed || p.reader_closed;
      if (p.reader_closed) return Unavailable("in-memory channel to " + peer_ + " was shut down locally");
      if (p.used == 0 && p.writer_closed) return Status::Ok();  // end of stream
      if (!ready) {
        return Timeout("in-memory peer " + peer_ + " sent nothing for " + std::to_string(wait.count()) +
                       " ms");
      }
      size_t cap = p.buf.size();
      size_t n = std::min({size - *got, p.used, cap - p.head});
      std::memcpy(dst + *got, p.buf.data() + p.head, n);
      p.head = (p.head + n) % cap;
      p.used -= n;
      *got += n;
      p.cv.SignalAll();
    }
    return Status::Ok();
  }

  void Shutdown() override {
    {
      MutexLock lock(&out_->mu);
      out_->writer_closed = true;
      out_->cv.SignalAll();
    }
    MutexLock lock(&in_->mu);
    in_->reader_closed = true;
    in_->cv.SignalAll();
  }

  const std::string& peer_address() const override { return peer_; }

 private:
  const std::shared_ptr<Pipe> in_;
  const std::shared_ptr<Pipe> out_;
  const std::string peer_;
};

}  // namespace

class MemAcceptor final : public ChannelAcceptor {
 public:
  MemAcceptor(std::shared_ptr<InMemoryNetwork> net, std::string address)
      : net_(std::move(net)), address_(std::move(address)) {}
  ~MemAcceptor() override { Shutdown(); }

  Result<std::unique_ptr<ByteChannel>> Accept() override {
    MutexLock lock(&mu_);
    while (queue_.empty() && !shut_) cv_.Wait();
    if (shut_) return Aborted("the in-memory listener at " + address_ + " is shut down");
    std::unique_ptr<ByteChannel> ch = std::move(queue_.front());
    queue_.pop_front();
    return ch;
  }

  void Shutdown() override {
    net_->Unbind(address_, this);
    std::deque<std::unique_ptr<ByteChannel>> dropped;
    {
      MutexLock lock(&mu_);
      shut_ = true;
      dropped.swap(queue_);
      cv_.SignalAll();
    }
  }

  const std::string& address() const override { return address_; }

  // Called by InMemoryNetwork::Dial under the network's lock.
  bool Enqueue(std::unique_ptr<ByteChannel> ch) {
    MutexLock lock(&mu_);
    if (shut_) return false;
    queue_.push_back(std::move(ch));
    cv_.SignalAll();
    return true;
  }

 private:
  const std::shared_ptr<InMemoryNetwork> net_;
  const std::string address_;
  Mutex mu_;
  CondVar cv_{&mu_};
  std::deque<std::unique_ptr<ByteChannel>> queue_ GUARDED_BY(mu_);
  bool shut_ GUARDED_BY(mu_) = false;
};

std::shared_ptr<InMemoryNetwork> InMemoryNetwork::Create(size_t pipe_capacity) {
  return std::shared_ptr<InMemoryNetwork>(new InMemoryNetwork(std::max<size_t>(pipe_capacity, 1)));
}

Result<std::unique_ptr<ChannelAcceptor>> InMemoryNetwork::Bind(const std::string& address) {
  if (address.empty()) return InvalidArgument("an in-memory listen address is empty; use e.g. \"node-a:0\"");
  MutexLock lock(&mu_);
  std::string bound = address;
  if (address.size() >= 2 && address.compare(address.size() - 2, 2, ":0") == 0) {
    bound = address.substr(0, address.size() - 1) + std::to_string(next_port_++);
  }
  if (bound_.count(bound) != 0) {
    return AlreadyExists("in-memory address " + bound + " is already bound; choose another or use port 0");
  }
  auto acceptor = std::make_unique<MemAcceptor>(shared_from_this(), bound);
  bound_[bound] = acceptor.get();
  return std::unique_ptr<ChannelAcceptor>(std::move(acceptor));
}

Result<std::unique_ptr<ByteChannel>> InMemoryNetwork::Dial(const std::string& address) {
  MutexLock lock(&mu_);
  auto it = bound_.find(address);
  if (it == bound_.end()) {
    return Unavailable("nothing listens on in-memory address " + address +
                       "; is the peer's listener started?");
  }
  auto to_server = std::make_shared<Pipe>(pipe_capacity_);
  auto to_client = std::make_shared<Pipe>(pipe_capacity_);
  std::string client_name = "mem:client-" + std::to_string(next_client_++);
  auto server_end = std::make_unique<MemChannel>(to_server, to_client, client_name);
  auto client_end = std::make_unique<MemChannel>(to_client, to_server, address);
  if (!it->second->Enqueue(std::move(server_end))) {
    return Unavailable("the in-memory listener at " + address + " is shutting down");
  }
  return std::unique_ptr<ByteChannel>(std::move(client_end));
}

void InMemoryNetwork::Unbind(const std::string& address, const MemAcceptor* acceptor) {
  MutexLock lock(&mu_);
  auto it = bound_.find(address);
  if (it != bound_.end() && it->second == acceptor) bound_.erase(it);
}

}  // namespace tierckpt::peer
