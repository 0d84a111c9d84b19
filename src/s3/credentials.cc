// credentials.cc — StaticCredentials, and the small parsers the credential
// sources share (credentials_providers.h).
#include "s3/credentials.h"

#include <cctype>
#include <cstdint>

#include "os/files.h"
#include "s3/credentials_providers.h"

namespace tierckpt::s3 {
namespace {

class StaticProvider final : public CredentialsProvider {
 public:
  explicit StaticProvider(Credentials credentials) : credentials_(std::move(credentials)) {
    if (credentials_.source.empty()) credentials_.source = "static";
  }

  Result<Credentials> Get() override {
    if (credentials_.access_key_id.empty() || credentials_.secret_access_key.empty()) {
      return InvalidArgument("static credentials (" + credentials_.source + "): the " +
                             (credentials_.access_key_id.empty() ? "access key id" : "secret access key") +
                             " is empty; pass both an access key id and a secret access key");
    }
    return credentials_;
  }
  std::string Name() const override { return credentials_.source; }

 private:
  Credentials credentials_;  // const after construction
};

bool ParseDigits(std::string_view s, size_t pos, size_t count, int* out) {
  if (pos + count > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + count; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

Result<std::string> QueryDecode(std::string_view s, std::string_view url) {
  std::optional<std::string> out = PercentDecode(s);
  if (!out) return InvalidArgument("URL '" + std::string(url) + "' has a bad percent escape in its query");
  return std::move(*out);
}


}  // namespace

std::unique_ptr<CredentialsProvider> StaticCredentials(Credentials credentials) {
  return std::make_unique<StaticProvider>(std::move(credentials));
}

Result<Clock::time_point> ParseIso8601(std::string_view text) {
  auto bad = [&] {
    return InvalidArgument("'" + BodySnippet(text) +
                           "' is not an ISO 8601 UTC time like 2024-05-01T12:34:56Z");
  };
  int year, month, day, hour, minute, second;
  if (text.size() < 20 || !ParseDigits(text, 0, 4, &year) || text[4] != '-' ||
      !ParseDigits(text, 5, 2, &month) || text[7] != '-' || !ParseDigits(text, 8, 2, &day) ||
      (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || !ParseDigits(text, 11, 2, &hour) ||
      text[13] != ':' || !ParseDigits(text, 14, 2, &minute) || text[16] != ':' ||
      !ParseDigits(text, 17, 2, &second)) {
    return bad();
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return bad();
  size_t pos = 19;
  int64_t micros = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int64_t scale = 100000;
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      micros += (text[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
    if (pos == start) return bad();
  }
  int offset_minutes = 0;
  const std::string_view zone = text.substr(pos);
  if (zone == "Z" || zone == "z") {
    offset_minutes = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int oh, om;
    if (!ParseDigits(zone, 1, 2, &oh) || !ParseDigits(zone, 4, 2, &om)) return bad();
    offset_minutes = (zone[0] == '-' ? -1 : 1) * (oh * 60 + om);
  } else {
    return bad();
  }
  const int64_t days = DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  const int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60;
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::seconds(seconds) +
                                                                       std::chrono::microseconds(micros)));
}

std::string_view TrimAscii(std::string_view s) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return InvalidArgument("URL '" + BodySnippet(url) + "' " + std::string(why) +
                           "; expected http://host[:port]/path or https://host[:port]/path");
  };
  HttpUrl out;
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos) return bad("has no scheme");
  out.scheme = AsciiLower(url.substr(0, sep));
  if (out.scheme != "http" && out.scheme != "https") return bad("is not http or https");
  std::string_view rest = url.substr(sep + 3);
  const size_t authority_end = rest.find_first_of("/?#");
  const std::string_view authority = rest.substr(0, authority_end);
  rest = authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.empty()) return bad("has no host");
  if (authority.find('@') != std::string_view::npos) return bad("has user info, which is not allowed");
  for (char c : authority) {
    if (static_cast<unsigned char>(c) <= ' ' || c == '\\' || c == '"')
      return bad("has a bad character in its host");
  }
  size_t port_at = std::string_view::npos;
  if (authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("has an unterminated IPv6 literal");
    out.host = AsciiLower(authority.substr(0, close + 1));
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return bad("has junk after its IPv6 literal");
      port_at = close + 1;
    }
  } else {
    port_at = authority.find(':');
    out.host = AsciiLower(authority.substr(0, port_at));
  }
  if (out.host.empty() || out.host == "[]") return bad("has no host");
  if (port_at != std::string_view::npos) {
    const std::string_view port = authority.substr(port_at + 1);
    if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return bad("has a bad port");
    }
  }
  out.endpoint = out.scheme + "://" + std::string(authority);
  const size_t fragment = rest.find('#');
  rest = rest.substr(0, fragment);
  const size_t query_at = rest.find('?');
  const std::string_view path = rest.substr(0, query_at);
  out.path = path.empty() ? "/" : std::string(path);
  if (query_at != std::string_view::npos) {
    std::string_view query = rest.substr(query_at + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view item = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      TC_ASSIGN_OR_RETURN(std::string name, QueryDecode(item.substr(0, eq), url));
      std::string value;
      if (eq != std::string_view::npos) {
        TC_ASSIGN_OR_RETURN(value, QueryDecode(item.substr(eq + 1), url));
      }
      out.query.emplace_back(std::move(name), std::move(value));
    }
  }
  return out;
}

std::string BodySnippet(std::string_view body) {
  static constexpr size_t kMax = 200;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < body.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(body[i]);
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else if (c == '\n' || c == '\r' || c == '\t') {
      out.push_back(' ');
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  if (body.size() > kMax) out += "...";
  return out;
}

Result<std::string> ReadSmallFile(const std::string& path) {
  static constexpr size_t kMaxSize = 1u << 20;
  return ReadFileToString(path, kMaxSize);
}

std::string ExpandHome(std::string_view path, const std::string& home) {
  if (home.empty() || path.empty() || path[0] != '~') return std::string(path);
  if (path.size() == 1) return home;
  if (path[1] != '/') return std::string(path);  // ~user is not expanded
  return JoinPath(home, path.substr(2));
}

}  // namespace tierckpt::s3
