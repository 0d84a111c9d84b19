// fault_transport.h — a Transport wrapper that injects scripted faults.
// Test-only: library tc_testing_peer, linked by tests, never by tierckptd, the CLI or
// the Python extension.
//
// FaultInjectingTransport forwards to a base transport and, following a small
// fault plan, makes some connects fail and some messages get lost, damaged,
// stuck or slow, so tests of the replicator and the restorer can drive them
// through the failures of a real network without mocks. With an empty plan it
// is transparent (it passes the conformance suite). Connections it makes
// (Connect) and accepts (Listen → Accept) are wrapped; the faults act on what
// they send. Streams go through the wrapper chunk by chunk (SendStream hashes
// the true bytes, then the wrapper alters what goes on the wire), so a
// corrupted stream really arrives with a checksum mismatch.
//
// The plan (all entries stay until ClearFaults(); they combine). Calls are
// counted across every connection of this transport, from now:
//   FailNthConnect(n, status)   the n-th Connect (n = 0 or 1: the next) fails
//                               with status without reaching the base; once.
//   FailEveryConnect(status)    every Connect fails that way.
//   DropNthSend(n)              the n-th control Send closes the connection
//                               instead of sending (the peer sees it close);
//                               the caller gets kUnavailable.
//   CorruptNthStream(n, offset) the n-th stream begun has its byte at
//                               `offset` inverted (x ^ 0xff) on the wire; the
//                               sender's checksum is of the true bytes, so the
//                               receiver reports kCorruption. Only the one
//                               chunk holding the byte is copied (bounded).
//                               An offset past the end alters nothing.
//   StallNthStream(n, after)    the n-th stream sends its first `after` bytes,
//                               then goes silent, as a frozen sender would:
//                               the send returns kAborted, the connection
//                               stays open and sends nothing more (every
//                               later send on it fails the same way), so the
//                               receiver times out.
//   TruncateNthStream(n, after) the n-th stream sends `after` bytes, then the
//                               connection closes, as if the sender died; the
//                               send returns kUnavailable.
//   DelayEverySend(delay)       every control frame and every chunk waits
//                               `delay` before it goes (a slow link).
// An injected Status keeps its code; its message starts with
// "injected fault on <what> #<k>". An ok status given to FailNthConnect or
// FailEveryConnect becomes kUnavailable "injected: connection refused".
//
// Observation: ConnectCount(), SendCount(), StreamCount() count every call
// since construction, failed ones included; SendBytes() adds up the payload
// bytes of every Send (control frames: requests and answers) and
// LargestSend() is the largest of them; InjectedFaults() counts faults.
//
// Thread safety: as Transport/Connection (transport.h); the plan is shared
// by the transport and its connections (they may outlive the transport) and
// guarded by one mutex, never held while the base runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "peer/transport.h"

namespace tierckpt::peer {

struct FaultPlan;

class FaultInjectingTransport final : public Transport {
 public:
  // Precondition: base != nullptr.
  explicit FaultInjectingTransport(std::shared_ptr<Transport> base);
  ~FaultInjectingTransport() override;

  // ---- the fault plan (see the header comment) ----
  void FailNthConnect(uint64_t n, Status status);
  void FailEveryConnect(Status status);
  void DropNthSend(uint64_t n);
  void CorruptNthStream(uint64_t n, uint64_t offset);
  void StallNthStream(uint64_t n, uint64_t after_bytes);
  void TruncateNthStream(uint64_t n, uint64_t after_bytes);
  void DelayEverySend(Millis delay);
  void ClearFaults();

  // ---- observation ----
  uint64_t ConnectCount() const;
  uint64_t SendCount() const;
  uint64_t SendBytes() const;
  uint64_t LargestSend() const;
  uint64_t StreamCount() const;
  uint64_t InjectedFaults() const;

  // ---- Transport ----
  std::string Describe() const override;
  Result<std::unique_ptr<Listener>> Listen(const std::string& address) override;
  Result<std::unique_ptr<Connection>> Connect(const std::string& address, Millis timeout,
                                              std::string_view expected_node_id = {}) override;

 private:
  const std::shared_ptr<Transport> base_;
  const std::shared_ptr<FaultPlan> plan_;
};

}  // namespace tierckpt::peer
