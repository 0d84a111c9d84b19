#include "cluster/hostfile.h"

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "cluster/address.h"
#include "common/names.h"
#include "os/files.h"

namespace tierckpt::cluster {
namespace {

// Bounds the memory a "ranks=" range can make us allocate.
constexpr size_t kMaxRanksPerFile = 1u << 20;
constexpr std::string_view kLineFormat = "node_id host:port [domain=rack1] [ranks=0-7]";

class LineParser {
 public:
  LineParser(std::string_view source, size_t line) : source_(source), line_(line) {}

  Status Error(const std::string& what) const {
    return InvalidArgument("hostfile " + std::string(source_) + " line " + std::to_string(line_) + ": " +
                           what);
  }

  // Appends the ranks of "0,2,4-5" to out; total_ranks counts the file's.
  Status ParseRanks(std::string_view list, std::vector<uint32_t>* out, size_t* total_ranks) const {
    size_t start = 0;
    while (true) {
      size_t comma = list.find(',', start);
      std::string_view item =
          list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      size_t dash = item.find('-');
      uint32_t lo = 0;
      uint32_t hi = 0;
      bool ok = ParseNumber(item.substr(0, dash), &lo);
      hi = lo;
      if (ok && dash != std::string_view::npos) ok = ParseNumber(item.substr(dash + 1), &hi);
      if (!ok) {
        return Error("ranks entry " + QuoteForMessage(item) +
                     " is not a rank or a range; write e.g. ranks=0-7 or ranks=0,2,4-5");
      }
      if (hi < lo) {
        return Error("ranks range " + QuoteForMessage(item) + " runs backwards; write the lower rank first");
      }
      uint64_t count = uint64_t{hi} - lo + 1;
      if (count > kMaxRanksPerFile - *total_ranks) {
        return Error("lists more than " + std::to_string(kMaxRanksPerFile) +
                     " ranks in the file; check the ranks= ranges");
      }
      for (uint64_t r = lo; r <= hi; ++r) out->push_back(static_cast<uint32_t>(r));
      *total_ranks += count;
      if (comma == std::string_view::npos) return Status::Ok();
      start = comma + 1;
    }
  }

 private:
  static bool ParseNumber(std::string_view s, uint32_t* out) {
    if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return false;
    uint64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v > 0xffffffffULL) return false;
    *out = static_cast<uint32_t>(v);
    return true;
  }

  std::string_view source_;
  size_t line_;
};

std::vector<std::string_view> SplitFields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

}  // namespace

Result<Membership> ParseHostfile(std::string_view text, std::string_view source) {
  std::vector<Member> members;
  std::map<std::string, size_t, std::less<>> id_line;
  std::map<std::string, size_t, std::less<>> address_line;
  std::map<uint32_t, size_t> rank_line;
  size_t total_ranks = 0;
  size_t first_domain_line = 0;     // 0 = no line with a domain yet
  size_t first_no_domain_line = 0;  // 0 = no line without one yet
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    pos = end == std::string_view::npos ? text.size() : end + 1;
    size_t hash = line.find('#');
    if (hash != std::string_view::npos) line = line.substr(0, hash);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string_view> fields = SplitFields(line);
    if (fields.empty()) continue;
    LineParser p(source, line_no);
    if (fields.size() < 2) {
      return p.Error("has a node id but no address; write " + std::string(kLineFormat));
    }
    Member m;
    m.node_id = std::string(fields[0]);
    Status s = ValidateNodeId(m.node_id);
    if (!s.ok()) return p.Error(s.message());
    Result<PeerAddress> addr = ParseAddress(fields[1]);
    if (!addr.ok()) return p.Error(addr.status().message());
    m.address = addr->ToString();
    bool seen_domain = false;
    bool seen_ranks = false;
    for (size_t f = 2; f < fields.size(); ++f) {
      std::string_view field = fields[f];
      size_t eq = field.find('=');
      std::string_view key = field.substr(0, eq);
      std::string_view value = eq == std::string_view::npos ? std::string_view() : field.substr(eq + 1);
      if (eq == std::string_view::npos || (key != "domain" && key != "ranks")) {
        return p.Error("unknown field " + QuoteForMessage(field) +
                       "; after the address only domain=<name> and ranks=<list> may follow (" +
                       std::string(kLineFormat) + ")");
      }
      bool& seen = key == "domain" ? seen_domain : seen_ranks;
      if (seen) return p.Error("gives " + std::string(key) + "= twice; keep one");
      seen = true;
      if (value.empty())
        return p.Error(std::string(key) + "= has no value; write e.g. domain=rack1 or ranks=0-7");
      if (key == "domain") {
        s = ValidateFailureDomain(value);
        if (!s.ok()) return p.Error(s.message());
        m.failure_domain = std::string(value);
      } else {
        TC_RETURN_IF_ERROR(p.ParseRanks(value, &m.ranks, &total_ranks));
      }
    }
    if (auto [it, inserted] = id_line.emplace(m.node_id, line_no); !inserted) {
      return p.Error("node id " + QuoteForMessage(m.node_id) + " is already used on line " +
                     std::to_string(it->second) + "; give every agent its own node id");
    }
    if (auto [it, inserted] = address_line.emplace(m.address, line_no); !inserted) {
      return p.Error("address " + m.address + " is already used on line " + std::to_string(it->second) +
                     "; every agent needs its own host:port");
    }
    for (uint32_t rank : m.ranks) {
      if (auto [it, inserted] = rank_line.emplace(rank, line_no); !inserted) {
        std::string where =
            it->second == line_no ? "earlier on this line" : "on line " + std::to_string(it->second);
        return p.Error("rank " + std::to_string(rank) + " is already listed " + where +
                       "; a rank talks to exactly one agent");
      }
    }
    size_t& first = m.failure_domain.empty() ? first_no_domain_line : first_domain_line;
    if (first == 0) first = line_no;
    if (first_domain_line != 0 && first_no_domain_line != 0) {
      std::string other = std::to_string(m.failure_domain.empty() ? first_domain_line : first_no_domain_line);
      return p.Error(m.failure_domain.empty()
                         ? "has no domain= but line " + other + " has one; give every line a domain= or none"
                         : "has a domain= but line " + other +
                               " has none; give every line a domain= or none");
    }
    members.push_back(std::move(m));
  }
  if (members.empty()) {
    return InvalidArgument("hostfile " + std::string(source) +
                           " lists no members; write one line per agent: " + std::string(kLineFormat));
  }
  Result<Membership> out = Membership::Create(std::move(members));
  if (!out.ok()) return out.status().WithContext("hostfile " + std::string(source));
  return out;
}

Result<Membership> ReadHostfile(const std::string& path) {
  Result<std::string> text = ReadFileToString(path, kMaxHostfileBytes);
  if (!text.ok()) return text.status().WithContext("reading hostfile " + path);
  return ParseHostfile(*text, path);
}

}  // namespace tierckpt::cluster
