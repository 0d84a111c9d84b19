// s3_config.cc — see s3_config.h.
#include "s3/s3_config.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>
#include <vector>

#include "common/names.h"
#include "s3/credentials_chain.h"
#include "s3/s3_client.h"  // kMaxPartSize
#include "s3/s3_express.h"

namespace tierckpt::s3 {
namespace {

constexpr std::string_view kForm =
    "write s3://<bucket>[/<prefix>][?region=..&endpoint=http(s)://host[:port]&addressing=path|"
    "virtual&part_size=16MiB&multipart_threshold=16MiB&max_part_size=1GiB&concurrency=8&max_attempts=6&"
    "payload=unsigned|signed&conditional=auto|on|off]";
constexpr size_t kMaxPrefixLength = 512;
constexpr uint64_t kMinPartSize = 64u << 10;

Status Bad(std::string_view url, const std::string& what) {
  return InvalidArgument("S3 URL " + QuoteForMessage(url) + ": " + what + "; " + std::string(kForm));
}

bool IsLowerOrDigit(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool IsPrefixChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

bool LooksLikeIpv4(std::string_view s) {
  int dots = 0;
  for (char c : s) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}

// "123", "8MiB", "16M", "1GiB", "64KiB"; binary multiples.
std::optional<uint64_t> ParseSize(std::string_view s) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data()) return std::nullopt;
  std::string_view unit(end, static_cast<size_t>(s.data() + s.size() - end));
  uint64_t mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KiB") {
    mult = 1ULL << 10;
  } else if (unit == "M" || unit == "MiB") {
    mult = 1ULL << 20;
  } else if (unit == "G" || unit == "GiB") {
    mult = 1ULL << 30;
  } else {
    return std::nullopt;
  }
  if (value > UINT64_MAX / mult) return std::nullopt;
  return value * mult;
}

std::optional<int> ParseInt(std::string_view s, int lo, int hi) {
  int value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < lo || value > hi) {
    return std::nullopt;
  }
  return value;
}

// "http(s)://host[:port]" with an optional trailing '/'; returns it without.
Result<std::string> NormalizeEndpoint(std::string_view url, std::string_view endpoint,
                                      std::string_view from) {
  std::string e(endpoint);
  size_t scheme_end = std::string::npos;
  if (e.rfind("http://", 0) == 0) scheme_end = 7;
  if (e.rfind("https://", 0) == 0) scheme_end = 8;
  const std::string what = "endpoint " + QuoteForMessage(endpoint) + " (from " + std::string(from) + ")";
  if (scheme_end == std::string::npos) {
    return Bad(url, what + " is not an http:// or https:// URL");
  }
  while (e.size() > scheme_end && e.back() == '/') e.pop_back();
  std::string_view host = std::string_view(e).substr(scheme_end);
  if (host.empty()) return Bad(url, what + " has no host");
  for (char c : host) {
    const bool ok = IsPrefixChar(c) || c == ':' || c == '[' || c == ']';
    if (!ok) {
      return Bad(url, what + " has more than scheme://host[:port] (paths, queries and user "
                             "names are not supported)");
    }
  }
  return e;
}

}  // namespace

Status ValidateBucketName(std::string_view bucket) {
  const std::string q = QuoteForMessage(bucket);
  if (bucket.size() < 3 || bucket.size() > 63) {
    return InvalidArgument("bucket name " + q + " must be 3 to 63 characters long");
  }
  for (char c : bucket) {
    if (!IsLowerOrDigit(c) && c != '.' && c != '-') {
      return InvalidArgument("bucket name " + q +
                             " may hold only lower-case letters, digits, '.' and '-'");
    }
  }
  if (!IsLowerOrDigit(bucket.front()) || !IsLowerOrDigit(bucket.back())) {
    return InvalidArgument("bucket name " + q + " must start and end with a letter or digit");
  }
  if (bucket.find("..") != std::string_view::npos) {
    return InvalidArgument("bucket name " + q + " must not contain \"..\"");
  }
  if (LooksLikeIpv4(bucket)) {
    return InvalidArgument("bucket name " + q + " must not look like an IP address");
  }
  constexpr std::string_view kSuffix = "--x-s3";
  const bool express_suffix = bucket.size() > kSuffix.size() &&
                              bucket.substr(bucket.size() - kSuffix.size()) == kSuffix;
  if (express_suffix && !IsExpressBucket(bucket)) {
    return InvalidArgument("S3 Express bucket name " + q +
                           " must look like <name>--<zone id>--x-s3 (e.g. ckpt--usw2-az1--x-s3)");
  }
  return Status::Ok();
}

