#include "peer/handshake.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>

#include "peer/frame_io.h"

namespace tierckpt::peer {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint16_t kHandshakeFrameVersion = 1;
// How long a best-effort Reject may take to leave.
constexpr Millis kRejectWait{1000};

struct Received {
  PeerFrameHeader header;
  std::string payload;
};

Millis LeftUntil(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
  return std::max(left, Millis(0));
}

// A channel whose reads end at a deadline however the peer trickles its
// bytes: a ByteChannel's own waits restart with every byte that arrives, so
// it reads one byte per call, each call bounded by the time left. Handshake
// frames are small (a few hundred bytes), so the extra calls cost nothing.
class DeadlineChannel final : public ByteChannel {
 public:
  DeadlineChannel(ByteChannel& ch, Clock::time_point deadline) : ch_(ch), deadline_(deadline) {}

  Status Write(std::span<const ConstBuffer> bufs, Millis stall) override { return ch_.Write(bufs, stall); }

  Status Read(void* buf, size_t size, Millis first, Millis stall, size_t* got) override {
    auto* dst = static_cast<char*>(buf);
    *got = 0;
    while (*got < size) {
      Millis wait = std::min(*got == 0 ? first : stall, LeftUntil(deadline_));
      size_t n = 0;
      TC_RETURN_IF_ERROR(ch_.Read(dst + *got, 1, wait, wait, &n));
      if (n == 0) return Status::Ok();  // end of stream
      *got += n;
    }
    return Status::Ok();
  }

  void Shutdown() override { ch_.Shutdown(); }
  const std::string& peer_address() const override { return ch_.peer_address(); }

 private:
  ByteChannel& ch_;
  const Clock::time_point deadline_;
};

// Frame I/O bounded by one deadline for the whole handshake, with messages
// that name the peer.
class HandshakeIo {
 public:
  HandshakeIo(ByteChannel& ch, const HandshakeParams& params)
      : timeout_(params.timeout),
        deadline_(DeadlineAfter(params.timeout)),
        on_refuse_(params.on_refuse),
        ch_(ch, deadline_),
        who_("peer " + ch.peer_address()) {}

  const std::string& who() const { return who_; }
  void SetPeerNode(std::string_view node) {
    who_ = "peer " + ch_.peer_address() + " (claims node " + std::string(node) + ")";
  }

  Status Send(FrameKind kind, std::string_view payload) {
    PeerFrameHeader h;
    h.version = kHandshakeFrameVersion;
    h.kind = kind;
    Status s = WriteFrame(ch_, h, payload, Left(), who_);
    if (s.code() == Code::kTimeout)
      return TimedOut(std::string("sending our ") + std::string(FrameKindName(kind)));
    return s;
  }

  // Best effort: tells the peer why it is turned away (after on_refuse).
  void SendReject(const Status& why, std::string_view message) {
    if (on_refuse_) on_refuse_(why);
    RejectPayload r{static_cast<uint32_t>(why.code()), std::string(message)};
    PeerFrameHeader h;
    h.version = kHandshakeFrameVersion;
    h.kind = FrameKind::kReject;
    WriteFrame(ch_, h, r.Encode(), std::min(Left(), kRejectWait), who_).IgnoreError();
  }

  // Reads the next frame, which must be of kind `want` (a Reject becomes the
  // peer's error; any other kind is refused).
  Result<Received> Expect(FrameKind want) {
    bool idle = false;
    Millis left = Left();
    Result<PeerFrameHeader> h = ReadFrameHeader(ch_, left, left, who_, kHandshakeFrameVersion, &idle);
    if (!h.ok()) {
      if (h.status().code() == Code::kTimeout)
        return TimedOut("waiting for its " + std::string(FrameKindName(want)));
      return h.status().WithContext("during the handshake");
    }
    Result<std::string> payload = ReadPayload(ch_, *h, Left(), who_);
    if (!payload.ok()) {
      if (payload.status().code() == Code::kTimeout) {
        return TimedOut("reading its " + std::string(FrameKindName(h->kind)));
      }
      return payload.status().WithContext("during the handshake");
    }
    if (h->kind == want) return Received{*h, std::move(*payload)};
    if (h->kind == FrameKind::kReject) {
      Result<RejectPayload> r = RejectPayload::Decode(*payload);
      if (!r.ok()) return ProtocolError(who_ + " sent a malformed Reject: " + r.status().message());
      Code code = CodeFromNumber(r->code);
      if (code == Code::kOk) code = Code::kPermissionDenied;
      return Status(code, who_ + " rejected the handshake: " + r->message);
    }
    bool handshake_kind =
        h->kind == FrameKind::kHello || h->kind == FrameKind::kProof || h->kind == FrameKind::kReady;
    if (!handshake_kind) {
      return PermissionDenied(
          who_ + " sent a " + std::string(FrameKindName(h->kind)) +
          " frame before authenticating; a peer must complete the handshake with the cluster "
          "secret first");
    }
    return ProtocolError(who_ + ": frame header field kind: a " + std::string(FrameKindName(h->kind)) +
                         " frame arrived where the handshake expects " + std::string(FrameKindName(want)));
  }

