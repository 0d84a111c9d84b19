// http_shard_meta.cc — see http_shard_meta.h.
#include "agent/http_shard_meta.h"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "common/names.h"

namespace tierckpt::agent {

Result<std::optional<std::string>> ParseShardMeta(std::string_view header) {
  if (header.empty()) return std::optional<std::string>();
  auto bad = [&](std::string_view why) {
    return InvalidArgument("the Shard-Meta header " + QuoteForMessage(header.substr(0, 200)) + " " +
                           std::string(why) +
                           "; send {\"checksum\": \"<base64 of the XXH3-128 digest of the body>\", "
                           "\"algorithm\": \"xxh3_128\"}");
  };
  nlohmann::json j = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("is not a JSON object");
  const auto checksum = j.find("checksum");
  if (checksum == j.end() || !checksum->is_string()) return bad("has no string \"checksum\"");
  if (const auto alg = j.find("algorithm"); alg != j.end()) {
    if (!alg->is_string() || alg->get<std::string>() != kShardMetaAlgorithm) {
      return bad("names an algorithm other than xxh3_128, the only one this agent checks");
    }
  }
  std::string digest = checksum->get<std::string>();
  // 16 bytes are 24 base64 characters, the last two "==".
  if (digest.size() != 24 || digest.compare(22, 2, "==") != 0 ||
      digest.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") !=
          std::string::npos) {
    return bad("has a checksum that is not the base64 of 16 bytes");
  }
  return std::optional<std::string>(std::move(digest));
}

std::string FormatShardMeta(std::string_view digest_base64) {
  return nlohmann::json{{"checksum", std::string(digest_base64)},
                        {"algorithm", std::string(kShardMetaAlgorithm)}}
      .dump();
}

ShardHasher::ShardHasher() : s128_(XXH3_createState()) { XXH3_128bits_reset(s128_); }

ShardHasher::~ShardHasher() { XXH3_freeState(s128_); }

void ShardHasher::Update(const void* data, size_t size) {
  XXH3_128bits_update(s128_, data, size);
  h64_.Update(data, size);
}

Checksum ShardHasher::Checksum64() { return h64_.Finish(); }

std::string ShardHasher::Digest128() {
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(s128_));
  unsigned char out[32] = {};
  const int n = EVP_EncodeBlock(out, canon.digest, sizeof(canon.digest));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace tierckpt::agent
