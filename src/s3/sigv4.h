// sigv4.h — AWS Signature Version 4, hand-written on OpenSSL.
//
// Why our own: Debian has no AWS C++ SDK, and libcurl's CURLOPT_AWS_SIGV4 is
// broken for S3 on curl 7.88 (docs/dependencies.md). The algorithm is
// https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html;
// the tests run the published aws-sig-v4-test-suite vectors and a real server
// (moto) that checks signatures.
//
// Contract of SignRequest: adds host, x-amz-date, x-amz-content-sha256 (if the
// caller did not set it), x-amz-security-token (or, for s3express,
// x-amz-s3session-token) when the credentials carry a token, and
// authorization. Every header present at signing time is signed. The request
// must not change afterwards, except for headers the transport adds and S3
// does not sign (user-agent, expect, content-length).
#pragma once

#include <string>
#include <string_view>

#include "s3/credentials.h"
#include "s3/http.h"

namespace tierckpt::s3 {

// x-amz-content-sha256 value that leaves the body unsigned (integrity then
// comes from x-amz-checksum-crc32c).
inline constexpr std::string_view kUnsignedPayload = "UNSIGNED-PAYLOAD";

struct SigningParams {
  std::string region;           // "us-east-1"
  std::string service = "s3";   // "s3", "s3express", "sts"
  Clock::time_point now = Clock::now();
  // Sign the body's SHA-256 (true) or send kUnsignedPayload (false). Ignored
  // when the caller already set x-amz-content-sha256.
  bool sign_payload = false;
};

// Lower-case hex SHA-256.
std::string Sha256Hex(const void* data, size_t size);

// Signs `request` in place.
Status SignRequest(HttpRequest& request, const Credentials& credentials, const SigningParams& params);

// The pieces, exposed for the test-suite vectors.
std::string CanonicalRequest(const HttpRequest& request, std::string_view payload_hash);
std::string StringToSign(std::string_view canonical_request, std::string_view amz_date,
                         std::string_view scope);

}  // namespace tierckpt::s3
