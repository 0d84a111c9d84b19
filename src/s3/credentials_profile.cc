// credentials_profile.cc — the shared-files source (~/.aws/credentials,
// ~/.aws/config, AWS_PROFILE) and ProfileRegion().
#include <array>

#include "os/files.h"
#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"
#include "s3/ini.h"

namespace tierckpt::s3 {
namespace {

// Keys of profiles whose credentials come from somewhere we do not implement.
constexpr std::array<std::string_view, 9> kUnsupportedKeys = {
    "role_arn",    "source_profile", "credential_source", "credential_process", "web_identity_token_file",
    "sso_session", "sso_start_url",  "sso_account_id",    "sso_role_name",
};

struct SharedFiles {
  std::string profile;            // AWS_PROFILE, else "default"
  bool profile_explicit = false;  // AWS_PROFILE is set
  std::string credentials_path;   // empty when unknown (no home, no override)
  std::string config_path;
};

SharedFiles Locate(const Environment& env) {
  SharedFiles f;
  std::optional<std::string> profile = env.Get("AWS_PROFILE");
  f.profile_explicit = profile.has_value();
  f.profile = profile ? *profile : "default";
  auto path = [&](const char* variable, const char* default_rel) -> std::string {
    if (std::optional<std::string> set = env.Get(variable)) return ExpandHome(*set, env.home);
    if (env.home.empty()) return "";
    return JoinPath(env.home, default_rel);
  };
  f.credentials_path = path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  f.config_path = path("AWS_CONFIG_FILE", ".aws/config");
  return f;
}

// The parsed file, or nullopt when the path is empty or nothing is there.
Result<std::optional<IniFile>> LoadIfExists(const std::string& path) {
  if (path.empty()) return std::optional<IniFile>();
  TC_ASSIGN_OR_RETURN(FileInfo info, StatPath(path));
  if (!info.exists) return std::optional<IniFile>();
  Result<std::string> text = ReadSmallFile(path);
  if (!text.ok()) {
    return text.status().WithContext("shared files: cannot read " + path +
                                     "; fix its permissions or point AWS_SHARED_CREDENTIALS_FILE / "
                                     "AWS_CONFIG_FILE elsewhere");
  }
  Result<IniFile> ini = ParseIni(*text, path);
  if (!ini.ok()) return ini.status().WithContext("shared files");
  return std::optional<IniFile>(std::move(*ini));
}

// In the config file profiles are "[profile name]", except "[default]".
const IniSection* FindConfigProfile(const IniFile& config, const std::string& profile) {
  if (profile == "default") {
    if (const IniSection* s = config.Find("default")) return s;
  }
  return config.Find("profile " + profile);
}

std::string Describe(const std::string& path) { return path.empty() ? "(no home directory)" : path; }

class ProfileSource final : public CredentialsSource {
 public:
  explicit ProfileSource(Environment env) : env_(std::move(env)) {}

  std::string Name() const override { return "shared files"; }

  Result<std::optional<Credentials>> Fetch(std::string* why_not) override {
    const SharedFiles files = Locate(env_);
    TC_ASSIGN_OR_RETURN(std::optional<IniFile> credentials_ini, LoadIfExists(files.credentials_path));
    TC_ASSIGN_OR_RETURN(std::optional<IniFile> config_ini, LoadIfExists(files.config_path));
    struct Candidate {
      const IniSection* section;
      const std::string& path;
    };
    const std::array<Candidate, 2> candidates = {
        Candidate{credentials_ini ? credentials_ini->Find(files.profile) : nullptr, files.credentials_path},
        Candidate{config_ini ? FindConfigProfile(*config_ini, files.profile) : nullptr, files.config_path},
    };
    const std::string quoted = "profile '" + files.profile + "'";
    if (candidates[0].section == nullptr && candidates[1].section == nullptr) {
      const std::string where = "[" + files.profile + "] in " + Describe(files.credentials_path) + " or [" +
                                (files.profile == "default" ? "default" : "profile " + files.profile) +
                                "] in " + Describe(files.config_path);
      if (files.profile_explicit) {
        return NotFound("shared files: AWS_PROFILE names " + quoted + ", but there is no " + where +
                        "; add the profile (aws configure --profile " + files.profile +
                        "), fix AWS_PROFILE, or unset it");
      }
      *why_not = "no " + where;
      return std::optional<Credentials>();
    }
    for (const Candidate& c : candidates) {
      if (c.section == nullptr) continue;
      auto key_id = c.section->find("aws_access_key_id");
      auto secret = c.section->find("aws_secret_access_key");
      const bool has_key_id = key_id != c.section->end() && !key_id->second.empty();
      const bool has_secret = secret != c.section->end() && !secret->second.empty();
      if (!has_key_id && !has_secret) continue;
      if (!has_key_id || !has_secret) {
        return InvalidArgument("shared files: " + quoted + " in " + c.path + " has " +
                               (has_key_id ? "aws_access_key_id but no aws_secret_access_key"
                                           : "aws_secret_access_key but no aws_access_key_id") +
                               "; add the missing key to the profile");
      }
      Credentials creds;
      creds.access_key_id = key_id->second;
      creds.secret_access_key = secret->second;
      auto token = c.section->find("aws_session_token");
      if (token == c.section->end()) token = c.section->find("aws_security_token");
      if (token != c.section->end()) creds.session_token = token->second;
      creds.source = quoted + " (" + c.path + ")";
      return std::optional<Credentials>(std::move(creds));
    }
    for (const Candidate& c : candidates) {
      if (c.section == nullptr) continue;
      for (std::string_view key : kUnsupportedKeys) {
        if (c.section->find(key) == c.section->end()) continue;
        return Unimplemented(
            "shared files: " + quoted + " in " + c.path + " gets its credentials through " +
            std::string(key) +
            ", which tierckpt does not support (only static aws_access_key_id / aws_secret_access_key); "
            "export the credentials to the environment instead (eval \"$(aws configure export-credentials "
            "--profile " +
            files.profile +
            " --format env)\" sets AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
            "AWS_SESSION_TOKEN), or use web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN)");
      }
    }
    *why_not = quoted + " has no aws_access_key_id in " + Describe(files.credentials_path) + " or " +
               Describe(files.config_path);
    return std::optional<Credentials>();
  }

 private:
  const Environment env_;
};

}  // namespace

std::unique_ptr<CredentialsSource> MakeProfileSource(Environment env) {
  return std::make_unique<ProfileSource>(std::move(env));
}

std::optional<std::string> ProfileRegion(const Environment& env) {
  const SharedFiles files = Locate(env);
  Result<std::optional<IniFile>> config = LoadIfExists(files.config_path);
  if (!config.ok() || !config->has_value()) return std::nullopt;
  const IniSection* section = FindConfigProfile(**config, files.profile);
  if (section == nullptr) return std::nullopt;
  auto region = section->find("region");
  if (region == section->end() || region->second.empty()) return std::nullopt;
  return region->second;
}

}  // namespace tierckpt::s3
