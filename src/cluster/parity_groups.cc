// parity_groups.cc — see parity_groups.h.
#include "cluster/parity_groups.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace tierckpt::cluster {

namespace {

constexpr uint32_t kMaxReplicas = 64;
constexpr uint32_t kMaxPieces = 256;  // GF(2^8): src/ec/reed_solomon.h

bool ParseUint(std::string_view text, uint32_t* out) {
  if (text.empty()) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

Status BadRedundancy(std::string_view text, std::string_view why) {
  return InvalidArgument("--redundancy " + std::string(text) + ": " + std::string(why) +
                         "; give replicas:R (R copies of each part, e.g. replicas:2) or rs:K+M (a Reed-Solomon "
                         "code over groups of K nodes and M parity holders, e.g. rs:4+2; xor:K is rs:K+1)");
}

}  // namespace

std::string Redundancy::ToString() const {
  if (kind == Kind::kReplicas) return "replicas:" + std::to_string(replicas);
  return "rs:" + std::to_string(k) + "+" + std::to_string(m);
}

double Redundancy::MemoryFactor() const {
  if (kind == Kind::kReplicas) return static_cast<double>(replicas);
  return static_cast<double>(k + m) / static_cast<double>(k);
}

Result<Redundancy> ParseRedundancy(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return BadRedundancy(text, "no scheme before a ':'");
  const std::string_view scheme = text.substr(0, colon), rest = text.substr(colon + 1);
  Redundancy r;
  if (scheme == "replicas") {
    if (!ParseUint(rest, &r.replicas) || r.replicas < 1 || r.replicas > kMaxReplicas) {
      return BadRedundancy(text, "R must be a whole number from 1 to " + std::to_string(kMaxReplicas));
    }
    return r;
  }
  r.kind = Redundancy::Kind::kReedSolomon;
  if (scheme == "xor") {
    r.m = 1;
    if (!ParseUint(rest, &r.k) || r.k < 1 || r.k + 1 > kMaxPieces) {
      return BadRedundancy(text, "K must be a whole number from 1 to " + std::to_string(kMaxPieces - 1));
    }
    return r;
  }
  if (scheme != "rs") return BadRedundancy(text, "unknown scheme '" + std::string(scheme) + "'");
  const size_t plus = rest.find('+');
  if (plus == std::string_view::npos || !ParseUint(rest.substr(0, plus), &r.k) ||
      !ParseUint(rest.substr(plus + 1), &r.m)) {
    return BadRedundancy(text, "K+M must be two whole numbers joined by '+'");
  }
  if (r.k < 1 || r.m < 1 || r.k + r.m > kMaxPieces) {
    return BadRedundancy(text, "needs K ≥ 1, M ≥ 1 and K + M ≤ " + std::to_string(kMaxPieces));
  }
  return r;
}

const ParityGroup* ParityLayout::GroupOf(std::string_view node_id) const {
  for (const ParityGroup& g : groups) {
    if (std::find(g.data.begin(), g.data.end(), node_id) != g.data.end()) return &g;
  }
  return nullptr;
}

std::vector<std::pair<uint32_t, uint32_t>> ParityLayout::ParityHeldBy(std::string_view node_id) const {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const ParityGroup& g : groups) {
    for (uint32_t j = 0; j < g.parity.size(); ++j) {
      if (g.parity[j] == node_id) out.emplace_back(g.index, j);
    }
  }
  return out;
}

Result<ParityLayout> PlaceParity(const std::vector<std::string>& ring, uint32_t k, uint32_t m) {
  const size_t n = ring.size();
  if (k < 1 || m < 1 || k + m > kMaxPieces) {
    return InvalidArgument("rs:" + std::to_string(k) + "+" + std::to_string(m) + ": needs K ≥ 1, M ≥ 1 and K + M ≤ " +
                           std::to_string(kMaxPieces));
  }
  if (n < static_cast<size_t>(k) + m) {
    return InvalidArgument("rs:" + std::to_string(k) + "+" + std::to_string(m) + " needs at least " +
                           std::to_string(k + m) + " nodes (each of a group's " + std::to_string(k + m) +
                           " pieces on a node of its own); the cluster has " + std::to_string(n) +
                           ": use fewer pieces or replicas:2");
  }
  if (std::set<std::string>(ring.begin(), ring.end()).size() != n) {
    return InvalidArgument("the placement ring lists a node twice");
  }
  ParityLayout layout;
  layout.k = k;
  layout.m = m;
  std::vector<uint32_t> held(n, 0);  // parity pieces per ring position
  for (size_t start = 0; start < n; start += k) {
    ParityGroup g;
    g.index = static_cast<uint32_t>(layout.groups.size());
    const size_t end = std::min(start + k, n);  // data positions [start, end)
    for (size_t p = start; p < end; ++p) g.data.push_back(ring[p]);
    // Candidates outside the group in ring order from its end; the least loaded first, then the nearest.
    std::vector<size_t> order;
    for (size_t d = 0; d < n - (end - start); ++d) order.push_back((end + d) % n);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return held[a] < held[b]; });
    for (uint32_t j = 0; j < m; ++j) {
      g.parity.push_back(ring[order[j]]);
      ++held[order[j]];
    }
    layout.groups.push_back(std::move(g));
  }
  return layout;
}

}  // namespace tierckpt::cluster
