// hostlist.cc — see hostlist.h.
#include "cluster/hostlist.h"

#include <set>

#include "common/names.h"

namespace tierckpt::cluster {
namespace {

constexpr size_t kMaxDigits = 9;

Status Bad(std::string_view list, const std::string& what) {
  return InvalidArgument("host list " + QuoteForMessage(list.substr(0, 200)) + (list.size() > 200 ? "..." : "") +
                         ": " + what + "; write it as Slurm does, e.g. node[001-004,007],gpu1");
}

bool AllDigits(std::string_view s) {
  if (s.empty() || s.size() > kMaxDigits) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

uint64_t ToNumber(std::string_view digits) {
  uint64_t v = 0;
  for (char c : digits) v = v * 10 + static_cast<uint64_t>(c - '0');
  return v;
}

std::string Padded(uint64_t v, size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// The numbers a bracket's body names, as text, in the order written.
Result<std::vector<std::string>> ExpandGroup(std::string_view body, std::string_view list) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = body.find(',', start);
    const std::string_view part = body.substr(start, comma == std::string_view::npos ? body.npos : comma - start);
    const size_t dash = part.find('-');
    const std::string_view lo = part.substr(0, dash);
    const std::string_view hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi)) {
      return Bad(list, "[" + std::string(body) + "] holds " + QuoteForMessage(part) +
                           ", not a number or a range lo-hi of numbers of at most 9 digits");
    }
    const uint64_t a = ToNumber(lo);
    const uint64_t b = ToNumber(hi);
    if (a > b) return Bad(list, "the range " + std::string(part) + " runs backwards");
    if (b - a >= kMaxHostlistNames || out.size() + (b - a + 1) > kMaxHostlistNames) {
      return Bad(list, "it names more than " + std::to_string(kMaxHostlistNames) + " hosts");
    }
    for (uint64_t v = a; v <= b; ++v) out.push_back(Padded(v, lo.size()));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One item: literal text and bracket groups, expanded to their product.
Status ExpandItem(std::string_view item, std::string_view list, std::vector<std::string>* names) {
  std::vector<std::string> out{""};
  size_t pos = 0;
  while (pos < item.size()) {
    const size_t open = item.find('[', pos);
    const std::string_view literal = item.substr(pos, open == std::string_view::npos ? item.npos : open - pos);
    if (literal.find(']') != std::string_view::npos) return Bad(list, "a ']' has no '['");
    for (std::string& s : out) s.append(literal);
    if (open == std::string_view::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string_view::npos) return Bad(list, "a '[' is not closed");
    const std::string_view body = item.substr(open + 1, close - open - 1);
    if (body.find('[') != std::string_view::npos) return Bad(list, "brackets are nested");
    TC_ASSIGN_OR_RETURN(std::vector<std::string> numbers, ExpandGroup(body, list));
    if (out.size() * numbers.size() + names->size() > kMaxHostlistNames) {
      return Bad(list, "it names more than " + std::to_string(kMaxHostlistNames) + " hosts");
    }
    std::vector<std::string> next;
    next.reserve(out.size() * numbers.size());
    for (const std::string& prefix : out) {
      for (const std::string& n : numbers) next.push_back(prefix + n);
    }
    out = std::move(next);
    pos = close + 1;
  }
  for (std::string& s : out) {
    if (s.empty()) return Bad(list, "an item is empty");
    names->push_back(std::move(s));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view list) {
  if (list.size() > kMaxHostlistBytes) {
    return Bad(list, "it is " + std::to_string(list.size()) + " bytes; the limit is " +
                         std::to_string(kMaxHostlistBytes));
  }
  if (list.empty()) return Bad(list, "it is empty");
  std::vector<std::string> names;
  size_t start = 0;
  int depth = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return Bad(list, "a ']' has no '['");
    if (c == ',' && depth == 0) {
      const std::string_view item = list.substr(start, i - start);
      if (item.empty()) return Bad(list, "an item is empty (two commas, or one at an end)");
      TC_RETURN_IF_ERROR(ExpandItem(item, list, &names));
      start = i + 1;
    }
  }
  if (depth != 0) return Bad(list, "a '[' is not closed");
  std::set<std::string_view> seen;
  for (const std::string& n : names) {
    if (!seen.insert(n).second) return Bad(list, "it names host " + QuoteForMessage(n) + " twice");
  }
  return names;
}

}  // namespace tierckpt::cluster
