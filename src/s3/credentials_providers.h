// credentials_providers.h — the chain's sources, one per place credentials can
// come from (private to tc_s3; credentials_chain.h is the public face).
//
// A CredentialsSource differs from a CredentialsProvider in one way: it can
// say "the environment does not select me" (nullopt plus the reason), which
// lets the chain move on, while a selected source that fails returns an error
// and stops the chain. Sources fetch unconditionally (no caching) and are
// thread-safe: they keep only const state (the Environment, a transport).
//
// Also here: the small parsers the sources share (ISO 8601 times, http(s)
// URLs, JSON credentials documents), implemented in credentials.cc and
// credentials_container.cc.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "s3/credentials.h"
#include "s3/credentials_chain.h"
#include "s3/http.h"

namespace tierckpt::s3 {

class CredentialsSource {
 public:
  virtual ~CredentialsSource() = default;
  // "environment", "web identity", "shared files", "container", "IMDS".
  virtual std::string Name() const = 0;
  // Credentials; or nullopt with *why_not saying why this source is not
  // selected and what would select it; or an error (the source is selected
  // but fetching failed) naming the source, where, what and what to do.
  virtual Result<std::optional<Credentials>> Fetch(std::string* why_not) = 0;
};

std::unique_ptr<CredentialsSource> MakeEnvironmentSource(Environment env);
// `region` picks the STS endpoint; empty = AWS_REGION, AWS_DEFAULT_REGION, the
// profile's region (ProfileRegion), "us-east-1".
std::unique_ptr<CredentialsSource> MakeWebIdentitySource(Environment env,
                                                         std::shared_ptr<HttpTransport> transport,
                                                         std::string region);
std::unique_ptr<CredentialsSource> MakeProfileSource(Environment env);
std::unique_ptr<CredentialsSource> MakeContainerSource(Environment env,
                                                       std::shared_ptr<HttpTransport> transport);
std::unique_ptr<CredentialsSource> MakeImdsSource(Environment env, std::shared_ptr<HttpTransport> transport);

// The uncached chain: the first source that returns credentials or an error
// decides; if every source returns nullopt, kFailedPrecondition listing each
// source's reason and what to set.
std::unique_ptr<CredentialsProvider> MakeChainProvider(
    std::vector<std::unique_ptr<CredentialsSource>> sources);

// --- shared helpers -------------------------------------------------------

// "2024-05-01T12:34:56Z", with optional fractional seconds and a Z or ±HH:MM
// offset. kInvalidArgument otherwise.
Result<Clock::time_point> ParseIso8601(std::string_view text);

// s without leading and trailing ASCII whitespace.
std::string_view TrimAscii(std::string_view s);

struct HttpUrl {
  std::string scheme;                                      // "http" or "https", lower-case
  std::string host;                                        // lower-case; IPv6 literals keep their brackets
  std::string endpoint;                                    // scheme://host[:port], for HttpRequest::endpoint
  std::string path = "/";                                  // as written (already encoded); "/" when absent
  std::vector<std::pair<std::string, std::string>> query;  // percent-decoded
};
// Parses an absolute http:// or https:// URL without user info.
// kInvalidArgument naming the URL and what is wrong.
Result<HttpUrl> ParseHttpUrl(std::string_view url);

// At most ~200 bytes of a response body for an error message, non-printable
// bytes escaped.
std::string BodySnippet(std::string_view body);

// Reads a small (≤ 1 MiB) file such as a token file.
Result<std::string> ReadSmallFile(const std::string& path);

// "~" and "~/x" become home and home/x; other paths are returned unchanged.
std::string ExpandHome(std::string_view path, const std::string& home);

// {AccessKeyId, SecretAccessKey, Token, Expiration} as the container and IMDS
// endpoints return it. `where` prefixes errors ("container
// http://169.254.170.2/v2/credentials/x"); `source` goes into
// Credentials::source. Expiration is optional (none = never expires).
Result<Credentials> ParseJsonCredentials(std::string_view body, std::string_view where, std::string source);

}  // namespace tierckpt::s3
