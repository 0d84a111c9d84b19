// transport.h — the peer transport between node agents: authenticated
// connections that carry small control messages and large objects streamed
// from memory to memory.
//
// A Transport makes Listeners (Listen) and Connections (Connect). Both ends of
// a connection are authenticated with the cluster secret before any message
// (peer/auth.h), and each knows the other's node id and the protocol version.
// Implementations: TcpTransport and InMemoryTransport (peer/channel_transport.h)
// and FaultInjectingTransport (testing/fault_transport.h, tests only), which wraps another.
// An RDMA or UCX transport implements these interfaces directly. The wire
// format is in peer/peer_frame.h and docs/peer-protocol.md.
//
// Messages. A Connection carries, in each direction, a sequence of messages:
//   - control frames (Frame: an application type, a request id and up to
//     kMaxControlPayload bytes): Send / Receive;
//   - streams: one object of any size sent from the caller's buffer in chunks
//     of chunk_bytes() (BeginStream, SendStreamChunk..., EndStream, or
//     SendStream for a buffer in one call) and received straight into the
//     receiver's buffer (Receive returns the stream's header, then
//     ReceiveStreamBody(dest); or ReceiveStream with a sink that picks dest
//     once it knows the size). Neither side copies the object through a
//     buffer of its own, so memory stays bounded by a chunk whatever the
//     object's size. The sender hashes the bytes (XXH3-64) as they go, or
//     passes the checksum it already holds (SendStreamKnown), and sends the
//     checksum last; the receiver hashes what lands and fails with
//     kCorruption on a mismatch.
// Messages do not interleave within a direction: while a stream is being
// sent, only its chunks, EndStream or AbortStream may be sent.
//
// Timeouts. Every blocking call is bounded. Receive(timeout) waits up to
// `timeout` for the next message to begin; once a message has begun, and
// for every send, a call fails with kTimeout when the peer moves no byte for
// ConnectionOptions::io_timeout (a stalled peer; TCP backpressure blocks a
// sender only while the peer keeps reading).
//
// Errors and the connection's state. A Receive that times out before any
// byte arrived, kCorruption (checksum mismatch; the stream was read to its
// end), kAborted (the sender aborted the stream), misuse (kInvalidArgument,
// kFailedPrecondition) and a sink's own error leave the connection usable.
// Every other failure (I/O, a timeout mid-message, kProtocolError for a
// malformed frame, the peer closing) closes it: later calls fail with
// kUnavailable naming the first error; reconnect. Errors name the peer's
// address and node id.
//
// Thread safety: a Connection has a send side (Send, BeginStream,
// SendStreamChunk, EndStream, AbortStream, SendStream) and a receive side
// (Receive, ReceiveStreamBody, DiscardStream, ReceiveStream). Each side is
// used by one thread at a time; the two sides may run concurrently (a
// request/response pipeline). Close(), peer(), stats() are safe from any
// thread; Close() wakes blocked calls on both sides. A Listener's Accept
// may be called from several threads; Close() is safe from any thread.
// Transports are thread-safe.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/checksum.h"
#include "peer/auth.h"
#include "peer/byte_channel.h"
#include "tierckpt/status.h"

namespace tierckpt::peer {

struct Frame {
  uint16_t type = 0;        // the application's message type
  uint32_t request_id = 0;  // the application's; echo it in replies
  std::string payload;      // <= kMaxControlPayload bytes
};

struct StreamHeader {
  uint16_t type = 0;        // the application's message type for this object
  uint32_t request_id = 0;  // the application's
  uint64_t object_id = 0;   // the application's id for the object; every
                            // chunk and the end frame carry it
  uint64_t size = 0;        // total bytes of the object
  std::string metadata;     // the application's description of the object
                            // (e.g. namespace, step, name), <= kMaxStreamMetadata
};

struct Message {
  enum class Kind { kControl, kStream };
  Kind kind = Kind::kControl;
  Frame frame;          // kControl: the whole frame
  StreamHeader stream;  // kStream: the header; the body follows (see Receive)
};

struct ReceivedStream {
  StreamHeader header;
  Checksum checksum;  // verified: the checksum the sender computed
};

// Given a stream's header, returns where its bytes go: at least header.size
// bytes that stay valid until ReceiveStream returns. An error refuses the
// stream (it is discarded and the error returned).
using StreamSink = std::function<Result<std::span<uint8_t>>(const StreamHeader&)>;

// Takes one received piece of a stream: its offset in the object, its bytes.
using StreamPieceWriter = std::function<Status(uint64_t offset, const uint8_t* data, size_t size)>;

struct PeerInfo {
  std::string address;   // the far end's address as seen from here
  std::string node_id;   // authenticated in the handshake
  uint16_t version = 0;  // negotiated protocol version
};

struct ConnectionStats {
  uint64_t bytes_sent = 0;  // frame headers and payloads
  uint64_t bytes_received = 0;
  uint64_t messages_sent = 0;  // control frames and whole streams
  uint64_t messages_received = 0;
  uint64_t stream_bytes_sent = 0;  // object bytes only
  uint64_t stream_bytes_received = 0;
};

struct ConnectionOptions {
  // How long any send or any in-message read may go without progress.
  Millis io_timeout{30000};
  // Bytes per StreamData frame (1 .. kMaxChunkBytes); SendStream also
  // hashes in pieces of this size.
  size_t chunk_bytes = 1u << 20;
};

class Connection {
 public:
  virtual ~Connection() = default;

