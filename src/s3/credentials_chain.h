// credentials_chain.h — the AWS SDKs' default credentials chain, and the cache
// in front of it.
//
// DefaultCredentialsChain() tries, in the SDKs' order:
//   1. environment   AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN)
//   2. web identity  AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME)
//                    → STS AssumeRoleWithWebIdentity (unsigned), the token file
//                    re-read on every fetch; endpoint https://sts.<region>.amazonaws.com
//                    unless AWS_ENDPOINT_URL_STS or AWS_ENDPOINT_URL is set
//   3. shared files  AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials) and
//                    AWS_CONFIG_FILE (~/.aws/config), profile AWS_PROFILE
//                    (default "default"); static keys only — role_arn,
//                    credential_process and sso_* profiles are refused with
//                    kUnimplemented saying what to use instead
//   4. container     AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (ECS, http://169.254.170.2<uri>)
//                    or AWS_CONTAINER_CREDENTIALS_FULL_URI (https, or http to a
//                    loopback address or the EKS Pod Identity agent
//                    169.254.170.23 / [fd00:ec2::23]), with
//                    AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (re-read on every
//                    fetch) or AWS_CONTAINER_AUTHORIZATION_TOKEN
//   5. IMDSv2        PUT /latest/api/token, then GET the role and its
//                    credentials; AWS_EC2_METADATA_SERVICE_ENDPOINT (or
//                    AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=IPv6) moves it,
//                    AWS_EC2_METADATA_DISABLED=true skips it
//
// The first source the environment *selects* wins: a selected source that
// fails returns its error and the chain does not fall through past a
// misconfiguration (a key id without a secret, a profile AWS_PROFILE names
// that does not exist, a FULL_URI that breaks the rule). IMDS counts as not
// selected when nothing answers at its address (off EC2). When no source is
// selected, Get() fails with kFailedPrecondition naming every source, why it
// was skipped, and what to set. Every error names the source, where (file,
// URI, endpoint), what failed and what to do.
//
// Transports: IMDS is absent off EC2, so its transport should use a short
// connect timeout (about 1 s; ChainOptions::imds_transport) while STS and the
// container endpoint can share the S3 transport. The chain never signs
// requests: STS AssumeRoleWithWebIdentity is an unsigned call.
//
// CachingCredentialsProvider: caches what its inner provider returns and
// refreshes it, single-flight, once the credentials are within the refresh
// margin of their expiration; concurrent Get() calls during a refresh wait for
// that one fetch. If a refresh fails while the cached credentials have not yet
// expired, Get() returns the cached ones (logging a warning) and retries the
// refresh no sooner than failed_refresh_backoff later. Credentials without an
// expiration are fetched once and never refreshed.
//
// Thread safety: every provider returned here is safe to call from many
// threads. Environment is a value; its functions must be thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/mutex.h"
#include "s3/credentials.h"
#include "s3/http.h"

namespace tierckpt::s3 {

// Where the chain reads its configuration: environment variables and the home
// directory (for ~/.aws). Tests build one from a map so they never touch the
// process environment or the real ~/.aws.
struct Environment {
  // The value of an environment variable, nullopt when unset.
  std::function<std::optional<std::string>(std::string_view)> getenv;
  // The home directory ("~" in ~/.aws/credentials); empty when unknown, in
  // which case only AWS_SHARED_CREDENTIALS_FILE / AWS_CONFIG_FILE are read.
  std::string home;

  // The variable's value; nullopt when unset or empty (the SDKs treat an empty
  // variable as unset).
  std::optional<std::string> Get(std::string_view name) const;

  // The real process: getenv(3), and $HOME (else the passwd entry).
  static Environment Process();
  // Fixed variables and home directory, for tests.
  static Environment FromMap(std::map<std::string, std::string, std::less<>> vars, std::string home);
};

struct CachingOptions {
  // Refresh credentials this long before they expire.
  std::chrono::seconds refresh_margin = std::chrono::minutes(5);
  // After a failed refresh that fell back to still-valid cached credentials,
  // do not try again for this long.
  std::chrono::seconds failed_refresh_backoff = std::chrono::seconds(10);
  // The clock expirations are compared against; empty = Clock::now.
  std::function<Clock::time_point()> now;
};

class CachingCredentialsProvider final : public CredentialsProvider {
 public:
  // Precondition: inner is not null.
  explicit CachingCredentialsProvider(std::shared_ptr<CredentialsProvider> inner,
                                      CachingOptions options = {});

  // Cached credentials, or the inner provider's fresh ones, or its error when
  // there is nothing unexpired to fall back on.
  Result<Credentials> Get() override;
  std::string Name() const override;  // the inner provider's name

 private:
  Clock::time_point Now() const;
  bool Fresh(const Credentials& c, Clock::time_point now) const;
  static bool Unexpired(const Credentials& c, Clock::time_point now);

  // const after construction
  const std::shared_ptr<CredentialsProvider> inner_;
  const CachingOptions options_;

  // guarded by mu_
  Mutex mu_;
  CondVar fetched_{&mu_};
  std::optional<Credentials> cached_ GUARDED_BY(mu_);
  bool fetching_ GUARDED_BY(mu_) = false;
  uint64_t fetch_generation_ GUARDED_BY(mu_) = 0;                    // bumped when a fetch finishes
  std::optional<Result<Credentials>> last_outcome_ GUARDED_BY(mu_);  // of the latest finished fetch
  std::optional<Clock::time_point> retry_after_ GUARDED_BY(mu_);     // after a failed refresh
};

struct ChainOptions {
  // Transport for IMDS (short connect timeout, ~1 s); null = the chain's
  // transport.
  std::shared_ptr<HttpTransport> imds_transport;
  CachingOptions caching;
};

// The SDK-order chain (above), wrapped in a CachingCredentialsProvider.
// `transport` carries STS and container requests (and IMDS unless
// options.imds_transport is set). `region` picks the regional STS endpoint;
// empty = AWS_REGION, then AWS_DEFAULT_REGION, then the profile's region, then
// "us-east-1".
// Precondition: transport is not null.
std::shared_ptr<CredentialsProvider> DefaultCredentialsChain(std::shared_ptr<HttpTransport> transport,
                                                             Environment env, std::string region);
std::shared_ptr<CredentialsProvider> DefaultCredentialsChain(std::shared_ptr<HttpTransport> transport,
                                                             Environment env, std::string region,
                                                             ChainOptions options);

// The `region` of the AWS_PROFILE profile (default "default") in the config
// file (AWS_CONFIG_FILE, else ~/.aws/config); nullopt when the file, the
// profile or the key is missing or the file cannot be read or parsed.
std::optional<std::string> ProfileRegion(const Environment& env);

}  // namespace tierckpt::s3
