// handshake.h — the mutual authentication that opens every peer connection.
//
//   client                                   server
//   Hello{client, versions, node, nonce_c} →
//                                          ← Hello{server, versions, node, nonce_s}
//   Proof{mac_c}                           →   (server checks mac_c)
//                                          ← Proof{mac_s}  or  Reject{code, why}
//   (client checks mac_s)
//   Ready                                  →   or  Reject{code, why}
//
// The server proves itself only after the client has, so a peer without the
// secret learns nothing it could replay. Either side answers a bad proof, an
// unexpected frame or a version it cannot speak with a Reject (best effort)
// and closes. Until Ready/Proof is checked no other frame kind is accepted:
// a peer that skips the handshake is kPermissionDenied. The versions: each
// Hello gives [min, max]; both pick the highest common one (kProtocolError
// when there is none). Handshake frames carry version 1 in their header.
//
// Errors (returned; logging is the caller's, e.g. from on_refuse): kPermissionDenied "peer X
// (claims node N) presented no proof / a wrong proof of the cluster
// secret..." or "... rejected our proof ...", kProtocolError for malformed
// frames, kTimeout when the whole handshake does not finish within timeout,
// kFailedPrecondition when the server is not expected_node_id.
//
// Thread safety: each call uses its channel exclusively.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "peer/auth.h"
#include "peer/byte_channel.h"
#include "peer/transport.h"

namespace tierckpt::peer {

struct HandshakeParams {
  std::string_view node_id;  // ours
  const ClusterSecret* secret = nullptr;
  Millis timeout{10000};              // for the whole handshake
  std::string_view expected_node_id;  // client only; empty = any
  // Called with the error just before a Reject leaves for the peer, so the
  // caller can log the refusal before the peer can observe it. Optional.
  std::function<void(const Status& why)> on_refuse;
};

// Returns the authenticated peer (address, node id, version).
Result<PeerInfo> ClientHandshake(ByteChannel& ch, const HandshakeParams& params);
Result<PeerInfo> ServerHandshake(ByteChannel& ch, const HandshakeParams& params);

// Picks the highest version in both [min, max] ranges; kProtocolError naming
// both ranges when they do not overlap.
Result<uint16_t> NegotiateVersion(uint16_t our_min, uint16_t our_max, uint16_t their_min, uint16_t their_max,
                                  std::string_view who);

}  // namespace tierckpt::peer
