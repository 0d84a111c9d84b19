// s3_express.cc — see s3_express.h.
#include "s3/s3_express.h"

#include <cstdio>
#include <ctime>
#include <map>
#include <pugixml.hpp>
#include <utility>

#include "common/log.h"
#include "common/mutex.h"
#include "s3/sigv4.h"

namespace tierckpt::s3 {
namespace {

constexpr std::string_view kExpressSuffix = "--x-s3";

// "2024-05-01T12:05:00Z", optionally with fractional seconds; UTC only.
std::optional<Clock::time_point> ParseUtcTimestamp(const std::string& text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute, &second,
                  &consumed) != 6) {
    return std::nullopt;
  }
  std::string_view rest = std::string_view(text).substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() >= '0' && rest.front() <= '9') rest.remove_prefix(1);
  }
  if (rest != "Z" && rest != "+00:00") return std::nullopt;
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return Clock::from_time_t(timegm(&tm));
}

std::string ErrorDetail(const std::string& body) {
  pugi::xml_document doc;
  if (!doc.load_buffer(body.data(), body.size())) return "";
  const pugi::xml_node error = doc.child("Error");
  const std::string code = error.child_value("Code");
  const std::string message = error.child_value("Message");
  if (code.empty() && message.empty()) return "";
  return code + (message.empty() ? "" : ": " + message);
}

// One bucket's session.
struct Session {
  Mutex mu;
  CondVar refreshed{&mu};
  std::optional<Credentials> credentials GUARDED_BY(mu);
  bool refreshing GUARDED_BY(mu) = false;
  uint64_t generation GUARDED_BY(mu) = 0;  // completed refreshes
  Status last_error GUARDED_BY(mu);        // of the latest refresh
};

class ExpressSigner final : public RequestSigner {
 public:
  ExpressSigner(std::shared_ptr<HttpTransport> transport, std::shared_ptr<CredentialsProvider> credentials,
                std::string region, std::function<std::string(const std::string&)> bucket_endpoint,
                ExpressOptions options)
      : transport_(std::move(transport)),
        credentials_(std::move(credentials)),
        region_(std::move(region)),
        bucket_endpoint_(std::move(bucket_endpoint)),
        options_(std::move(options)) {}

  Status Sign(HttpRequest& request, const std::string& bucket) override {
    TC_ASSIGN_OR_RETURN(Credentials session, SessionFor(bucket));
    SigningParams params;
    params.region = region_;
    params.service = "s3express";
    params.now = Now();
    params.token_header = TokenHeader::kS3SessionToken;
    return SignRequest(request, session, params);
  }

 private:
  Clock::time_point Now() const { return options_.now ? options_.now() : Clock::now(); }

  Session& SlotFor(const std::string& bucket) {
    MutexLock lock(&mu_);
    std::unique_ptr<Session>& slot = sessions_[bucket];
    if (!slot) slot = std::make_unique<Session>();
    return *slot;
  }

  // Valid session credentials for `bucket`, refreshing single-flight.
  Result<Credentials> SessionFor(const std::string& bucket) {
    if (bucket.empty()) {
      return InvalidArgument(
          "S3 Express: a request without a bucket cannot be signed with session credentials");
    }
    Session& s = SlotFor(bucket);
    MutexLock lock(&s.mu);
    if (s.credentials && Now() + options_.refresh_margin < *s.credentials->expiration) return *s.credentials;
    if (s.refreshing) {
      // Someone else is calling CreateSession: share its outcome.
      const uint64_t generation = s.generation;
      while (s.generation == generation) s.refreshed.Wait();
      if (s.credentials && Now() < *s.credentials->expiration) return *s.credentials;
      return s.last_error.ok() ? Status(Unavailable("S3 Express session for bucket '" + bucket +
                                                    "' expired as soon as it was created; check the clock"))
                               : s.last_error;
    }
    s.refreshing = true;
    lock.Unlock();
    Result<Credentials> fresh = CreateSession(bucket);
    lock.Lock();
    s.refreshing = false;
    ++s.generation;
    s.last_error = fresh.ok() ? Status::Ok() : fresh.status();
    if (fresh.ok()) s.credentials = *fresh;
    s.refreshed.SignalAll();
    if (fresh.ok()) return fresh;
    if (s.credentials && Now() < *s.credentials->expiration) {
      Log(LogLevel::kWarn, "s3express_refresh_failed").Kv("bucket", bucket).Err(fresh.status());
      return *s.credentials;  // the old session is still good for a little while
    }
    return fresh;
  }

  Result<Credentials> CreateSession(const std::string& bucket) {
    const std::string endpoint = Endpoint(bucket);
    const std::string where = "S3 Express CreateSession for bucket '" + bucket + "' at " + endpoint;
    if (endpoint.empty()) {
      return InvalidArgument(where +
                             ": no endpoint; directory bucket names look like 'name--usw2-az1--x-s3'");
    }
    if (!credentials_) return FailedPrecondition(where + ": no base credentials provider");
    Result<Credentials> base = credentials_->Get();
    if (!base.ok())
      return base.status().WithContext(where + " (base credentials from " + credentials_->Name() + ")");

    HttpRequest request;
    request.method = "GET";
    request.endpoint = endpoint;
    request.path = "/";
    request.query = {{"session", ""}};
    request.headers = {{"x-amz-create-session-mode", "ReadWrite"}};
    SigningParams params;
    params.region = region_;
    params.service = "s3express";
    params.now = Now();
    params.sign_payload = true;
    TC_RETURN_IF_ERROR(SignRequest(request, *base, params));

    Result<HttpResponse> response = transport_->Send(request);
    if (!response.ok()) return response.status().WithContext(where);
    if (response->status != 200) return HttpError(where, bucket, *base, *response);
    Result<Credentials> session = ParseCreateSessionResult(response->body);
    if (!session.ok()) return session.status().WithContext(where);
    return session;
  }

