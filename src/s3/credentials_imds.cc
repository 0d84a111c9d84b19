// credentials_imds.cc — the EC2 instance metadata source (IMDSv2 only).
//
//   PUT /latest/api/token                       x-aws-ec2-metadata-token-ttl-seconds: 21600
//   GET /latest/meta-data/iam/security-credentials/         → role name
//   GET /latest/meta-data/iam/security-credentials/<role>   → JSON credentials
// Both GETs carry x-aws-ec2-metadata-token. When nothing answers the PUT (off
// EC2, or a container whose hop limit drops it) the source is "not
// selected", so the chain can report every source it tried.
#include <cctype>
#include <nlohmann/json.hpp>

#include "s3/credentials_chain.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

constexpr char kTokenPath[] = "/latest/api/token";
constexpr char kRolesPath[] = "/latest/meta-data/iam/security-credentials/";
constexpr char kTokenTtlSeconds[] = "21600";

class ImdsSource final : public CredentialsSource {
 public:
  ImdsSource(Environment env, std::shared_ptr<HttpTransport> transport)
      : env_(std::move(env)), transport_(std::move(transport)) {}

  std::string Name() const override { return "IMDS"; }

  Result<std::optional<Credentials>> Fetch(std::string* why_not) override {
    if (std::optional<std::string> disabled = env_.Get("AWS_EC2_METADATA_DISABLED")) {
      if (AsciiLower(TrimAscii(*disabled)) == "true") {
        *why_not = "AWS_EC2_METADATA_DISABLED=true";
        return std::optional<Credentials>();
      }
    }
    TC_ASSIGN_OR_RETURN(HttpUrl base, Endpoint());
    const std::string where = "IMDS at " + base.endpoint;

    HttpRequest put;
    put.method = "PUT";
    put.endpoint = base.endpoint;
    put.path = kTokenPath;
    put.headers = {{"x-aws-ec2-metadata-token-ttl-seconds", kTokenTtlSeconds}};
    Result<HttpResponse> token_response = transport_->Send(put);
    if (!token_response.ok()) {
      const Code code = token_response.status().code();
      if (code == Code::kUnavailable || code == Code::kTimeout) {
        *why_not = "nothing answered at " + base.endpoint + " (" + token_response.status().message() +
                   "): not on EC2, or in a container the IMDS hop limit (HttpPutResponseHopLimit) must be 2";
        return std::optional<Credentials>();
      }
      return token_response.status().WithContext(where + ": PUT " + kTokenPath);
    }
    if (token_response->status != 200) {
      return Failure(*token_response, where + ": PUT " + kTokenPath,
                     "IMDSv2 session tokens must be enabled; in a container raise the instance's "
                     "HttpPutResponseHopLimit to 2");
    }
    const std::string token(TrimAscii(token_response->body));
    if (token.empty() || token.find_first_of("\r\n") != std::string::npos) {
      return ProtocolError(where + ": PUT " + kTokenPath + " returned an empty or multi-line token");
    }

    TC_ASSIGN_OR_RETURN(HttpResponse roles, Get(base, kRolesPath, token, where));
    if (roles.status == 404) {
      return NotFound(where +
                      ": no IAM role (instance profile) is attached to this instance; attach one, or "
                      "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    }
    if (roles.status != 200) {
      return Failure(roles, where + ": GET " + kRolesPath, "check the instance profile");
    }
    const std::string_view listing = TrimAscii(roles.body);
    const std::string role(TrimAscii(listing.substr(0, listing.find('\n'))));
    if (role.empty()) {
      return NotFound(where + ": GET " + kRolesPath +
                      " listed no role; attach an instance profile, or set "
                      "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    }

    const std::string role_path = kRolesPath + UriEncode(role, true);
    TC_ASSIGN_OR_RETURN(HttpResponse creds_response, Get(base, role_path, token, where));
    const std::string what = where + ": GET " + role_path;
    if (creds_response.status != 200) return Failure(creds_response, what, "check the instance profile");
    const nlohmann::json doc =
        nlohmann::json::parse(creds_response.body, nullptr, /*allow_exceptions=*/false);
    if (doc.is_object()) {
      auto code = doc.find("Code");
      if (code != doc.end() && code->is_string() && code->get_ref<const std::string&>() != "Success") {
        auto message = doc.find("Message");
        return Unavailable(what + " returned Code " + code->get<std::string>() + ": " +
                           (message != doc.end() && message->is_string() ? message->get<std::string>() : "") +
                           "; check the role " + role + " and try again");
      }
    }
    TC_ASSIGN_OR_RETURN(Credentials creds,
                        ParseJsonCredentials(creds_response.body, what, "IMDS role " + role));
    if (!creds.expiration) return ProtocolError(what + ": the response has no Expiration");
    return std::optional<Credentials>(std::move(creds));
  }

 private:
  Result<HttpUrl> Endpoint() const {
    if (std::optional<std::string> set = env_.Get("AWS_EC2_METADATA_SERVICE_ENDPOINT")) {
      Result<HttpUrl> url = ParseHttpUrl(*set);
      if (!url.ok()) return url.status().WithContext("IMDS: AWS_EC2_METADATA_SERVICE_ENDPOINT");
      return url;
    }
    const std::string mode = AsciiLower(env_.Get("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE").value_or("ipv4"));
    if (mode == "ipv4") return ParseHttpUrl("http://169.254.169.254");
    if (mode == "ipv6") return ParseHttpUrl("http://[fd00:ec2::254]");
    return InvalidArgument("IMDS: AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE='" + BodySnippet(mode) +
                           "' is neither IPv4 nor IPv6; fix or unset it");
  }

  Result<HttpResponse> Get(const HttpUrl& base, const std::string& path, const std::string& token,
                           const std::string& where) const {
    HttpRequest get;
    get.method = "GET";
    get.endpoint = base.endpoint;
    get.path = path;
    get.headers = {{"x-aws-ec2-metadata-token", token}};
    Result<HttpResponse> response = transport_->Send(get);
    if (!response.ok()) return response.status().WithContext(where + ": GET " + path);
    return response;
  }

  static Status Failure(const HttpResponse& response, const std::string& what, std::string_view hint) {
    std::string text = what + " returned HTTP " + std::to_string(response.status) + ": " +
                       BodySnippet(response.body) + "; " + std::string(hint);
    if (response.status >= 500 || response.status == 429) return Unavailable(std::move(text));
    if (response.status == 401 || response.status == 403) return PermissionDenied(std::move(text));
    return ProtocolError(std::move(text));
  }

  // const after construction
  const Environment env_;
  const std::shared_ptr<HttpTransport> transport_;
};

}  // namespace

std::unique_ptr<CredentialsSource> MakeImdsSource(Environment env, std::shared_ptr<HttpTransport> transport) {
  return std::make_unique<ImdsSource>(std::move(env), std::move(transport));
}

}  // namespace tierckpt::s3
