#include "testing/fault_transport.h"

#include <algorithm>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace tierckpt::peer {

enum class StreamFault { kNone, kCorrupt, kStall, kTruncate };

// The plan and the counters, shared by the transport and its connections.
struct FaultPlan {
  struct ConnectRule {
    uint64_t at_call = 0;  // 0 = every call
    Status status;
  };
  struct StreamRule {
    uint64_t at_stream = 0;
    StreamFault fault = StreamFault::kNone;
    uint64_t at_byte = 0;  // corrupt: the byte; stall/truncate: bytes sent first
  };
  // What happens to one stream.
  struct StreamPlan {
    StreamFault fault = StreamFault::kNone;
    uint64_t at_byte = 0;
    uint64_t number = 0;
  };

  Mutex mu;
  std::vector<ConnectRule> connect_rules GUARDED_BY(mu);
  std::vector<uint64_t> drop_sends GUARDED_BY(mu);  // absolute Send numbers
  std::vector<StreamRule> stream_rules GUARDED_BY(mu);
  Millis delay GUARDED_BY(mu){0};
  uint64_t connects GUARDED_BY(mu) = 0;
  uint64_t sends GUARDED_BY(mu) = 0;
  uint64_t send_bytes GUARDED_BY(mu) = 0;     // payload bytes of every Send
  uint64_t largest_send GUARDED_BY(mu) = 0;   // the largest payload of one Send
  uint64_t streams GUARDED_BY(mu) = 0;
  uint64_t injected GUARDED_BY(mu) = 0;

  Status OnConnect() {
    MutexLock lock(&mu);
    uint64_t k = ++connects;
    for (const ConnectRule& r : connect_rules) {
      if (r.at_call == 0 || r.at_call == k) {
        ++injected;
        return Status(r.status.code(),
                      "injected fault on Connect #" + std::to_string(k) + ": " + r.status.message());
      }
    }
    return Status::Ok();
  }

  // Returns the send's number when it must be dropped; sets *delay.
  std::optional<uint64_t> OnSend(size_t payload_bytes, Millis* delay_out) {
    MutexLock lock(&mu);
    uint64_t k = ++sends;
    send_bytes += payload_bytes;
    largest_send = std::max<uint64_t>(largest_send, payload_bytes);
    *delay_out = delay;
    if (std::find(drop_sends.begin(), drop_sends.end(), k) != drop_sends.end()) {
      ++injected;
      return k;
    }
    return std::nullopt;
  }

  StreamPlan OnStream() {
    MutexLock lock(&mu);
    uint64_t k = ++streams;
    for (const StreamRule& r : stream_rules) {
      if (r.at_stream == k) return StreamPlan{r.fault, r.at_byte, k};
    }
    return StreamPlan{StreamFault::kNone, 0, k};
  }

  Millis Delay() {
    MutexLock lock(&mu);
    return delay;
  }

  void CountInjected() {
    MutexLock lock(&mu);
    ++injected;
  }
};

namespace {

void Pause(Millis d) {
  if (d.count() > 0) std::this_thread::sleep_for(d);
}

class FaultInjectingConnection final : public Connection {
 public:
  FaultInjectingConnection(std::unique_ptr<Connection> base, std::shared_ptr<FaultPlan> plan)
      : base_(std::move(base)), plan_(std::move(plan)) {}

  const PeerInfo& peer() const override { return base_->peer(); }

  Status Send(const Frame& frame) override {
    TC_RETURN_IF_ERROR(stalled_);
    Millis delay{0};
    std::optional<uint64_t> drop = plan_->OnSend(frame.payload.size(), &delay);
    if (drop) {
      base_->Close();
      return Unavailable("injected fault on Send #" + std::to_string(*drop) + ": the connection to " +
                         Describe() + " was dropped");
    }
    Pause(delay);
    return base_->Send(frame);
  }