  std::string Endpoint(const std::string& bucket) const {
    if (bucket_endpoint_) return bucket_endpoint_(bucket);
    return ExpressEndpoint(bucket, region_).value_or("");
  }

  Status HttpError(const std::string& where, const std::string& bucket, const Credentials& base,
                   const HttpResponse& response) const {
    const int code = response.status;
    std::string detail = ErrorDetail(response.body);
    std::string message =
        where + ": HTTP " + std::to_string(code) + (detail.empty() ? "" : " " + detail) + ". ";
    const std::string zone = ExpressZone(bucket).value_or("?");
    if (code == 401 || code == 403) {
      return PermissionDenied(message + "Check that the credentials from '" + base.source +
                              "' allow s3express:CreateSession on this bucket and that region '" + region_ +
                              "' is the region of zone " + zone);
    }
    if (code == 404) {
      return NotFound(message + "Check the bucket name, its zone id (" + zone + ") and the region ('" +
                      region_ + "')");
    }
    if (code == 429 || code >= 500)
      return Unavailable(message + "The service is busy or failing; retry later");
    return InvalidArgument(message + "Check the bucket name, the endpoint and region '" + region_ + "'");
  }

  const std::shared_ptr<HttpTransport> transport_;
  const std::shared_ptr<CredentialsProvider> credentials_;
  const std::string region_;
  const std::function<std::string(const std::string&)> bucket_endpoint_;
  const ExpressOptions options_;

  Mutex mu_;
  std::map<std::string, std::unique_ptr<Session>> sessions_ GUARDED_BY(mu_);  // never erased
};

}  // namespace

std::optional<std::string> ExpressZone(std::string_view bucket) {
  if (!bucket.ends_with(kExpressSuffix)) return std::nullopt;
  const std::string_view rest = bucket.substr(0, bucket.size() - kExpressSuffix.size());
  const size_t sep = rest.rfind("--");
  if (sep == std::string_view::npos || sep == 0 || rest[sep - 1] == '-') return std::nullopt;
  const std::string_view zone = rest.substr(sep + 2);
  // "<location>-az<digits>": usw2-az1, use1-az4, usw2-lax1-az1.
  const size_t az = zone.rfind("-az");
  if (az == std::string_view::npos || az == 0 || zone.front() == '-' || az + 3 == zone.size())
    return std::nullopt;
  for (size_t i = 0; i < zone.size(); ++i) {
    const char c = zone[i];
    const bool digit = c >= '0' && c <= '9';
    if (i >= az + 3 ? !digit : !((c >= 'a' && c <= 'z') || digit || c == '-')) return std::nullopt;
  }
  return std::string(zone);
}

bool IsExpressBucket(std::string_view bucket) { return ExpressZone(bucket).has_value(); }

std::optional<std::string> ExpressEndpoint(std::string_view bucket, std::string_view region) {
  const std::optional<std::string> zone = ExpressZone(bucket);
  if (!zone || region.empty()) return std::nullopt;
  return "https://" + std::string(bucket) + ".s3express-" + *zone + "." + std::string(region) +
         ".amazonaws.com";
}

Result<Credentials> ParseCreateSessionResult(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed) {
    return ProtocolError(std::string("CreateSession response is not XML (") + parsed.description() +
                         "): " + std::string(xml.substr(0, 200)));
  }
  const pugi::xml_node root = doc.document_element();
  const pugi::xml_node credentials = root.child("Credentials");
  if (!credentials) {
    return ProtocolError("CreateSession response has no <Credentials> under <" + std::string(root.name()) +
                         ">: " + std::string(xml.substr(0, 200)));
  }
  Credentials session;
  session.access_key_id = credentials.child_value("AccessKeyId");
  session.secret_access_key = credentials.child_value("SecretAccessKey");
  session.session_token = credentials.child_value("SessionToken");
  session.source = "s3express session";
  const std::string expiration = credentials.child_value("Expiration");
  for (const auto& [name, value] :
       {std::pair<const char*, const std::string*>{"AccessKeyId", &session.access_key_id},
        {"SecretAccessKey", &session.secret_access_key},
        {"SessionToken", &session.session_token},
        {"Expiration", &expiration}}) {
    if (value->empty())
      return ProtocolError(std::string("CreateSession response has an empty or no <") + name + ">");
  }
  session.expiration = ParseUtcTimestamp(expiration);
  if (!session.expiration) {
    return ProtocolError("CreateSession response has a malformed <Expiration> '" + expiration +
                         "' (expected 2024-05-01T12:05:00Z)");
  }
  return session;
}

std::unique_ptr<RequestSigner> MakeExpressSigner(
    std::shared_ptr<HttpTransport> transport, std::shared_ptr<CredentialsProvider> credentials,
    std::string region, std::function<std::string(const std::string& bucket)> bucket_endpoint,
    ExpressOptions options) {
  return std::make_unique<ExpressSigner>(std::move(transport), std::move(credentials), std::move(region),
                                         std::move(bucket_endpoint), std::move(options));
}

}  // namespace tierckpt::s3
