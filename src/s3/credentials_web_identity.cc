// credentials_web_identity.cc — the web identity source (EKS IRSA):
// AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN → STS AssumeRoleWithWebIdentity.
//
// The call is unsigned (the token is the proof), sent as a form POST to the
// regional STS endpoint. The token file is re-read on every fetch because the
// kubelet rotates it.
#include <chrono>
#include <pugixml.hpp>

#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

bool ValidRegion(std::string_view region) {
  if (region.empty() || region.size() > 64) return false;
  for (char c : region) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

class WebIdentitySource final : public CredentialsSource {
 public:
  WebIdentitySource(Environment env, std::shared_ptr<HttpTransport> transport, std::string region)
      : env_(std::move(env)), transport_(std::move(transport)), region_(std::move(region)) {}

  std::string Name() const override { return "web identity"; }

  Result<std::optional<Credentials>> Fetch(std::string* why_not) override {
    std::optional<std::string> token_file = env_.Get("AWS_WEB_IDENTITY_TOKEN_FILE");
    std::optional<std::string> role_arn = env_.Get("AWS_ROLE_ARN");
    if (!token_file && !role_arn) {
      *why_not = "AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN are not set";
      return std::optional<Credentials>();
    }
    if (!role_arn) {
      return InvalidArgument("web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set (" + *token_file +
                             ") but AWS_ROLE_ARN is not; set AWS_ROLE_ARN to the IAM role to assume "
                             "(EKS IRSA sets both), or unset AWS_WEB_IDENTITY_TOKEN_FILE");
    }
    if (!token_file) {
      return InvalidArgument("web identity: AWS_ROLE_ARN is set (" + *role_arn +
                             ") but AWS_WEB_IDENTITY_TOKEN_FILE is not; set it to the OIDC token file "
                             "(EKS IRSA mounts one), or unset AWS_ROLE_ARN");
    }
    Result<std::string> token_text = ReadSmallFile(*token_file);
    if (!token_text.ok()) {
      return token_text.status().WithContext(
          "web identity: cannot read the token file AWS_WEB_IDENTITY_TOKEN_FILE=" + *token_file +
          " (check that the service account token volume is mounted)");
    }
    const std::string token(TrimAscii(*token_text));
    if (token.empty()) {
      return InvalidArgument("web identity: the token file AWS_WEB_IDENTITY_TOKEN_FILE=" + *token_file +
                             " is empty; check the service account token projection");
    }
    std::string session_name;
    if (std::optional<std::string> set = env_.Get("AWS_ROLE_SESSION_NAME")) {
      session_name = *set;
    } else {
      const auto unix_seconds =
          std::chrono::duration_cast<std::chrono::seconds>(Clock::now().time_since_epoch()).count();
      session_name = "tierckpt-" + std::to_string(unix_seconds);
    }
    TC_ASSIGN_OR_RETURN(HttpUrl url, StsUrl());

    const std::string body =
        "Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=" + UriEncode(*role_arn, true) +
        "&RoleSessionName=" + UriEncode(session_name, true) + "&WebIdentityToken=" + UriEncode(token, true);
    HttpRequest request;
    request.method = "POST";
    request.endpoint = url.endpoint;
    request.path = url.path;
    request.query = url.query;
    request.headers = {{"content-type", "application/x-www-form-urlencoded; charset=utf-8"},
                       {"accept", "application/xml"}};
    request.body = body.data();
    request.body_size = body.size();
    const std::string what = "web identity: STS AssumeRoleWithWebIdentity at " + url.endpoint + url.path +
                             " for role " + *role_arn;
    Result<HttpResponse> response = transport_->Send(request);
    if (!response.ok()) {
      return response.status().WithContext(what +
                                           " (check network access to STS, or set "
                                           "AWS_ENDPOINT_URL_STS)");
    }
    TC_ASSIGN_OR_RETURN(Credentials creds, ParseResponse(*response, what, *token_file));
    creds.source = "web identity (" + *role_arn + ")";
    return std::optional<Credentials>(std::move(creds));
  }

 private:
  Result<HttpUrl> StsUrl() const {
    for (const char* variable : {"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL"}) {
      std::optional<std::string> set = env_.Get(variable);
      if (!set) continue;
      Result<HttpUrl> url = ParseHttpUrl(*set);
      if (!url.ok()) return url.status().WithContext(std::string("web identity: ") + variable);
      return url;
    }
    std::string region = region_;
    if (region.empty()) region = env_.Get("AWS_REGION").value_or("");
    if (region.empty()) region = env_.Get("AWS_DEFAULT_REGION").value_or("");
    if (region.empty()) region = ProfileRegion(env_).value_or("us-east-1");
    if (!ValidRegion(region)) {
      return InvalidArgument("web identity: region '" + BodySnippet(region) +
                             "' is not a valid AWS region name; fix AWS_REGION or set AWS_ENDPOINT_URL_STS");
    }
    const std::string suffix = region.rfind("cn-", 0) == 0 ? ".amazonaws.com.cn" : ".amazonaws.com";
    return ParseHttpUrl("https://sts." + region + suffix);
  }

  static Result<Credentials> ParseResponse(const HttpResponse& response, const std::string& what,
                                           const std::string& token_file) {
    pugi::xml_document doc;
    const pugi::xml_parse_result parsed = doc.load_buffer(response.body.data(), response.body.size());
    if (response.status / 100 != 2) {
      const pugi::xml_node error = doc.child("ErrorResponse").child("Error");
      const std::string code = error.child_value("Code");
      const std::string message = error.child_value("Message");
      std::string text = what + " returned HTTP " + std::to_string(response.status);
      text += code.empty() ? ": " + BodySnippet(response.body) : " " + code + ": " + message;
      const bool transient = response.status >= 500 || response.status == 429 || code == "Throttling";
      if (transient) return Unavailable(text + "; STS is unavailable or throttling, try again later");
      return PermissionDenied(text +
                              "; check AWS_ROLE_ARN, the role's trust policy for this cluster's "
                              "OIDC provider, and the token in " +
                              token_file);
    }
    if (!parsed) {
      return ProtocolError(what + ": the response is not XML (" + parsed.description() +
                           "): " + BodySnippet(response.body));
    }
    const pugi::xml_node credentials = doc.child("AssumeRoleWithWebIdentityResponse")
                                           .child("AssumeRoleWithWebIdentityResult")
                                           .child("Credentials");
    if (!credentials) {
      return ProtocolError(what + ": the response has no AssumeRoleWithWebIdentityResult/Credentials: " +
                           BodySnippet(response.body));
    }
    Credentials creds;
    creds.access_key_id = TrimAscii(credentials.child_value("AccessKeyId"));
    creds.secret_access_key = TrimAscii(credentials.child_value("SecretAccessKey"));
    creds.session_token = TrimAscii(credentials.child_value("SessionToken"));
    const std::string_view expiration = TrimAscii(credentials.child_value("Expiration"));
    const std::pair<const char*, std::string_view> required[] = {{"AccessKeyId", creds.access_key_id},
                                                                 {"SecretAccessKey", creds.secret_access_key},
                                                                 {"SessionToken", creds.session_token},
                                                                 {"Expiration", expiration}};
    for (const auto& [field, value] : required) {
      if (value.empty()) return ProtocolError(what + ": the response's Credentials has no " + field);
    }
    Result<Clock::time_point> expires = ParseIso8601(expiration);
    if (!expires.ok()) return expires.status().WithContext(what + ": Expiration");
    creds.expiration = *expires;
    return creds;
  }

  // const after construction
  const Environment env_;
  const std::shared_ptr<HttpTransport> transport_;
  const std::string region_;
};

}  // namespace

std::unique_ptr<CredentialsSource> MakeWebIdentitySource(Environment env,
                                                         std::shared_ptr<HttpTransport> transport,
                                                         std::string region) {
  return std::make_unique<WebIdentitySource>(std::move(env), std::move(transport), std::move(region));
}

}  // namespace tierckpt::s3