Result<S3Config> ParseS3Url(std::string_view url) { return ParseS3Url(url, Environment::Process()); }

Result<S3Config> ParseS3Url(std::string_view url, const Environment& env) {
  constexpr std::string_view kScheme = "s3://";
  if (url.substr(0, kScheme.size()) != kScheme) return Bad(url, "it does not start with s3://");
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  if (rest.find('#') != std::string_view::npos) return Bad(url, "fragments ('#') are not allowed");

  S3Config config;
  const size_t slash = rest.find('/');
  config.bucket = std::string(rest.substr(0, slash));
  if (config.bucket.empty()) return Bad(url, "the bucket name is missing");
  if (Status s = ValidateBucketName(config.bucket); !s.ok()) return Bad(url, s.message());
  config.express = IsExpressBucket(config.bucket);

  std::string_view prefix = slash == std::string_view::npos ? "" : rest.substr(slash + 1);
  while (!prefix.empty() && prefix.front() == '/') prefix.remove_prefix(1);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.size() > kMaxPrefixLength) {
    return Bad(url, "the prefix is longer than " + std::to_string(kMaxPrefixLength) + " bytes");
  }
  for (size_t start = 0; start < prefix.size();) {
    size_t end = prefix.find('/', start);
    if (end == std::string_view::npos) end = prefix.size();
    std::string_view component = prefix.substr(start, end - start);
    if (component.empty() || component == "." || component == "..") {
      return Bad(url, "the prefix " + QuoteForMessage(prefix) +
                          " has an empty, \".\" or \"..\" component");
    }
    for (char c : component) {
      if (!IsPrefixChar(c)) {
        return Bad(url, "the prefix " + QuoteForMessage(prefix) +
                            " may hold only A-Z a-z 0-9 _ . - and '/' between components");
      }
    }
    start = end + 1;
  }
  config.prefix = std::string(prefix);

  // The environment first; the URL's parameters override it below.
  if (auto e = env.Get("AWS_REGION")) {
    config.region = *e;
  } else if (auto d = env.Get("AWS_DEFAULT_REGION")) {
    config.region = *d;
  } else if (auto p = ProfileRegion(env)) {
    config.region = *p;
  }
  std::optional<std::pair<std::string, std::string>> endpoint;  // value, where from
  if (auto e = env.Get("AWS_ENDPOINT_URL_S3")) {
    endpoint.emplace(*e, "AWS_ENDPOINT_URL_S3");
  } else if (auto g = env.Get("AWS_ENDPOINT_URL")) {
    endpoint.emplace(*g, "AWS_ENDPOINT_URL");
  }

  std::optional<Addressing> addressing;
  std::optional<size_t> threshold;
  std::optional<size_t> max_part;  // max_part_size, when given
  std::optional<bool> full_object;  // multipart_checksum, when given
  for (size_t start = 0; start < query.size();) {
    size_t end = query.find('&', start);
    if (end == std::string_view::npos) end = query.size();
    std::string_view param = query.substr(start, end - start);
    start = end + 1;
    if (param.empty()) continue;
    const size_t eq = param.find('=');
    const std::string_view name = param.substr(0, eq);
    auto value_or = PercentDecode(eq == std::string_view::npos ? "" : param.substr(eq + 1));
    if (!value_or) return Bad(url, "parameter " + QuoteForMessage(name) + " has a bad %-escape");
    const std::string& value = *value_or;
    const std::string bad_value =
        "parameter " + std::string(name) + "=" + QuoteForMessage(value) + " is invalid";
    if (name == "region") {
      if (value.empty()) return Bad(url, bad_value + " (empty region)");
      config.region = value;
    } else if (name == "endpoint") {
      endpoint.emplace(value, "the URL");
    } else if (name == "addressing") {
      if (value == "path") {
        addressing = Addressing::kPath;
      } else if (value == "virtual") {
        addressing = Addressing::kVirtualHost;
      } else {
        return Bad(url, bad_value + " (use path or virtual)");
      }
    } else if (name == "part_size") {
      auto size = ParseSize(value);
      if (!size || *size < kMinPartSize || *size > kMaxPartSize) {
        return Bad(url, bad_value + " (a size from 64KiB to 5GiB, e.g. 16MiB)");
      }
      config.part_size = static_cast<size_t>(*size);
    } else if (name == "multipart_threshold") {
      auto size = ParseSize(value);
      if (!size || *size > kMaxPartSize) {
        return Bad(url, bad_value + " (a size up to 5GiB, e.g. 16MiB)");
      }
      threshold = static_cast<size_t>(*size);
    } else if (name == "max_part_size") {
      auto size = ParseSize(value);
      if (!size || *size < kMinPartSize || *size > kMaxPartSize) {
        return Bad(url, bad_value + " (a size from 64KiB to 5GiB, at least part_size, e.g. 1GiB)");
      }
      max_part = static_cast<size_t>(*size);
    } else if (name == "concurrency") {
      auto n = ParseInt(value, 1, 256);
      if (!n) return Bad(url, bad_value + " (1 to 256)");
      config.concurrency = *n;
    } else if (name == "max_attempts") {
      auto n = ParseInt(value, 1, 20);
      if (!n) return Bad(url, bad_value + " (1 to 20)");
      config.max_attempts = *n;
    } else if (name == "payload") {
      if (value != "unsigned" && value != "signed") {
        return Bad(url, bad_value + " (use unsigned or signed)");
      }
      config.sign_payload = value == "signed";
    } else if (name == "multipart_checksum") {
      if (value != "composite" && value != "full_object") {
        return Bad(url, bad_value + " (use composite or full_object)");
      }
      full_object = value == "full_object";
    } else if (name == "conditional") {
      if (value == "auto") {
        config.conditional = ConditionalWrites::kAuto;
      } else if (value == "on") {
        config.conditional = ConditionalWrites::kOn;
      } else if (value == "off") {
        config.conditional = ConditionalWrites::kOff;
      } else {
        return Bad(url, bad_value + " (use auto, on or off)");
      }
    } else {
      return Bad(url, "unknown parameter " + QuoteForMessage(name));
    }
  }

  if (endpoint) {
    TC_ASSIGN_OR_RETURN(config.endpoint, NormalizeEndpoint(url, endpoint->first, endpoint->second));
  }
  config.multipart_threshold = threshold.value_or(config.part_size);
  if (max_part && *max_part < config.part_size) {
    return Bad(url, "max_part_size=" + std::to_string(*max_part) + " is smaller than part_size=" +
                        std::to_string(config.part_size) + " (raise max_part_size or lower part_size)");
  }
  config.max_part_size = max_part.value_or(std::max(config.max_part_size, config.part_size));
  // Directory buckets keep whole-object checksums (what the Express path was
  // built and tested with); general-purpose buckets default to COMPOSITE.
  config.full_object_checksum = full_object.value_or(config.express);
  if (config.express) {
    if (addressing == Addressing::kPath) {
      return Bad(url, "S3 Express directory buckets support only virtual-host addressing");
    }
    config.addressing = Addressing::kVirtualHost;
  } else if (addressing) {
    config.addressing = *addressing;
  } else if (!config.endpoint.empty() || config.bucket.find('.') != std::string::npos) {
    config.addressing = Addressing::kPath;
  } else {
    config.addressing = Addressing::kVirtualHost;
  }
  return config;
}

std::string DescribeS3(const S3Config& config) {
  std::string out = "s3://" + config.bucket;
  if (!config.prefix.empty()) out += "/" + config.prefix;
  return out;
}

std::string BucketEndpoint(const S3Config& config) {
  if (config.endpoint.empty()) {
    if (config.express) {
      return ExpressEndpoint(config.bucket, config.region).value_or("https://" + config.bucket);
    }
    const std::string host = "s3." + config.region + ".amazonaws.com";
    if (config.addressing == Addressing::kPath) return "https://" + host;
    return "https://" + config.bucket + "." + host;
  }
  if (config.addressing == Addressing::kPath) return config.endpoint;
  const size_t scheme_end = config.endpoint.find("://") + 3;
  return config.endpoint.substr(0, scheme_end) + config.bucket + "." +
         config.endpoint.substr(scheme_end);
}

}  // namespace tierckpt::s3
