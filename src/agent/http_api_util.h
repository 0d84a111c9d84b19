// http_api_util.h — what every route of the checkpoint HTTP API shares
// (agent/http_api.h): the one mapping from a Status code to an HTTP status,
// the JSON error body {"detail": ...}, and the parsing of paths and queries.
// Pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ops/http_server.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// 400 bad input, 404 absent, 409 conflict, 507 no room in the memory budget,
// 503 stopping or unreachable, 504 a timeout, 500 corruption and the rest.
int HttpStatusFor(Code code);
// {"detail": message, "code": "<tierckpt code name>"} with HttpStatusFor.
void SetError(httplib::Response& res, const Status& st);
void SetJson(httplib::Response& res, int status, const nlohmann::json& body);

// The unsigned integer query parameter key; fallback when absent (nullopt:
// required). kInvalidArgument naming it otherwise.
Result<uint64_t> QueryNumber(const httplib::Request& req, const std::string& key,
                             std::optional<uint64_t> fallback);
// A path segment as a decimal number (what: "rank", "step").
Result<uint64_t> ParseNumber(const std::string& text, const std::string& what);

struct ShardRef {
  std::string ns;
  uint32_t rank = 0;
  uint64_t step = 0;
};
// matches[1..3] of /v1/cp/checkpoints/{ns}/{rank}/{step}, validated.
Result<ShardRef> ParseShardRef(const httplib::Request& req);

}  // namespace tierckpt::agent
