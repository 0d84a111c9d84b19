// auth.h — the cluster secret and the HMAC-SHA256 challenge/response that
// authenticates both ends of a peer connection.
//
// Every agent of a cluster holds the same secret (bytes the caller loads
// from a file or the environment; see ClusterSecret::FromBytes). At connect
// time each side sends a fresh random 32-byte nonce in its Hello; each then
// proves it knows the secret with
//
//   mac = HMAC-SHA256(secret, "tierckpt-peer-auth-v1" || u8 role ||
//                     str own_node_id || str peer_node_id ||
//                     str client_nonce || str server_nonce || u16 version)
//
// (strings as wire::Encoder spells them: u32 length + bytes), so a proof is
// bound to the role, both node ids, both nonces and the negotiated version:
// it cannot be replayed on another connection or reflected back as the other
// role. Proofs are compared in constant time (CRYPTO_memcmp). This
// authenticates the handshake only; the bytes that follow are neither
// encrypted nor authenticated (streams carry an XXH3 checksum against
// accidents, not attackers): run agents on a trusted network.
//
// Thread safety: ClusterSecret is an immutable value once built (copies are
// independent; each wipes its bytes on destruction). The functions are
// thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "peer/peer_frame.h"
#include "tierckpt/status.h"

namespace tierckpt::peer {

inline constexpr size_t kMinSecretBytes = 16;
inline constexpr size_t kMaxSecretBytes = 4096;

class ClusterSecret {
 public:
  // An empty secret (the state of a default-constructed one): Connect and
  // Listen refuse to run with it.
  ClusterSecret() = default;
  ~ClusterSecret();
  ClusterSecret(const ClusterSecret& o) : bytes_(o.bytes_) {}
  ClusterSecret& operator=(const ClusterSecret& o);
  ClusterSecret(ClusterSecret&& o) noexcept;
  ClusterSecret& operator=(ClusterSecret&& o) noexcept;

  // kInvalidArgument unless kMinSecretBytes..kMaxSecretBytes bytes. Any bytes
  // are allowed (a secret file's trailing newline is the caller's to strip).
  static Result<ClusterSecret> FromBytes(std::string_view bytes);

  bool empty() const { return bytes_.empty(); }
  size_t size() const { return bytes_.size(); }
  // The raw bytes, for HMAC only. Never log them.
  std::string_view bytes() const { return bytes_; }

 private:
  void Wipe();
  std::string bytes_;
};

// kNonceSize bytes from the OpenSSL CSPRNG (RAND_bytes); kInternal if the
// generator fails.
Result<std::string> MakeNonce();

// HMAC-SHA256(key, data): 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

struct ProofInput {
  Role role = Role::kClient;  // who proves
  std::string_view own_node_id;
  std::string_view peer_node_id;
  std::string_view client_nonce;
  std::string_view server_nonce;
  uint16_t version = kPeerProtocolVersion;
};

// The mac (kMacSize bytes) the prover of `in.role` sends.
std::string ComputeProof(const ClusterSecret& secret, const ProofInput& in);
// Whether mac is the proof of `in` under secret; constant time in the mac's
// bytes. An empty or wrongly sized mac is false.
bool VerifyProof(const ClusterSecret& secret, const ProofInput& in, std::string_view mac);

}  // namespace tierckpt::peer
