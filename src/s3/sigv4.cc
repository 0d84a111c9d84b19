// sigv4.cc — see sigv4.h.
#include "s3/sigv4.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <utility>
#include <vector>

namespace tierckpt::s3 {
namespace {

constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";
using Digest = std::array<unsigned char, 32>;

struct MacDeleter {
  void operator()(EVP_MAC* mac) const { EVP_MAC_free(mac); }
};
struct MacCtxDeleter {
  void operator()(EVP_MAC_CTX* ctx) const { EVP_MAC_CTX_free(ctx); }
};
using MacPtr = std::unique_ptr<EVP_MAC, MacDeleter>;
using MacCtxPtr = std::unique_ptr<EVP_MAC_CTX, MacCtxDeleter>;

bool Sha256(const void* data, size_t size, Digest& out) {
  unsigned int len = 0;
  return EVP_Digest(data, size, out.data(), &len, EVP_sha256(), nullptr) == 1 && len == out.size();
}

// The HMAC algorithm, fetched once; EVP_MAC objects may be shared by threads.
EVP_MAC* HmacAlgorithm() {
  static const MacPtr mac(EVP_MAC_fetch(nullptr, OSSL_MAC_NAME_HMAC, nullptr));
  return mac.get();
}

bool HmacSha256(std::string_view key, std::string_view data, Digest& out) {
  EVP_MAC* mac = HmacAlgorithm();
  if (mac == nullptr) return false;
  MacCtxPtr ctx(EVP_MAC_CTX_new(mac));
  if (!ctx) return false;
  char digest_name[] = "SHA256";
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest_name, 0),
      OSSL_PARAM_construct_end(),
  };
  size_t len = 0;
  return EVP_MAC_init(ctx.get(), reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) ==
             1 &&
         EVP_MAC_update(ctx.get(), reinterpret_cast<const unsigned char*>(data.data()), data.size()) == 1 &&
         EVP_MAC_final(ctx.get(), out.data(), &len, out.size()) == 1 && len == out.size();
}

std::string_view AsView(const Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string Hex(const Digest& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(d.size() * 2);
  for (unsigned char c : d) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Leading and trailing whitespace dropped, inner runs collapsed to one space
// (what botocore does: ' '.join(value.split())).
std::string CanonicalHeaderValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  bool pending_space = false;
  for (char c : value) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

// RFC 3986 5.2.4 dot-segment removal plus collapsing of empty segments, as
// the AWS services other than S3 expect (botocore's normalize_url_path).
std::string NormalizePath(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view segment = path.substr(start, end - start);
    if (segment == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!segment.empty() && segment != ".") {
      segments.push_back(segment);
    }
    start = end + 1;
  }
  std::string out = "/";
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i > 0) out.push_back('/');
    out += segments[i];
  }
  if (!segments.empty() && !path.empty() && path.back() == '/') out.push_back('/');
  return out;
}

std::string CanonicalUri(std::string_view path, UriMode mode) {
  if (mode == UriMode::kS3) return path.empty() ? std::string("/") : std::string(path);
  return UriEncode(NormalizePath(path), /*encode_slash=*/false);
}

// Headers sorted by lower-case name (stable, so repeated headers keep their
// order), values canonicalised.
std::vector<std::pair<std::string, std::string>> SortedHeaders(const Headers& headers) {
  std::vector<std::pair<std::string, std::string>> sorted;
  sorted.reserve(headers.size());
  for (const auto& [name, value] : headers) sorted.emplace_back(AsciiLower(name), CanonicalHeaderValue(value));
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return sorted;
}

// "host;x-amz-date": the distinct names of sorted headers.
std::string SignedHeaders(const std::vector<std::pair<std::string, std::string>>& sorted) {
  std::string out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].first == sorted[i - 1].first) continue;
    if (!out.empty()) out.push_back(';');
    out += sorted[i].first;
  }
  return out;
}

std::optional<std::string_view> FindHeaderAnyCase(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key.size() == name.size() && AsciiLower(key) == name) return std::string_view(value);
  }
  return std::nullopt;
}

void EraseHeader(Headers& headers, std::string_view name) {
  std::erase_if(headers,
                [&](const auto& h) { return h.first.size() == name.size() && AsciiLower(h.first) == name; });
}

bool IsAmzDate(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return false;
  for (size_t i = 0; i < 15; ++i) {
    if (i != 8 && (s[i] < '0' || s[i] > '9')) return false;
  }
  return true;
}

}  // namespace

std::string Sha256Hex(const void* data, size_t size) {
  Digest d{};
  if (!Sha256(data == nullptr ? "" : data, size, d)) {
    std::fputs("tierckpt: OpenSSL EVP_Digest(SHA-256) failed (out of memory?)\n", stderr);
    std::abort();
  }
  return Hex(d);
}

std::string FormatAmzDate(Clock::time_point time) {
  const std::time_t t = Clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

Result<std::string> HostFromEndpoint(std::string_view endpoint) {
  std::string_view rest = endpoint;
  std::string_view default_port;
  if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    default_port = "443";
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    default_port = "80";
  } else {
    return InvalidArgument("SigV4: endpoint '" + std::string(endpoint) +
                           "' must start with http:// or https:// (e.g. https://s3.us-east-1.amazonaws.com)");
  }
  std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  if (authority.empty() || authority.find('@') != std::string_view::npos) {
    return InvalidArgument("SigV4: endpoint '" + std::string(endpoint) +
                           "' has no host (or has user info); expected http(s)://host[:port]");
  }
  // The port follows the last ':' unless that ':' is inside an IPv6 literal.
  const size_t colon = authority.rfind(':');
  const size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    const std::string_view port = authority.substr(colon + 1);
    if (port.empty() || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgument("SigV4: endpoint '" + std::string(endpoint) + "' has a malformed port");
    }
    if (port == default_port) authority = authority.substr(0, colon);
  }
  return std::string(authority);
}