  virtual const PeerInfo& peer() const = 0;
  // "peer 10.0.0.2:7100 (node n2)", for messages.
  std::string Describe() const;

  // ---- send side ----

  // Sends one control frame. kInvalidArgument for a payload above
  // kMaxControlPayload; kFailedPrecondition while a stream is open.
  virtual Status Send(const Frame& frame) = 0;

  // Opens a stream of header.size bytes. kFailedPrecondition while another
  // is open; kInvalidArgument for metadata above kMaxStreamMetadata.
  virtual Status BeginStream(const StreamHeader& header) = 0;
  // Sends the next size bytes of the open stream from data (split into
  // frames of at most chunk_bytes()). kInvalidArgument beyond header.size.
  virtual Status SendStreamChunk(const void* data, size_t size) = 0;
  // Closes the stream; checksum is the XXH3-64 of all its bytes, which the
  // receiver verifies. kFailedPrecondition unless exactly header.size bytes
  // were sent (send the rest or AbortStream).
  virtual Status EndStream(Checksum checksum) = 0;
  // Abandons the open stream; the receiver gets kAborted with the reason.
  virtual Status AbortStream(std::string_view reason) = 0;
  // The chunk size SendStream uses.
  virtual size_t chunk_bytes() const = 0;

  // Streams size bytes at data as one object (header.size must equal size):
  // BeginStream, then per chunk: hash it, SendStreamChunk; then EndStream
  // with the checksum. To time a transfer (benchmarks), time this call on
  // the sender and ReceiveStream on the receiver; stats() counts the bytes.
  virtual Status SendStream(const StreamHeader& header, const void* data, size_t size);
  // SendStream for bytes whose XXH3-64 the caller already holds (an object
  // hashed when it was committed): no hashing on this side, `known` goes out
  // as the stream's checksum. The receiver still hashes what lands, so bytes
  // damaged at rest since `known` was taken fail there with kCorruption.
  Status SendStreamKnown(const StreamHeader& header, const void* data, size_t size, Checksum known);

  // ---- receive side ----

  // Waits up to timeout for the next message. A control frame comes whole.
  // For a stream only its header is read: the caller must then call
  // ReceiveStreamBody or DiscardStream (kFailedPrecondition until then).
  // kTimeout when nothing arrived (the connection stays usable).
  virtual Result<Message> Receive(Millis timeout) = 0;
  // Receives the announced stream into dest (dest.size() >= header.size,
  // else kInvalidArgument and the stream stays pending). Returns the
  // verified checksum; kCorruption when the bytes do not match the sender's
  // checksum (dest then holds damaged bytes: discard them), kAborted when the
  // sender aborted; the connection stays usable after both.
  virtual Result<Checksum> ReceiveStreamBody(std::span<uint8_t> dest) = 0;
  // Receives the announced stream through a bounded buffer of the
  // connection's own (one piece, 256 KiB at most), handing each piece to
  // write(offset, bytes, size) in order, hashed before it is handed over.
  // Returns the verified checksum as ReceiveStreamBody does (kCorruption on a
  // mismatch: what was written is damaged). For destinations that are not
  // memory, e.g. a fresh tmpfs file written with pwrite (no page zeroing).
  // An error from write ends the call with that error and closes the
  // connection (the rest of the stream is not read).
  virtual Result<Checksum> ReceiveStreamPieces(const StreamPieceWriter& write) = 0;
  // Reads and drops the announced stream's bytes (bounded memory).
  virtual Status DiscardStream() = 0;

