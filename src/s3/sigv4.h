// sigv4.h — AWS Signature Version 4, hand-written on OpenSSL.
//
// Why our own: Debian has no AWS C++ SDK, and libcurl's CURLOPT_AWS_SIGV4 is
// broken for S3 on curl 7.88 (docs/dependencies.md). The algorithm is
// https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html;
// the tests run the published aws-sig-v4-test-suite vectors
// (tests/data/sigv4/), the S3 documentation's examples, values botocore
// computes for S3-shaped requests, and a real server (moto) that checks
// signatures.
//
// Contract of SignRequest: adds host (from request.endpoint), x-amz-date,
// x-amz-content-sha256 (if the caller did not set it), the session token when
// the credentials carry one (x-amz-security-token, or x-amz-s3session-token
// when params.token_header says so: S3 Express data requests), and
// authorization. Every header present at signing time is signed. The request
// must not change afterwards, except for headers the transport adds and S3
// does not sign (user-agent, expect, content-length). Signing an already
// signed request again (a retry) replaces what the previous call added;
// a caller-set x-amz-content-sha256 is kept.
//
// The canonical URI. request.path is the path exactly as it goes on the wire,
// already percent-encoded once (UriEncode(key, /*encode_slash=*/false)). S3
// signs that path verbatim: it neither normalises it ("a//b/../c" is a real
// key) nor encodes it a second time (UriMode::kS3, the default). Every other
// service normalises dot segments and repeated slashes and then encodes the
// path once more (UriMode::kGeneric); the generic test-suite vectors use it.
//
// Thread safety: every function here is pure and thread-safe. Failures of
// OpenSSL itself (only out of memory) make SignRequest/ComputeSignature
// return kInternal; Sha256Hex, which has no error channel, aborts instead.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "s3/credentials.h"
#include "s3/http.h"

namespace tierckpt::s3 {

// x-amz-content-sha256 value that leaves the body unsigned (integrity then
// comes from x-amz-checksum-crc32c). Only S3 and S3 Express accept it.
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

// How the canonical URI is made from request.path (see the file comment).
enum class UriMode {
  kS3,       // verbatim (empty path = "/")
  kGeneric,  // dot segments and empty segments removed, then UriEncode'd again
};

// Which header carries credentials.session_token.
enum class TokenHeader {
  kSecurityToken,   // x-amz-security-token: STS credentials (and CreateSession)
  kS3SessionToken,  // x-amz-s3session-token: S3 Express session credentials;
                    // any x-amz-security-token on the request is removed
};

struct SigningParams {
  std::string region;          // "us-east-1"
  std::string service = "s3";  // "s3", "s3express", "sts"
  Clock::time_point now = Clock::now();
  // Sign the body's SHA-256 (true) or send kUnsignedPayload (false). Ignored
  // when the caller already set x-amz-content-sha256. Services other than S3
  // need true.
  bool sign_payload = false;
  UriMode uri_mode = UriMode::kS3;
  TokenHeader token_header = TokenHeader::kSecurityToken;
};

// Lower-case hex SHA-256.
std::string Sha256Hex(const void* data, size_t size);

// "20150830T123600Z" (UTC), the x-amz-date format.
std::string FormatAmzDate(Clock::time_point time);

// The Host header for an endpoint: "https://b.s3.amazonaws.com" →
// "b.s3.amazonaws.com", "http://127.0.0.1:9000/x" → "127.0.0.1:9000"; the
// default port of the scheme (80 for http, 443 for https) is left out.
// kInvalidArgument when the endpoint is not http(s)://host[:port][/...].
Result<std::string> HostFromEndpoint(std::string_view endpoint);

// Signs `request` in place (see the contract above). Errors: kInvalidArgument
// for empty credentials, region or service, or a malformed endpoint.
Status SignRequest(HttpRequest& request, const Credentials& credentials, const SigningParams& params);

// The intermediate values of one signature.
struct SignatureParts {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signature;      // lower-case hex
  std::string authorization;  // "AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=..."
};

// Signs the request exactly as it stands, adding nothing: the date comes from
// its x-amz-date header, the payload hash from its x-amz-content-sha256
// header or else the SHA-256 of its body; every header is signed; only the
// access key id and secret of `credentials` are used. SignRequest's last step,
// exposed for the test-suite vectors. kInvalidArgument when x-amz-date is
// missing or not yyyymmddThhmmssZ.
Result<SignatureParts> ComputeSignature(const HttpRequest& request, const Credentials& credentials,
                                        std::string_view region, std::string_view service,
                                        UriMode uri_mode = UriMode::kS3);

// The pieces, exposed for the test-suite vectors.
std::string CanonicalRequest(const HttpRequest& request, std::string_view payload_hash);
std::string CanonicalRequest(const HttpRequest& request, std::string_view payload_hash, UriMode uri_mode);
// "AWS4-HMAC-SHA256\n<amz_date>\n<scope>\n<hex sha256 of canonical_request>".
std::string StringToSign(std::string_view canonical_request, std::string_view amz_date,
                         std::string_view scope);

}  // namespace tierckpt::s3
