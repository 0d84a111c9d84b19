#include "cluster/address.h"

#include <arpa/inet.h>

#include <string>
#include <vector>

#include "common/names.h"

namespace tierckpt::cluster {
namespace {

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

Status ValidateIdLike(std::string_view value, std::string_view what, std::string_view example) {
  if (value.empty()) {
    return InvalidArgument(std::string(what) + " is empty; use a name matching [A-Za-z0-9_.-]{1,128}, e.g. " +
                           std::string(example));
  }
  if (value.size() > kMaxNodeIdLength) {
    return InvalidArgument(std::string(what) + " " + QuoteForMessage(value) + " is " +
                           std::to_string(value.size()) + " bytes; the limit is " +
                           std::to_string(kMaxNodeIdLength));
  }
  if (value == "." || value == "..") {
    return InvalidArgument(std::string(what) + " " + QuoteForMessage(value) + " is not allowed; use e.g. " +
                           std::string(example));
  }
  for (char c : value) {
    if (!IsNameChar(c)) {
      return InvalidArgument(std::string(what) + " " + QuoteForMessage(value) +
                             " contains a character outside [A-Za-z0-9_.-]; use e.g. " +
                             std::string(example));
    }
  }
  return Status::Ok();
}

Status BadAddress(std::string_view text, const std::string& why) {
  return InvalidArgument("address " + QuoteForMessage(text) + " " + why +
                         "; write host:port, e.g. 10.0.0.7:7000, [fd00::7]:7000 or node7.example:7000");
}

// Parses 1..5 decimal digits, no leading zero, 1..65535.
bool ParsePort(std::string_view s, uint16_t* port) {
  if (s.empty() || s.size() > 5 || s[0] == '0') return false;
  uint32_t v = 0;
  for (char c : s) {
    if (!IsDigit(c)) return false;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v == 0 || v > 65535) return false;
  *port = static_cast<uint16_t>(v);
  return true;
}

bool IsIpv4(std::string_view s) {
  int parts = 0;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string_view part =
        s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (part.empty() || part.size() > 3 || (part.size() > 1 && part[0] == '0')) return false;
    int v = 0;
    for (char c : part) {
      if (!IsDigit(c)) return false;
      v = v * 10 + (c - '0');
    }
    if (v > 255) return false;
    ++parts;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts == 4;
}

// Empty string when host is a valid host name; the reason otherwise.
std::string HostNameProblem(std::string_view host) {
  if (host.size() > kMaxHostNameLength) {
    return "has a host name of " + std::to_string(host.size()) + " bytes, above the limit of " +
           std::to_string(kMaxHostNameLength);
  }
  if (host.back() == '.') return "ends its host name with '.'; remove the trailing dot";
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    std::string_view label =
        host.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (label.empty()) return "has an empty label in its host name (\"..\" or a leading '.')";
    if (label.size() > 63) return "has a host name label longer than 63 bytes";
    if (label.front() == '-' || label.back() == '-')
      return "has a host name label starting or ending with '-'";
    for (char c : label) {
      bool ok = IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-';
      if (!ok) return "has a character outside [A-Za-z0-9-] in its host name";
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return "";
}

}  // namespace

Status ValidateNodeId(std::string_view node_id) { return ValidateIdLike(node_id, "node id", "node-07"); }

Status ValidateFailureDomain(std::string_view domain) {
  return ValidateIdLike(domain, "failure domain", "rack1");
}

std::string PeerAddress::ToString() const {
  if (kind == HostKind::kIpv6) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

Result<PeerAddress> ParseAddress(std::string_view text) {
  if (text.empty()) return BadAddress(text, "is empty");
  PeerAddress out;
  std::string_view host;
  std::string_view port;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) return BadAddress(text, "opens '[' without a closing ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return BadAddress(text, "has no :port after the ']'");
    port = rest.substr(1);
    if (host.find('%') != std::string_view::npos) {
      return BadAddress(
          text, "has an IPv6 zone id ('%'), which is not supported; use a global address or a host name");
    }
    std::string host_z(host);
    unsigned char buf[16];
    if (host.empty() || inet_pton(AF_INET6, host_z.c_str(), buf) != 1) {
      return BadAddress(text, "has " + QuoteForMessage(host) + " in brackets, which is not an IPv6 address");
    }
    char canon[INET6_ADDRSTRLEN];
    if (inet_ntop(AF_INET6, buf, canon, sizeof(canon)) == nullptr) {
      return BadAddress(text, "has an IPv6 address that cannot be printed back");
    }
    out.host = canon;
    out.kind = HostKind::kIpv6;
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return BadAddress(text, "has no :port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return BadAddress(text, "looks like an IPv6 address without brackets; write it as [addr]:port");
    }
    if (host.empty()) return BadAddress(text, "has no host before the ':'");
    bool numeric = true;
    for (char c : host) numeric = numeric && (IsDigit(c) || c == '.');
    if (numeric) {
      if (!IsIpv4(host)) {
        return BadAddress(text, "has " + QuoteForMessage(host) +
                                    ", which is neither a host name nor an IPv4 address (four parts 0..255, "
                                    "no leading zeros)");
      }
      out.host = std::string(host);
      out.kind = HostKind::kIpv4;
    } else {
      std::string problem = HostNameProblem(host);
      if (!problem.empty()) return BadAddress(text, problem);
      out.host.reserve(host.size());
      for (char c : host) out.host += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
      out.kind = HostKind::kHostName;
    }
  }
  if (!ParsePort(port, &out.port)) {
    return BadAddress(text, "has port " + QuoteForMessage(port) +
                                ", which is not a number 1..65535 (decimal, no leading zeros)");
  }
  return out;
}

}  // namespace tierckpt::cluster