  // Receive + sink + ReceiveStreamBody. A control frame arriving instead is
  // consumed and reported as kProtocolError (the connection stays usable).
  Result<ReceivedStream> ReceiveStream(const StreamSink& sink, Millis timeout);

  // ---- any thread ----

  // Closes the connection: blocked and later calls fail with kUnavailable;
  // the peer sees the connection close. Idempotent.
  virtual void Close() = 0;
  virtual ConnectionStats stats() const = 0;

 private:
  Status SendStreamImpl(const StreamHeader& header, const void* data, size_t size, std::optional<Checksum> known);
};

class Listener {
 public:
  virtual ~Listener() = default;  // implementations Close()

  // The bound address (port 0 replaced by the real port); give it to peers.
  virtual const std::string& address() const = 0;
  // The next authenticated connection, waiting up to timeout: kTimeout if
  // none, kUnavailable once closed. Handshakes run in the background, so a
  // slow or hostile peer never delays others; failed ones are logged and
  // reported to TransportOptions::on_handshake_failed.
  virtual Result<std::unique_ptr<Connection>> Accept(Millis timeout) = 0;
  // Stops listening, aborts handshakes in progress and drops connections
  // not yet accepted. Idempotent; wakes Accept.
  virtual void Close() = 0;
};

struct TransportOptions {
  std::string node_id;   // this agent's (ValidateNodeId)
  ClusterSecret secret;  // shared by every agent of the cluster
  ConnectionOptions connection;
  // Until a peer that connected to a Listener has proved the secret it is a
  // stranger, and these bound what strangers can hold (docs/peer-protocol.md,
  // "Strangers on the peer port"). Authenticated connections count against
  // none of them.
  //
  // The handshake deadline: a hard limit from the accept, however the peer
  // trickles its bytes; then it is dropped (kTimeout). Separate from, and
  // much shorter than, connection.io_timeout: an agent answers a handshake
  // in milliseconds.
  Millis handshake_timeout{5000};
  // Handshakes a Listener runs at once, from every source together. A
  // newcomer beyond it is let in and the oldest pending handshake dropped
  // (kResourceExhausted): a stranger holding a slot makes room for the next
  // peer rather than locking it out.
  size_t max_pending_handshakes = 128;
  // Handshakes pending from one source (tcp_socket.h PeerSource: an IPv4
  // address or an IPv6 /64). A newcomer beyond it drops that source's own
  // oldest pending handshake, so one host can never displace another's.
  size_t max_pending_handshakes_per_source = 16;
  // Authenticated connections a Listener queues for Accept; more are refused.
  size_t max_unaccepted = 256;
  // Called (on a listener thread) for every peer a Listener turned away:
  // kPermissionDenied (no or wrong secret), kProtocolError (malformed
  // frames), kTimeout (past the handshake deadline), kResourceExhausted
  // (dropped for a newer handshake, or the Accept queue full). Every one is
  // reported here; the log gets them rate-limited. Must not block for long,
  // nor close the listener (it runs on the listener's threads).
  std::function<void(const std::string& peer_address, const Status& why)> on_handshake_failed;
};

// Checks node_id, secret (non-empty), chunk_bytes and the timeouts;
// kInvalidArgument naming the field otherwise.
Status ValidateTransportOptions(const TransportOptions& options);

class Transport {
 public:
  virtual ~Transport() = default;

  // "tcp", "in-memory", "fault(tcp)": for messages.
  virtual std::string Describe() const = 0;
  // Starts listening at address (the transport's syntax; TCP "host:port",
  // port 0 for an ephemeral port). Errors name the address.
  virtual Result<std::unique_ptr<Listener>> Listen(const std::string& address) = 0;
  // Connects and authenticates within timeout (connect + handshake).
  // kPermissionDenied when either side's proof fails (logged), kTimeout when
  // the peer does not answer in time, kUnavailable when nobody listens.
  // A non-empty expected_node_id must match the peer's authenticated node
  // id (kFailedPrecondition otherwise: the address points at another node).
  virtual Result<std::unique_ptr<Connection>> Connect(const std::string& address, Millis timeout,
                                                      std::string_view expected_node_id = {}) = 0;
};

}  // namespace tierckpt::peer
