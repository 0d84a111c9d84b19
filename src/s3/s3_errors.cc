// s3_errors.cc — see s3_errors.h.
#include "s3/s3_errors.h"

#include <array>


namespace tierckpt::s3 {
namespace {

// S3's message, printable ASCII only, at most 300 characters.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 300)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  if (s.size() > 300) out += "...";
  return out;
}

bool IsRetryableCode(std::string_view code) {
  static constexpr std::array<std::string_view, 13> kCodes = {
      "InternalError",      "SlowDown",          "ServiceUnavailable",
      "RequestTimeout",     "RequestTimeTooSkewed", "Throttling",
      "ThrottlingException", "ThrottledException", "RequestThrottled",
      "RequestLimitExceeded", "ConditionalRequestConflict", "OperationAborted",
      "ExpiredToken"};
  for (std::string_view c : kCodes) {
    if (code == c) return true;
  }
  return false;
}

Code CodeFor(int http_status) {
  switch (http_status) {
    case 404: return Code::kNotFound;
    case 403: return Code::kPermissionDenied;
    case 412: return Code::kAlreadyExists;
    case 416: return Code::kCorruption;
    case 501: return Code::kUnimplemented;
    case 400: return Code::kInvalidArgument;
    default: break;
  }
  if (http_status >= 500) return Code::kUnavailable;
  if (http_status >= 200 && http_status < 300) return Code::kUnavailable;  // a 200 with <Error>
  return Code::kFailedPrecondition;
}

std::string HintFor(const AttemptError& e) {
  const std::string_view code = e.s3.code;
  if (e.http_status == 0) {
    return "check that the endpoint is reachable (network, DNS, proxy, TLS) and retry";
  }
  if (code == "NoSuchBucket") {
    return "the bucket does not exist: create it, or fix the bucket name, region or endpoint in "
           "the s3:// URL";
  }
  if (code == "NoSuchUpload") {
    return "the multipart upload was aborted or completed meanwhile (a sweep, or another writer); "
           "upload the object again";
  }
  if (code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed" ||
      code == "IllegalLocationConstraintException") {
    return "the bucket is in another region: set region=<its region> in the s3:// URL or "
           "AWS_REGION";
  }
  switch (e.http_status) {
    case 403:
      return "check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, the "
             "role), that they may access this bucket and key, the region, and that this "
             "machine's clock is correct";
    case 404:
      return "the key does not exist (never written, or deleted)";
    case 412:
      return "the key already exists: it was already committed (If-None-Match: *), keep the "
             "existing one";
    case 416:
      return "the object is shorter than the range asked for; it is truncated or was replaced";
    case 501:
      return "this S3-compatible store does not implement the request; use conditional=off in "
             "the s3:// URL if it is the conditional write";
    case 400:
      return "the request was rejected as malformed; check the s3:// URL parameters (part_size, "
             "region, addressing) against what this store supports";
    default:
      break;
  }
  if (e.http_status >= 500 || IsRetryableCode(code)) {
    return "the store stayed unavailable through every retry; check its health and retry later, "
           "or raise max_attempts in the s3:// URL";
  }
  return "see the S3 error code above";
}

}  // namespace

AttemptError ErrorFromResponse(const HttpResponse& response) {
  AttemptError e;
  e.http_status = response.status;
  if (auto body = ParseErrorBody(response.body)) e.s3 = *body;
  if (e.s3.request_id.empty()) {
    if (auto id = FindHeader(response.headers, "x-amz-request-id")) e.s3.request_id = *id;
  }
  return e;
}

AttemptError ErrorFromTransport(Status status) {
  AttemptError e;
  e.transport = std::move(status);
  return e;
}

bool IsRetryable(const AttemptError& e) {
  if (e.http_status == 0) {
    return e.transport.code() == Code::kUnavailable || e.transport.code() == Code::kTimeout;
  }
  if (e.http_status == 500 || e.http_status == 502 || e.http_status == 503 ||
      e.http_status == 504 || e.http_status == 429) {
    return true;
  }
  return IsRetryableCode(e.s3.code);
}

bool WantsFreshConnection(const AttemptError& e) {
  return e.http_status == 0 || e.http_status >= 500;
}

Status FinalError(const AttemptError& e, std::string_view what, std::string_view endpoint,
                  int attempts) {
  std::string msg = std::string(what) + " at " + std::string(endpoint) + ": ";
  Code code;
  if (e.http_status == 0) {
    code = e.transport.code();
    msg += e.transport.message();
  } else {
    code = CodeFor(e.http_status);
    msg += "HTTP " + std::to_string(e.http_status);
    if (!e.s3.code.empty()) msg += " " + e.s3.code;
    if (!e.s3.message.empty()) msg += ": " + Printable(e.s3.message);
    if (!e.s3.request_id.empty()) msg += " (request id " + e.s3.request_id + ")";
  }
  msg += " after " + std::to_string(attempts) + (attempts == 1 ? " attempt" : " attempts");
  msg += "; " + HintFor(e);
  return Status(code, std::move(msg));
}

}  // namespace tierckpt::s3