 private:
  Millis Left() const { return LeftUntil(deadline_); }

  Status TimedOut(const std::string& doing) const {
    return Timeout(who_ + " did not complete the handshake within " + std::to_string(timeout_.count()) +
                   " ms (" + doing + "); is this a tierckpt agent's peer port, and is the peer alive?");
  }

  const Millis timeout_;
  const Clock::time_point deadline_;
  const std::function<void(const Status&)>& on_refuse_;  // params.on_refuse (outlives this)
  DeadlineChannel ch_;  // reads end at deadline_
  std::string who_;
};

Result<HelloPayload> DecodeHello(HandshakeIo& io, const Received& r, Role want_role) {
  Result<HelloPayload> hello = HelloPayload::Decode(r.payload);
  if (!hello.ok()) return ProtocolError(io.who() + ": " + hello.status().message());
  if (hello->role != want_role) {
    return ProtocolError(io.who() + ": payload field Hello.role says " + std::string(RoleName(hello->role)) +
                         " where a " + std::string(RoleName(want_role)) + " was expected");
  }
  io.SetPeerNode(hello->node_id);
  return hello;
}

Result<ProofPayload> DecodeProof(HandshakeIo& io, const Received& r) {
  Result<ProofPayload> proof = ProofPayload::Decode(r.payload);
  if (!proof.ok()) return ProtocolError(io.who() + ": " + proof.status().message());
  return proof;
}

Status CheckParams(const HandshakeParams& p) {
  if (p.secret == nullptr || p.secret->empty()) {
    return FailedPrecondition("no cluster secret is configured; every agent needs the same secret");
  }
  return Status::Ok();
}

// Rejects the peer (best effort) and returns why.
Status Refuse(HandshakeIo& io, Status why, std::string_view told) {
  io.SendReject(why, told);
  return why;
}

}  // namespace

Result<uint16_t> NegotiateVersion(uint16_t our_min, uint16_t our_max, uint16_t their_min, uint16_t their_max,
                                  std::string_view who) {
  uint16_t hi = std::min(our_max, their_max);
  uint16_t lo = std::max(our_min, their_min);
  if (hi < lo) {
    return ProtocolError(std::string(who) + " speaks peer protocol versions " + std::to_string(their_min) +
                         ".." + std::to_string(their_max) + "; this build speaks " + std::to_string(our_min) +
                         ".." + std::to_string(our_max) + ": run compatible tierckpt versions on every node");
  }
  return hi;
}

Result<PeerInfo> ClientHandshake(ByteChannel& ch, const HandshakeParams& params) {
  TC_RETURN_IF_ERROR(CheckParams(params));
  HandshakeIo io(ch, params);
  TC_ASSIGN_OR_RETURN(std::string nonce_c, MakeNonce());
  HelloPayload ours{Role::kClient, kMinPeerProtocolVersion, kMaxPeerProtocolVersion,
                    std::string(params.node_id), nonce_c};
  TC_RETURN_IF_ERROR(io.Send(FrameKind::kHello, ours.Encode()));

  TC_ASSIGN_OR_RETURN(Received r, io.Expect(FrameKind::kHello));
  TC_ASSIGN_OR_RETURN(HelloPayload hello, DecodeHello(io, r, Role::kServer));
  Result<uint16_t> version = NegotiateVersion(kMinPeerProtocolVersion, kMaxPeerProtocolVersion,
                                              hello.min_version, hello.max_version, io.who());
  if (!version.ok()) return Refuse(io, version.status(), version.status().message());
  if (!params.expected_node_id.empty() && hello.node_id != params.expected_node_id) {
    return Refuse(
        io,
        FailedPrecondition(io.who() + " is not the expected node " + std::string(params.expected_node_id) +
                           "; the address belongs to another agent (stale placement or hostfile?)"),
        "this client expected node " + std::string(params.expected_node_id));
  }
  ProofInput mine{Role::kClient, params.node_id, hello.node_id, nonce_c, hello.nonce, *version};
  TC_RETURN_IF_ERROR(io.Send(FrameKind::kProof, ProofPayload{ComputeProof(*params.secret, mine)}.Encode()));

  Result<Received> answer = io.Expect(FrameKind::kProof);
  if (!answer.ok()) {
    if (answer.status().code() == Code::kPermissionDenied) {
      return answer.status().WithContext(
          "our proof of the cluster secret was refused; give every agent the same secret");
    }
    return answer.status();
  }
  TC_ASSIGN_OR_RETURN(ProofPayload proof, DecodeProof(io, *answer));
  if (proof.mac.empty()) {
    return Refuse(
        io,
        PermissionDenied(io.who() + " presented no proof of the cluster secret (it has none configured); "
                                    "refusing it: configure the same cluster secret on every agent"),
        "you presented no proof of the cluster secret");
  }
  ProofInput theirs{Role::kServer, hello.node_id, params.node_id, nonce_c, hello.nonce, *version};
  if (!VerifyProof(*params.secret, theirs, proof.mac)) {
    return Refuse(
        io,
        PermissionDenied(io.who() + " failed to prove it knows the cluster secret (the secrets differ, or "
                                    "it is not a member of this cluster); refusing it"),
        "your proof of the cluster secret is wrong; the agents' secrets differ");
  }
  TC_RETURN_IF_ERROR(io.Send(FrameKind::kReady, ""));
  return PeerInfo{ch.peer_address(), hello.node_id, *version};
}

