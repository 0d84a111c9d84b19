// address.h — validation of what identifies an agent in a cluster: its node
// id, its failure domain and its peer address.
//
// Rules (docs/placement.md repeats them for users):
//   node id         [A-Za-z0-9_.-]{1,128}, not "." or ".." (the namespace rule).
//   failure domain  the same rule; "" means "no domain" and is checked by callers.
//   address         "host:port" where host is
//                     - an IPv4 dotted quad (four decimal parts 0..255, no
//                       leading zeros), or
//                     - an IPv6 address in brackets, "[::1]:7000" (no zone id), or
//                     - a host name: labels of 1..63 [A-Za-z0-9-], not starting
//                       or ending with '-', dot-separated, at most 253 bytes,
//                       no trailing dot; a name made only of digits and dots
//                       must be a valid IPv4 address;
//                   and port is 1..65535 in decimal without leading zeros.
//
// ParseAddress returns the canonical form: host names lower-cased, IPv6 in
// the inet_ntop (RFC 5952) spelling, so two spellings of one endpoint compare
// equal as strings. Membership stores addresses in that form.
//
// All functions are pure and thread-safe. Errors are kInvalidArgument with a
// message that quotes the input (escaped) and says what to write instead.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::cluster {

inline constexpr size_t kMaxNodeIdLength = 128;
inline constexpr size_t kMaxHostNameLength = 253;

Status ValidateNodeId(std::string_view node_id);
// Precondition: domain is not empty (empty means "none" to every caller).
Status ValidateFailureDomain(std::string_view domain);

enum class HostKind { kIpv4, kIpv6, kHostName };

struct PeerAddress {
  std::string host;  // canonical, without brackets
  uint16_t port = 0;
  HostKind kind = HostKind::kHostName;

  // "host:port", or "[v6]:port".
  std::string ToString() const;
  bool operator==(const PeerAddress&) const = default;
};

Result<PeerAddress> ParseAddress(std::string_view text);

}  // namespace tierckpt::cluster
