// credentials_env.cc — the environment source (AWS_ACCESS_KEY_ID, ...), and
// the Environment the chain reads its configuration from.
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

std::string HomeFromPasswd() {
  long size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(size > 0 ? static_cast<size_t>(size) : 16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (::getpwuid_r(::getuid(), &pw, buffer.data(), buffer.size(), &found) != 0 || found == nullptr ||
      found->pw_dir == nullptr) {
    return "";
  }
  return found->pw_dir;
}

class EnvironmentSource final : public CredentialsSource {
 public:
  explicit EnvironmentSource(Environment env) : env_(std::move(env)) {}

  std::string Name() const override { return "environment"; }

  Result<std::optional<Credentials>> Fetch(std::string* why_not) override {
    std::optional<std::string> key_id = env_.Get("AWS_ACCESS_KEY_ID");
    std::optional<std::string> secret = env_.Get("AWS_SECRET_ACCESS_KEY");
    if (!key_id && !secret) {
      *why_not = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set";
      return std::optional<Credentials>();
    }
    if (!secret) {
      return InvalidArgument(
          "environment credentials: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not; set "
          "AWS_SECRET_ACCESS_KEY too (and AWS_SESSION_TOKEN for temporary keys), or unset "
          "AWS_ACCESS_KEY_ID to use another source");
    }
    if (!key_id) {
      return InvalidArgument(
          "environment credentials: AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not; set "
          "AWS_ACCESS_KEY_ID too, or unset AWS_SECRET_ACCESS_KEY to use another source");
    }
    Credentials c;
    c.access_key_id = std::string(TrimAscii(*key_id));
    c.secret_access_key = std::string(TrimAscii(*secret));
    if (std::optional<std::string> token = env_.Get("AWS_SESSION_TOKEN")) {
      c.session_token = std::string(TrimAscii(*token));
    }
    c.source = "environment";
    return std::optional<Credentials>(std::move(c));
  }

 private:
  const Environment env_;
};

}  // namespace

std::optional<std::string> Environment::Get(std::string_view name) const {
  if (!getenv) return std::nullopt;
  std::optional<std::string> value = getenv(name);
  if (value && value->empty()) return std::nullopt;
  return value;
}

Environment Environment::Process() {
  Environment env;
  env.getenv = [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  const char* home = std::getenv("HOME");
  env.home = home != nullptr && home[0] != '\0' ? std::string(home) : HomeFromPasswd();
  return env;
}

Environment Environment::FromMap(std::map<std::string, std::string, std::less<>> vars, std::string home) {
  Environment env;
  auto shared = std::make_shared<const std::map<std::string, std::string, std::less<>>>(std::move(vars));
  env.getenv = [shared](std::string_view name) -> std::optional<std::string> {
    auto it = shared->find(name);
    if (it == shared->end()) return std::nullopt;
    return it->second;
  };
  env.home = std::move(home);
  return env;
}

std::unique_ptr<CredentialsSource> MakeEnvironmentSource(Environment env) {
  return std::make_unique<EnvironmentSource>(std::move(env));
}

}  // namespace tierckpt::s3
