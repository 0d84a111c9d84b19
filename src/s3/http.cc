// http.cc — helpers shared by every HttpTransport.
#include "s3/http.h"

#include <algorithm>
#include <cstring>

#include "os/files.h"

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

namespace {

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<std::string> PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (plus_is_space && s[i] == '+') {
      out.push_back(' ');
      continue;
    }
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 2 < s.size() ? HexValue(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? HexValue(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
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

Status DeliverToSink(const SendOptions& options, HttpResponse* response, std::string_view who) {
  const bool to_fd = options.sink == nullptr && options.sink_fd >= 0;
  if ((options.sink == nullptr && !to_fd) || response->status / 100 != 2) return Status::Ok();
  const std::string& body = response->body;
  if (body.size() > options.sink_capacity) {
    return Corruption(std::string(who) + ": body of " + std::to_string(body.size()) +
                      " bytes exceeds the sink of " + std::to_string(options.sink_capacity));
  }
  if (!to_fd) {
    if (!body.empty()) std::memcpy(options.sink, body.data(), body.size());
  } else {
    Status written = PwriteAll(options.sink_fd, body.data(), body.size(), options.sink_fd_offset,
                               "the download destination");
    if (!written.ok()) {
      return written.WithContext(std::string(who) + ": writing the body to file descriptor " +
                                 std::to_string(options.sink_fd) + " at offset " +
                                 std::to_string(options.sink_fd_offset));
    }
  }
  response->sink_bytes = body.size();
  response->body.clear();
  return Status::Ok();
}

}  // namespace tierckpt::s3
