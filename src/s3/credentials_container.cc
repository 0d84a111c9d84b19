// credentials_container.cc — the container source (ECS task roles, EKS Pod
// Identity), and ParseJsonCredentials() which IMDS shares.
#include <arpa/inet.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

constexpr char kEcsEndpoint[] = "http://169.254.170.2";

bool IsIpv6(std::string_view bracketed, const char* literal) {
  if (bracketed.size() < 2 || bracketed.front() != '[' || bracketed.back() != ']') return false;
  const std::string inner(bracketed.substr(1, bracketed.size() - 2));
  unsigned char a[16], b[16];
  return ::inet_pton(AF_INET6, inner.c_str(), a) == 1 && ::inet_pton(AF_INET6, literal, b) == 1 &&
         std::memcmp(a, b, sizeof(a)) == 0;
}

// http:// is allowed only to hosts on this machine or the EKS Pod Identity agent.
bool AllowedHttpHost(const std::string& host) {
  if (host == "localhost") return true;
  unsigned char v4[4];
  if (::inet_pton(AF_INET, host.c_str(), v4) == 1) {
    if (v4[0] == 127) return true;
    return v4[0] == 169 && v4[1] == 254 && v4[2] == 170 && v4[3] == 23;
  }
  return IsIpv6(host, "::1") || IsIpv6(host, "fd00:ec2::23");
}

bool HasLineBreak(std::string_view s) { return s.find_first_of("\r\n") != std::string_view::npos; }

class ContainerSource final : public CredentialsSource {
 public:
  ContainerSource(Environment env, std::shared_ptr<HttpTransport> transport)
      : env_(std::move(env)), transport_(std::move(transport)) {}

  std::string Name() const override { return "container"; }

  Result<std::optional<Credentials>> Fetch(std::string* why_not) override {
    std::optional<std::string> relative = env_.Get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    std::optional<std::string> full = env_.Get("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    if (!relative && !full) {
      *why_not = "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and AWS_CONTAINER_CREDENTIALS_FULL_URI are not set";
      return std::optional<Credentials>();
    }
    HttpUrl url;
    if (relative) {
      if (relative->front() != '/') {
        return InvalidArgument("container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI '" +
                               BodySnippet(*relative) +
                               "' must start with '/' (ECS sets it to /v2/credentials/...)");
      }
      Result<HttpUrl> parsed = ParseHttpUrl(kEcsEndpoint + *relative);
      if (!parsed.ok())
        return parsed.status().WithContext("container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
      url = std::move(*parsed);
    } else {
      Result<HttpUrl> parsed = ParseHttpUrl(*full);
      if (!parsed.ok())
        return parsed.status().WithContext("container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI");
      url = std::move(*parsed);
      if (url.scheme == "http" && !AllowedHttpHost(url.host)) {
        return InvalidArgument("container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI '" +
                               BodySnippet(*full) +
                               "' is not allowed: an http:// URI must point at a loopback address "
                               "(127.0.0.0/8, [::1], localhost) "
                               "or the EKS Pod Identity agent (169.254.170.23, [fd00:ec2::23]); use https:// "
                               "or one of those hosts");
      }
    }
    const std::string where = "container credentials at " + url.endpoint + url.path;

    HttpRequest request;
    request.method = "GET";
    request.endpoint = url.endpoint;
    request.path = url.path;
    request.query = url.query;
    request.headers = {{"accept", "application/json"}};
    TC_ASSIGN_OR_RETURN(std::optional<std::string> authorization, Authorization(where));
    if (authorization) request.headers.emplace_back("authorization", std::move(*authorization));

    Result<HttpResponse> response = transport_->Send(request);
    if (!response.ok()) {
      return response.status().WithContext(where + " (is the ECS agent or EKS Pod Identity agent running?)");
    }
    if (response->status != 200) {
      std::string text =
          where + " returned HTTP " + std::to_string(response->status) + ": " + BodySnippet(response->body);
      if (response->status >= 500 || response->status == 429) {
        return Unavailable(text + "; the credentials endpoint is failing, try again later");
      }
      if (response->status == 401 || response->status == 403) {
        return PermissionDenied(text +
                                "; check AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE / "
                                "AWS_CONTAINER_AUTHORIZATION_TOKEN");
      }
      return ProtocolError(text + "; check AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI");
    }
    TC_ASSIGN_OR_RETURN(Credentials creds, ParseJsonCredentials(response->body, where, "container"));
    return std::optional<Credentials>(std::move(creds));
  }

 private:
  // The Authorization header: the token file (re-read on every fetch) wins
  // over the token variable; none when neither is set.
  Result<std::optional<std::string>> Authorization(const std::string& where) const {
    std::string token;
    std::string from;
    if (std::optional<std::string> file = env_.Get("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE")) {
      Result<std::string> text = ReadSmallFile(*file);
      if (!text.ok()) {
        return text.status().WithContext(where + ": cannot read AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=" +
                                         *file + " (check that the token volume is mounted)");
      }
      token = std::string(TrimAscii(*text));
      from = "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=" + *file;
    } else if (std::optional<std::string> value = env_.Get("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
      token = std::string(TrimAscii(*value));
      from = "AWS_CONTAINER_AUTHORIZATION_TOKEN";
    } else {
      return std::optional<std::string>();
    }
    if (token.empty()) return InvalidArgument(where + ": the authorization token from " + from + " is empty");
    if (HasLineBreak(token)) {
      return InvalidArgument(where + ": the authorization token from " + from +
                             " contains a line break; it must be a single line");
    }
    return std::optional<std::string>(std::move(token));
  }

  // const after construction
  const Environment env_;
  const std::shared_ptr<HttpTransport> transport_;
};

}  // namespace

Result<Credentials> ParseJsonCredentials(std::string_view body, std::string_view where, std::string source) {
  const nlohmann::json doc = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return ProtocolError(std::string(where) + ": the response is not a JSON object: " + BodySnippet(body));
  }
  auto field = [&](const char* name, bool required) -> Result<std::string> {
    auto it = doc.find(name);
    if (it == doc.end() || it->is_null()) {
      if (!required) return std::string();
      return ProtocolError(std::string(where) + ": the response has no " + name + ": " + BodySnippet(body));
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
      return ProtocolError(std::string(where) + ": the response's " + name + " is not a non-empty string");
    }
    return it->get<std::string>();
  };
  Credentials creds;
  TC_ASSIGN_OR_RETURN(creds.access_key_id, field("AccessKeyId", true));
  TC_ASSIGN_OR_RETURN(creds.secret_access_key, field("SecretAccessKey", true));
  TC_ASSIGN_OR_RETURN(creds.session_token, field("Token", false));
  TC_ASSIGN_OR_RETURN(std::string expiration, field("Expiration", false));
  if (!expiration.empty()) {
    Result<Clock::time_point> expires = ParseIso8601(expiration);
    if (!expires.ok()) return expires.status().WithContext(std::string(where) + ": Expiration");
    creds.expiration = *expires;
  }
  creds.source = std::move(source);
  return creds;
}

std::unique_ptr<CredentialsSource> MakeContainerSource(Environment env,
                                                       std::shared_ptr<HttpTransport> transport) {
  return std::make_unique<ContainerSource>(std::move(env), std::move(transport));
}

}  // namespace tierckpt::s3
