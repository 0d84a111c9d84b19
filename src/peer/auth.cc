#include "peer/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <utility>

#include "wire/protocol.h"

namespace tierckpt::peer {
namespace {
constexpr std::string_view kProofLabel = "tierckpt-peer-auth-v1";
}  // namespace

ClusterSecret::~ClusterSecret() { Wipe(); }

ClusterSecret& ClusterSecret::operator=(const ClusterSecret& o) {
  if (this != &o) {
    Wipe();
    bytes_ = o.bytes_;
  }
  return *this;
}

ClusterSecret::ClusterSecret(ClusterSecret&& o) noexcept : bytes_(std::move(o.bytes_)) { o.Wipe(); }

ClusterSecret& ClusterSecret::operator=(ClusterSecret&& o) noexcept {
  if (this != &o) {
    Wipe();
    bytes_ = std::move(o.bytes_);
    o.Wipe();
  }
  return *this;
}

void ClusterSecret::Wipe() {
  if (!bytes_.empty()) OPENSSL_cleanse(bytes_.data(), bytes_.size());
  bytes_.clear();
}

Result<ClusterSecret> ClusterSecret::FromBytes(std::string_view bytes) {
  if (bytes.size() < kMinSecretBytes || bytes.size() > kMaxSecretBytes) {
    return InvalidArgument("the cluster secret has " + std::to_string(bytes.size()) + " bytes; it needs " +
                           std::to_string(kMinSecretBytes) + " to " + std::to_string(kMaxSecretBytes) +
                           " (make one with `head -c 32 /dev/urandom > secret` and give every agent "
                           "the same file)");
  }
  ClusterSecret s;
  s.bytes_.assign(bytes.data(), bytes.size());
  return s;
}

Result<std::string> MakeNonce() {
  std::string nonce(kNonceSize, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return Internal("the OpenSSL random generator (RAND_bytes) failed to produce a handshake nonce");
  }
  return nonce;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &out_len);
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

namespace {
std::string ProofMessage(const ProofInput& in) {
  wire::Encoder e;
  e.Str(kProofLabel);
  e.U8(static_cast<uint8_t>(in.role));
  e.Str(in.own_node_id);
  e.Str(in.peer_node_id);
  e.Str(in.client_nonce);
  e.Str(in.server_nonce);
  e.U16(in.version);
  return e.Take();
}
}  // namespace

std::string ComputeProof(const ClusterSecret& secret, const ProofInput& in) {
  return HmacSha256(secret.bytes(), ProofMessage(in));
}

bool VerifyProof(const ClusterSecret& secret, const ProofInput& in, std::string_view mac) {
  if (secret.empty() || mac.size() != kMacSize) return false;
  std::string expected = ComputeProof(secret, in);
  return expected.size() == kMacSize && CRYPTO_memcmp(expected.data(), mac.data(), kMacSize) == 0;
}

}  // namespace tierckpt::peer
