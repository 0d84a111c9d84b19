// peer_test_util.h — helpers for the peer transport's unit tests: options
// with short timeouts, shared-memory buffers, and a RawPeer that speaks the
// wire format by hand (to send malformed frames, skip the handshake, or play
// a peer without the secret). Test-only; gtest required.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "os/fd.h"
#include "os/mapping.h"
#include "peer/auth.h"
#include "peer/frame_io.h"
#include "peer/peer_frame.h"
#include "peer/transport.h"

namespace tierckpt::peer::testing_util {

inline ClusterSecret Secret(std::string_view text = "cluster-secret-for-tests-0123456789") {
  Result<ClusterSecret> s = ClusterSecret::FromBytes(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : ClusterSecret();
}

// True when s's message contains text.
inline bool MessageHas(const Status& s, std::string_view text) { return s.message().find(text) != std::string::npos; }

// The time since start.
inline Millis Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - start);
}

// True when the server closed ch (end of stream or reset) within wait; false when it stayed open.
inline bool ClosedWithin(ByteChannel& ch, Millis wait) {
  char byte = 0;
  size_t got = 0;
  Status s = ch.Read(&byte, 1, wait, wait, &got);
  if (s.code() == Code::kTimeout) return false;
  return got == 0;  // end of stream, or an error such as a reset
}

inline TransportOptions Options(std::string node_id, ClusterSecret secret = Secret()) {
  TransportOptions o;
  o.node_id = std::move(node_id);
  o.secret = std::move(secret);
  o.connection.io_timeout = Millis(3000);
  o.connection.chunk_bytes = 256u << 10;
  o.handshake_timeout = Millis(3000);
  return o;
}

// A shared-memory buffer (memfd + MAP_SHARED), like a tmpfs object mapping.
class SharedBuffer {
 public:
  explicit SharedBuffer(size_t size) {
    fd_.Reset(::memfd_create("tc_peer_test", MFD_CLOEXEC));
    EXPECT_TRUE(fd_.valid());
    EXPECT_EQ(::ftruncate(fd_.get(), static_cast<off_t>(size)), 0);
    Result<Mapping> m = Mapping::Map(fd_.get(), size, Mapping::Access::kReadWrite, false, "test memfd");
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (m.ok()) mapping_ = std::move(*m);
  }
  uint8_t* data() const { return mapping_.data(); }
  size_t size() const { return mapping_.size(); }
  std::span<uint8_t> span() const { return {mapping_.data(), mapping_.size()}; }
  // Deterministic, non-repeating bytes (splitmix64 of the word index + seed).
  void Fill(uint64_t seed) {
    for (size_t i = 0; i + 8 <= size(); i += 8) {
      uint64_t z = (i / 8 + seed) * 0x9e3779b97f4a7c15ULL;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      z ^= z >> 31;
      std::memcpy(data() + i, &z, 8);
    }
    for (size_t i = size() & ~size_t{7}; i < size(); ++i) data()[i] = static_cast<uint8_t>(i + seed);
  }

 private:
  UniqueFd fd_;
  Mapping mapping_;
};

// Collects the listener's on_handshake_failed reports and waits for them.
class FailureLog {
 public:
  std::function<void(const std::string&, const Status&)> Hook() {
    return [this](const std::string& peer, const Status& why) {
      std::lock_guard<std::mutex> lock(mu_);
      entries_.emplace_back(peer, why);
      cv_.notify_all();
    };
  }
  // The n-th report (1-based), waiting up to timeout for it.
  std::optional<std::pair<std::string, Status>> Wait(size_t n, Millis timeout = Millis(4000)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return entries_.size() >= n; })) return std::nullopt;
    return entries_[n - 1];
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, Status>> entries_;
};

struct RawFrame {
  PeerFrameHeader header;
  std::string payload;
};

// Speaks frames by hand on a raw channel.
class RawPeer {
 public:
  explicit RawPeer(std::unique_ptr<ByteChannel> ch) : ch_(std::move(ch)) {}
  ByteChannel& channel() { return *ch_; }

  Status SendBytes(std::string_view bytes) {
    ConstBuffer b{bytes.data(), bytes.size()};
    return ch_->Write(std::span<const ConstBuffer>(&b, 1), Millis(2000));
  }
  Status Send(FrameKind kind, std::string_view payload, uint16_t type = 0, uint32_t request_id = 0) {
    PeerFrameHeader h;
    h.kind = kind;
    h.type = type;
    h.request_id = request_id;
    return WriteFrame(*ch_, h, payload, Millis(2000), "test peer");
  }
  Result<RawFrame> Read(Millis timeout = Millis(3000)) {
    bool idle = false;
    TC_ASSIGN_OR_RETURN(PeerFrameHeader h, ReadFrameHeader(*ch_, timeout, timeout, "test peer", 1, &idle));
    TC_ASSIGN_OR_RETURN(std::string p, ReadPayload(*ch_, h, timeout, "test peer"));
    return RawFrame{h, std::move(p)};
  }
  // Sends a client Hello and reads the server's; returns it.
  Result<HelloPayload> ClientHello(std::string node_id, uint16_t min_v = kMinPeerProtocolVersion,
                                   uint16_t max_v = kMaxPeerProtocolVersion) {
    nonce_ = std::string(kNonceSize, 'c');
    node_ = std::move(node_id);
    TC_RETURN_IF_ERROR(
        Send(FrameKind::kHello, HelloPayload{Role::kClient, min_v, max_v, node_, nonce_}.Encode()));
    TC_ASSIGN_OR_RETURN(RawFrame f, Read());
    if (f.header.kind != FrameKind::kHello) {
      return Internal("expected Hello, got " + std::string(FrameKindName(f.header.kind)) + ": " + f.payload);
    }
    return HelloPayload::Decode(f.payload);
  }
  // The whole client handshake; secret null sends an empty proof. Returns
  // the server's answer to the proof (Proof, then Ready is sent; or Reject).
  Result<RawFrame> ClientHandshake(std::string node_id, const ClusterSecret* secret) {
    TC_ASSIGN_OR_RETURN(HelloPayload server, ClientHello(std::move(node_id)));
    std::string mac;
    if (secret != nullptr) {
      mac = ComputeProof(*secret, ProofInput{Role::kClient, node_, server.node_id, nonce_, server.nonce, 1});
    }
    TC_RETURN_IF_ERROR(Send(FrameKind::kProof, ProofPayload{mac}.Encode()));
    TC_ASSIGN_OR_RETURN(RawFrame answer, Read());
    if (answer.header.kind == FrameKind::kProof) TC_RETURN_IF_ERROR(Send(FrameKind::kReady, ""));
    return answer;
  }

 private:
  std::unique_ptr<ByteChannel> ch_;
  std::string nonce_;
  std::string node_;
};

inline RejectPayload DecodeReject(const RawFrame& f) {
  EXPECT_EQ(f.header.kind, FrameKind::kReject);
  Result<RejectPayload> r = RejectPayload::Decode(f.payload);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : RejectPayload{};
}

}  // namespace tierckpt::peer::testing_util
