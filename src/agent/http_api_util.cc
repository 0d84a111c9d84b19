// http_api_util.cc — see http_api_util.h.
#include "agent/http_api_util.h"

#include <charconv>

#include "agent/http_namespaces.h"
#include "common/names.h"

namespace tierckpt::agent {

int HttpStatusFor(Code code) {
  switch (code) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
    case Code::kProtocolError:
      return 400;
    case Code::kPermissionDenied:
      return 403;
    case Code::kNotFound:
      return 404;
    case Code::kAlreadyExists:
    case Code::kFailedPrecondition:
    case Code::kAborted:
      return 409;
    case Code::kResourceExhausted:
      return 507;
    case Code::kUnavailable:
      return 503;
    case Code::kTimeout:
      return 504;
    case Code::kUnimplemented:
      return 501;
    default:
      return 500;
  }
}

void SetJson(httplib::Response& res, int status, const nlohmann::json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void SetError(httplib::Response& res, const Status& st) {
  SetJson(res, HttpStatusFor(st.code()),
          {{"detail", st.message()}, {"code", std::string(ToString(st.code()))}});
}

Result<uint64_t> ParseNumber(const std::string& text, const std::string& what) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end) {
    return InvalidArgument(what + " " + QuoteForMessage(text.substr(0, 100)) +
                           " is not a non-negative decimal integer");
  }
  return v;
}

Result<uint64_t> QueryNumber(const httplib::Request& req, const std::string& key,
                             std::optional<uint64_t> fallback) {
  if (!req.has_param(key.c_str())) {
    if (fallback) return *fallback;
    return InvalidArgument("the query parameter " + key + " is required, e.g. ?" + key + "=8");
  }
  return ParseNumber(req.get_param_value(key.c_str()), "the query parameter " + key);
}

Result<ShardRef> ParseShardRef(const httplib::Request& req) {
  ShardRef r;
  r.ns = req.matches[1];
  TC_RETURN_IF_ERROR(ValidateNamespace(r.ns));
  TC_ASSIGN_OR_RETURN(uint64_t rank, ParseNumber(req.matches[2], "rank"));
  if (rank >= kMaxHttpRanks) {
    return InvalidArgument("rank " + std::to_string(rank) + " is above " + std::to_string(kMaxHttpRanks - 1));
  }
  r.rank = static_cast<uint32_t>(rank);
  TC_ASSIGN_OR_RETURN(r.step, ParseNumber(req.matches[3], "step"));
  TC_RETURN_IF_ERROR(ValidateStep(r.step));
  return r;
}

}  // namespace tierckpt::agent
