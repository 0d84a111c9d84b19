// http.cc — helpers shared by every HttpTransport.
#include "s3/http.h"

#include <algorithm>

namespace tierckpt::s3 {

std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (key == name) return std::string_view(value);
  }
  return std::nullopt;
}

std::string UriEncode(std::string_view s, bool encode_slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size() * 3 / 2);
  for (unsigned char c : s) {
    const bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                            c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (c == '/' && !encode_slash)) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

std::string CanonicalQuery(const HttpRequest& request) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(request.query.size());
  for (const auto& [name, value] : request.query) {
    encoded.emplace_back(UriEncode(name, true), UriEncode(value, true));
  }
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string RequestUrl(const HttpRequest& request) {
  std::string url = request.endpoint + request.path;
  if (!request.query.empty()) url += "?" + CanonicalQuery(request);
  return url;
}

}  // namespace tierckpt::s3