  Status BeginStream(const StreamHeader& header) override {
    TC_RETURN_IF_ERROR(stalled_);
    stream_ = plan_->OnStream();
    offset_ = 0;
    return base_->BeginStream(header);
  }

  Status SendStreamChunk(const void* data, size_t size) override {
    TC_RETURN_IF_ERROR(stalled_);
    Pause(plan_->Delay());
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t end = offset_ + size;
    bool cuts = (stream_.fault == StreamFault::kStall || stream_.fault == StreamFault::kTruncate) &&
                end > stream_.at_byte;
    if (cuts) {
      size_t before = stream_.at_byte > offset_ ? static_cast<size_t>(stream_.at_byte - offset_) : 0;
      if (before > 0) TC_RETURN_IF_ERROR(base_->SendStreamChunk(p, before));
      offset_ += before;
      plan_->CountInjected();
      std::string what = "injected fault on stream #" + std::to_string(stream_.number) + " to " + Describe();
      if (stream_.fault == StreamFault::kStall) {
        stalled_ = Aborted(what + ": the sender stalls after " + std::to_string(offset_) + " bytes");
        return stalled_;
      }
      base_->Close();
      return Unavailable(what + ": the connection closed after " + std::to_string(offset_) + " bytes");
    }
    if (stream_.fault == StreamFault::kCorrupt && stream_.at_byte >= offset_ && stream_.at_byte < end) {
      std::vector<uint8_t> copy(p, p + size);
      copy[stream_.at_byte - offset_] ^= 0xff;
      plan_->CountInjected();
      offset_ = end;
      return base_->SendStreamChunk(copy.data(), copy.size());
    }
    offset_ = end;
    return base_->SendStreamChunk(data, size);
  }

  Status EndStream(Checksum checksum) override {
    TC_RETURN_IF_ERROR(stalled_);
    return base_->EndStream(checksum);
  }
  Status AbortStream(std::string_view reason) override {
    TC_RETURN_IF_ERROR(stalled_);
    return base_->AbortStream(reason);
  }
  size_t chunk_bytes() const override { return base_->chunk_bytes(); }

  Result<Message> Receive(Millis timeout) override { return base_->Receive(timeout); }
  Result<Checksum> ReceiveStreamBody(std::span<uint8_t> dest) override {
    return base_->ReceiveStreamBody(dest);
  }
  Result<Checksum> ReceiveStreamPieces(const StreamPieceWriter& write) override {
    return base_->ReceiveStreamPieces(write);
  }
  Status DiscardStream() override { return base_->DiscardStream(); }

  void Close() override { base_->Close(); }
  ConnectionStats stats() const override { return base_->stats(); }

 private:
  const std::unique_ptr<Connection> base_;
  const std::shared_ptr<FaultPlan> plan_;
  // Send side (one thread at a time).
  FaultPlan::StreamPlan stream_;
  uint64_t offset_ = 0;
  Status stalled_;  // not ok once a stall was injected
};

class FaultInjectingListener final : public Listener {
 public:
  FaultInjectingListener(std::unique_ptr<Listener> base, std::shared_ptr<FaultPlan> plan)
      : base_(std::move(base)), plan_(std::move(plan)) {}

  const std::string& address() const override { return base_->address(); }
  Result<std::unique_ptr<Connection>> Accept(Millis timeout) override {
    TC_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, base_->Accept(timeout));
    return std::unique_ptr<Connection>(std::make_unique<FaultInjectingConnection>(std::move(c), plan_));
  }
  void Close() override { base_->Close(); }

 private:
  const std::unique_ptr<Listener> base_;
  const std::shared_ptr<FaultPlan> plan_;
};

}  // namespace

FaultInjectingTransport::FaultInjectingTransport(std::shared_ptr<Transport> base)
    : base_(std::move(base)), plan_(std::make_shared<FaultPlan>()) {}

FaultInjectingTransport::~FaultInjectingTransport() = default;

