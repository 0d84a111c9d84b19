// s3_express.h — S3 Express One Zone directory buckets: their names, their
// zonal endpoints, and the signer that authenticates with session credentials.
//
// A directory bucket is named "<base>--<zone id>--x-s3" ("ckpt--usw2-az1--x-s3")
// and is reached only through its zonal virtual-host endpoint
// "https://<bucket>.s3express-<zone id>.<region>.amazonaws.com".
//
// ExpressSigner (MakeExpressSigner) authenticates data requests the way the
// AWS SDKs do:
//   1. CreateSession: `GET /?session` on the bucket's endpoint with header
//      `x-amz-create-session-mode: ReadWrite`, SigV4-signed with the base
//      credentials (service "s3express", x-amz-security-token if they carry a
//      token). The 200 body is
//        <CreateSessionResult><Credentials><SessionToken/><SecretAccessKey/>
//        <AccessKeyId/><Expiration>2024-05-01T12:05:00Z</Expiration>
//        </Credentials></CreateSessionResult>
//      (botocore's model: CreateSessionOutput.Credentials, a SessionCredentials).
//   2. Data requests are signed with the session keys, service "s3express",
//      and the header `x-amz-s3session-token: <token>` (never
//      x-amz-security-token).
// Sessions last five minutes. They are cached per bucket and refreshed
// single-flight once less than ExpressOptions::refresh_margin remains: while
// one thread runs CreateSession for a bucket, other threads signing for that
// bucket wait for its result instead of issuing their own (and share its
// error if it fails). If a refresh fails while the old session is still
// valid, the old session keeps signing and the next Sign tries again.
//
// Thread safety: the signer is thread-safe; the other functions are pure.
// Errors from Sign: the base credentials' error, or a CreateSession failure
// naming the bucket, endpoint, HTTP status and S3 error code and message,
// with what to check: kPermissionDenied (401/403), kNotFound (404),
// kUnavailable (429, 5xx, no response: retry later), kInvalidArgument
// (other 4xx), kProtocolError (a 200 whose body is not a session).
// CreateSession is not retried here; the caller's retry loop may call Sign
// again.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "s3/credentials.h"
#include "s3/http.h"
#include "s3/signer.h"

namespace tierckpt::s3 {

// "ckpt--usw2-az1--x-s3" → "usw2-az1"; nullopt unless the name is
// "<base>--<zone id>--x-s3" with a non-empty base not ending in '-' and a
// zone id "<location>-az<digits>" of lower-case letters, digits and '-'
// ("usw2-az1", "use1-az4", "usw2-lax1-az1").
std::optional<std::string> ExpressZone(std::string_view bucket);

// Whether `bucket` is a directory bucket name (ExpressZone has a value).
bool IsExpressBucket(std::string_view bucket);

// "https://<bucket>.s3express-<zone id>.<region>.amazonaws.com"; nullopt
// unless IsExpressBucket(bucket).
std::optional<std::string> ExpressEndpoint(std::string_view bucket, std::string_view region);

struct ExpressOptions {
  // Refresh a session once less than this remains of it (sessions last five
  // minutes). Tests shorten or lengthen it.
  std::chrono::seconds refresh_margin{60};
  // The clock used for expiry and x-amz-date. Empty = Clock::now.
  std::function<Clock::time_point()> now;
};

// The signer for S3 Express directory buckets. `credentials` are the base
// credentials that may call s3express:CreateSession; `bucket_endpoint` maps a
// bucket to the endpoint its requests (CreateSession included) go to; empty
// means ExpressEndpoint(bucket, region).
std::unique_ptr<RequestSigner> MakeExpressSigner(
    std::shared_ptr<HttpTransport> transport, std::shared_ptr<CredentialsProvider> credentials,
    std::string region, std::function<std::string(const std::string& bucket)> bucket_endpoint,
    ExpressOptions options = {});

// Parses a CreateSession 200 body into session credentials (source
// "s3express session"). kProtocolError naming the missing or malformed
// element otherwise. Exposed for tests.
Result<Credentials> ParseCreateSessionResult(std::string_view xml);

}  // namespace tierckpt::s3
