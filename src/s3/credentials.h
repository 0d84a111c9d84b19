// credentials.h — AWS credentials and where they come from.
//
// CredentialsProvider is the one interface; DefaultCredentialsChain()
// (credentials_chain.h) builds the AWS SDKs' order: environment, web identity,
// shared files with AWS_PROFILE, container credentials, IMDSv2. Providers that
// fetch over HTTP take an HttpTransport so unit tests can script them.
//
// Contract: Get() returns credentials valid for at least the refresh margin
// (default 5 minutes) or an error naming every source tried and why each
// failed, plus what to set to fix it. Caching and single-flight refresh live in
// CachingCredentialsProvider, so individual providers fetch unconditionally.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "tierckpt/status.h"

namespace tierckpt::s3 {

using Clock = std::chrono::system_clock;

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys
  std::optional<Clock::time_point> expiration;  // none = never expires
  std::string source;  // "environment", "profile default", "imds", ... for messages
};

class CredentialsProvider {
 public:
  virtual ~CredentialsProvider() = default;
  // Thread-safe.
  virtual Result<Credentials> Get() = 0;
  // A short name for messages: "environment", "web identity", ...
  virtual std::string Name() const = 0;
};

// Fixed credentials (tests, and keys passed in configuration).
std::unique_ptr<CredentialsProvider> StaticCredentials(Credentials credentials);

}  // namespace tierckpt::s3