void FaultInjectingTransport::FailNthConnect(uint64_t n, Status status) {
  if (status.ok()) status = Unavailable("injected: connection refused");
  MutexLock lock(&plan_->mu);
  plan_->connect_rules.push_back({plan_->connects + std::max<uint64_t>(n, 1), std::move(status)});
}

void FaultInjectingTransport::FailEveryConnect(Status status) {
  if (status.ok()) status = Unavailable("injected: connection refused");
  MutexLock lock(&plan_->mu);
  plan_->connect_rules.push_back({0, std::move(status)});
}

void FaultInjectingTransport::DropNthSend(uint64_t n) {
  MutexLock lock(&plan_->mu);
  plan_->drop_sends.push_back(plan_->sends + std::max<uint64_t>(n, 1));
}

void FaultInjectingTransport::CorruptNthStream(uint64_t n, uint64_t offset) {
  MutexLock lock(&plan_->mu);
  plan_->stream_rules.push_back({plan_->streams + std::max<uint64_t>(n, 1), StreamFault::kCorrupt, offset});
}

void FaultInjectingTransport::StallNthStream(uint64_t n, uint64_t after_bytes) {
  MutexLock lock(&plan_->mu);
  plan_->stream_rules.push_back(
      {plan_->streams + std::max<uint64_t>(n, 1), StreamFault::kStall, after_bytes});
}

void FaultInjectingTransport::TruncateNthStream(uint64_t n, uint64_t after_bytes) {
  MutexLock lock(&plan_->mu);
  plan_->stream_rules.push_back(
      {plan_->streams + std::max<uint64_t>(n, 1), StreamFault::kTruncate, after_bytes});
}

void FaultInjectingTransport::DelayEverySend(Millis delay) {
  MutexLock lock(&plan_->mu);
  plan_->delay = delay;
}

void FaultInjectingTransport::ClearFaults() {
  MutexLock lock(&plan_->mu);
  plan_->connect_rules.clear();
  plan_->drop_sends.clear();
  plan_->stream_rules.clear();
  plan_->delay = Millis(0);
}

uint64_t FaultInjectingTransport::ConnectCount() const {
  MutexLock lock(&plan_->mu);
  return plan_->connects;
}

uint64_t FaultInjectingTransport::SendCount() const {
  MutexLock lock(&plan_->mu);
  return plan_->sends;
}

uint64_t FaultInjectingTransport::SendBytes() const {
  MutexLock lock(&plan_->mu);
  return plan_->send_bytes;
}

uint64_t FaultInjectingTransport::LargestSend() const {
  MutexLock lock(&plan_->mu);
  return plan_->largest_send;
}

uint64_t FaultInjectingTransport::StreamCount() const {
  MutexLock lock(&plan_->mu);
  return plan_->streams;
}

uint64_t FaultInjectingTransport::InjectedFaults() const {
  MutexLock lock(&plan_->mu);
  return plan_->injected;
}

std::string FaultInjectingTransport::Describe() const { return "fault(" + base_->Describe() + ")"; }

Result<std::unique_ptr<Listener>> FaultInjectingTransport::Listen(const std::string& address) {
  TC_ASSIGN_OR_RETURN(std::unique_ptr<Listener> l, base_->Listen(address));
  return std::unique_ptr<Listener>(std::make_unique<FaultInjectingListener>(std::move(l), plan_));
}

Result<std::unique_ptr<Connection>> FaultInjectingTransport::Connect(const std::string& address,
                                                                     Millis timeout,
                                                                     std::string_view expected_node_id) {
  TC_RETURN_IF_ERROR(plan_->OnConnect());
  TC_ASSIGN_OR_RETURN(std::unique_ptr<Connection> c, base_->Connect(address, timeout, expected_node_id));
  return std::unique_ptr<Connection>(std::make_unique<FaultInjectingConnection>(std::move(c), plan_));
}

}  // namespace tierckpt::peer