std::string CanonicalRequest(const HttpRequest& request, std::string_view payload_hash) {
  return CanonicalRequest(request, payload_hash, UriMode::kS3);
}

std::string CanonicalRequest(const HttpRequest& request, std::string_view payload_hash, UriMode uri_mode) {
  const auto sorted = SortedHeaders(request.headers);
  std::string out;
  out.reserve(256 + request.path.size());
  out += request.method;
  out.push_back('\n');
  out += CanonicalUri(request.path, uri_mode);
  out.push_back('\n');
  out += CanonicalQuery(request);
  out.push_back('\n');
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i].first == sorted[i - 1].first) {
      out.back() = ',';  // repeated header: values joined by ',' in request order
    } else {
      out += sorted[i].first;
      out.push_back(':');
    }
    out += sorted[i].second;
    out.push_back('\n');
  }
  out.push_back('\n');
  out += SignedHeaders(sorted);
  out.push_back('\n');
  out += payload_hash;
  return out;
}

std::string StringToSign(std::string_view canonical_request, std::string_view amz_date,
                         std::string_view scope) {
  std::string out;
  out.reserve(kAlgorithm.size() + amz_date.size() + scope.size() + 68);
  out += kAlgorithm;
  out.push_back('\n');
  out += amz_date;
  out.push_back('\n');
  out += scope;
  out.push_back('\n');
  out += Sha256Hex(canonical_request.data(), canonical_request.size());
  return out;
}

Result<SignatureParts> ComputeSignature(const HttpRequest& request, const Credentials& credentials,
                                        std::string_view region, std::string_view service, UriMode uri_mode) {
  const auto amz_date = FindHeaderAnyCase(request.headers, "x-amz-date");
  if (!amz_date || !IsAmzDate(*amz_date)) {
    return InvalidArgument("SigV4: " + request.method + " " + request.endpoint + request.path +
                           ": x-amz-date header missing or not yyyymmddThhmmssZ");
  }
  std::string payload_hash;
  if (const auto h = FindHeaderAnyCase(request.headers, "x-amz-content-sha256")) {
    payload_hash = std::string(*h);
  } else {
    payload_hash = Sha256Hex(request.body, request.body == nullptr ? 0 : request.body_size);
  }
  const std::string_view date = amz_date->substr(0, 8);
  std::string scope =
      std::string(date) + "/" + std::string(region) + "/" + std::string(service) + "/aws4_request";

  SignatureParts parts;
  parts.canonical_request = CanonicalRequest(request, payload_hash, uri_mode);
  parts.string_to_sign = StringToSign(parts.canonical_request, *amz_date, scope);

  // kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region), service), "aws4_request")
  Digest k_date{}, k_region{}, k_service{}, k_signing{}, signature{};
  const std::string secret = "AWS4" + credentials.secret_access_key;
  if (!HmacSha256(secret, date, k_date) || !HmacSha256(AsView(k_date), region, k_region) ||
      !HmacSha256(AsView(k_region), service, k_service) ||
      !HmacSha256(AsView(k_service), "aws4_request", k_signing) ||
      !HmacSha256(AsView(k_signing), parts.string_to_sign, signature)) {
    return Internal("SigV4: OpenSSL HMAC-SHA256 failed (out of memory?) signing " + request.method + " " +
                    request.endpoint + request.path);
  }
  parts.signature = Hex(signature);
  parts.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key_id + "/" + scope +
                        ", SignedHeaders=" + SignedHeaders(SortedHeaders(request.headers)) +
                        ", Signature=" + parts.signature;
  return parts;
}

Status SignRequest(HttpRequest& request, const Credentials& credentials, const SigningParams& params) {
  const std::string where = request.method + " " + request.endpoint + request.path;
  if (credentials.access_key_id.empty() || credentials.secret_access_key.empty()) {
    return InvalidArgument("SigV4: cannot sign " + where + ": credentials from '" + credentials.source +
                           "' have an empty access key id or secret access key; check AWS_ACCESS_KEY_ID/"
                           "AWS_SECRET_ACCESS_KEY or the credentials source");
  }
  if (params.region.empty() || params.service.empty()) {
    return InvalidArgument("SigV4: cannot sign " + where +
                           ": region and service must be set (set AWS_REGION or ?region= in the s3:// URL)");
  }
  TC_ASSIGN_OR_RETURN(std::string host, HostFromEndpoint(request.endpoint));

  for (std::string_view name :
       {"authorization", "host", "x-amz-date", "x-amz-security-token", "x-amz-s3session-token"}) {
    EraseHeader(request.headers, name);
  }
  request.headers.emplace_back("host", std::move(host));
  request.headers.emplace_back("x-amz-date", FormatAmzDate(params.now));
  if (!FindHeaderAnyCase(request.headers, "x-amz-content-sha256")) {
    request.headers.emplace_back(
        "x-amz-content-sha256", params.sign_payload
                                    ? Sha256Hex(request.body, request.body == nullptr ? 0 : request.body_size)
                                    : std::string(kUnsignedPayload));
  }
  if (!credentials.session_token.empty()) {
    request.headers.emplace_back(params.token_header == TokenHeader::kS3SessionToken ? "x-amz-s3session-token"
                                                                                     : "x-amz-security-token",
                                 credentials.session_token);
  }
  TC_ASSIGN_OR_RETURN(SignatureParts parts,
                      ComputeSignature(request, credentials, params.region, params.service, params.uri_mode));
  request.headers.emplace_back("authorization", std::move(parts.authorization));
  return Status::Ok();
}

}  // namespace tierckpt::s3