Result<PeerInfo> ServerHandshake(ByteChannel& ch, const HandshakeParams& params) {
  TC_RETURN_IF_ERROR(CheckParams(params));
  HandshakeIo io(ch, params);
  Result<Received> first = io.Expect(FrameKind::kHello);
  if (!first.ok()) {
    Code c = first.status().code();
    if (c == Code::kPermissionDenied || c == Code::kProtocolError) {
      return Refuse(io, first.status(), first.status().message());
    }
    return first.status();
  }
  Result<HelloPayload> hello = DecodeHello(io, *first, Role::kClient);
  if (!hello.ok()) return Refuse(io, hello.status(), hello.status().message());
  Result<uint16_t> version = NegotiateVersion(kMinPeerProtocolVersion, kMaxPeerProtocolVersion,
                                              hello->min_version, hello->max_version, io.who());
  if (!version.ok()) return Refuse(io, version.status(), version.status().message());

  TC_ASSIGN_OR_RETURN(std::string nonce_s, MakeNonce());
  HelloPayload ours{Role::kServer, kMinPeerProtocolVersion, kMaxPeerProtocolVersion,
                    std::string(params.node_id), nonce_s};
  TC_RETURN_IF_ERROR(io.Send(FrameKind::kHello, ours.Encode()));

  Result<Received> r = io.Expect(FrameKind::kProof);
  if (!r.ok()) {
    if (r.status().code() == Code::kPermissionDenied || r.status().code() == Code::kProtocolError) {
      return Refuse(io, r.status(), r.status().message());
    }
    return r.status();
  }
  Result<ProofPayload> proof = DecodeProof(io, *r);
  if (!proof.ok()) return Refuse(io, proof.status(), proof.status().message());
  if (proof->mac.empty()) {
    return Refuse(
        io,
        PermissionDenied(io.who() + " presented no proof of the cluster secret; rejected. Configure the "
                                    "same cluster secret on every agent"),
        "no proof of the cluster secret was presented; configure the cluster secret on this agent");
  }
  ProofInput theirs{Role::kClient, hello->node_id, params.node_id, hello->nonce, nonce_s, *version};
  if (!VerifyProof(*params.secret, theirs, proof->mac)) {
    return Refuse(
        io,
        PermissionDenied(io.who() + " presented a wrong proof of the cluster secret (the secrets differ, "
                                    "or it is not a member of this cluster); rejected"),
        "the proof of the cluster secret is wrong: this agent's secret differs from yours");
  }
  ProofInput mine{Role::kServer, params.node_id, hello->node_id, hello->nonce, nonce_s, *version};
  TC_RETURN_IF_ERROR(io.Send(FrameKind::kProof, ProofPayload{ComputeProof(*params.secret, mine)}.Encode()));

  Result<Received> ready = io.Expect(FrameKind::kReady);
  if (!ready.ok()) return ready.status();
  if (!ready->payload.empty()) {
    return ProtocolError(io.who() + ": a Ready frame must have no payload; it has " +
                         std::to_string(ready->payload.size()) + " bytes");
  }
  return PeerInfo{ch.peer_address(), hello->node_id, *version};
}

}  // namespace tierckpt::peer
