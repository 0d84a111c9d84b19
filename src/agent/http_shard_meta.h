// http_shard_meta.h — the `Shard-Meta` header of the checkpoint HTTP API
// (agent/http_api.h): {"checksum": "<base64 of the 16-byte XXH3-128 digest,
// canonical (big-endian) order>", "algorithm": "xxh3_128"}, as
// amzn-sagemaker-checkpointing 1.1.3 writes and checks it (xxhash's
// xxh3_128().digest(), base64 with padding).
//
// The memory tier's own checksum is XXH3-64 (common/checksum.h); a shard's
// bytes are hashed both ways in the one pass that copies them (ShardHasher),
// so the 128-bit digest is never stored: a GET hashes the bytes it serves.
//
// Pure functions and a streaming state (one per body, not thread-safe).
#pragma once

#include <xxhash.h>

#include <optional>
#include <string>
#include <string_view>

#include "common/checksum.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr std::string_view kShardMetaHeader = "Shard-Meta";
inline constexpr std::string_view kShardMetaAlgorithm = "xxh3_128";

// The base64 XXH3-128 digest a Shard-Meta header carries; nullopt for an
// absent (empty) header. kInvalidArgument naming what is wrong with the
// header and the form it must have.
Result<std::optional<std::string>> ParseShardMeta(std::string_view header);
// The header for a digest (base64, as ShardHasher::Digest128 spells it).
std::string FormatShardMeta(std::string_view digest_base64);

class ShardHasher {
 public:
  ShardHasher();
  ~ShardHasher();
  ShardHasher(const ShardHasher&) = delete;
  ShardHasher& operator=(const ShardHasher&) = delete;

  void Update(const void* data, size_t size);
  Checksum Checksum64();    // the memory tier's checksum of the bytes so far
  std::string Digest128();  // base64 of the canonical XXH3-128 digest so far

 private:
  XXH3_state_t* s128_;
  Hasher h64_;
};

}  // namespace tierckpt::agent
