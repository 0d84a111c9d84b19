#include "common/names.h"

#include <cstdio>

namespace tierckpt {
namespace {

bool IsNameChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

Status ValidateComponent(std::string_view whole, std::string_view comp, std::string_view what,
                         size_t max_len) {
  if (comp.empty()) {
    return InvalidArgument(std::string(what) + " " + QuoteForMessage(whole) +
                           " has an empty component; use names like \"__0_0.distcp\" or "
                           "\"dir/file\" without leading, trailing or double '/'");
  }
  if (comp.size() > max_len) {
    return InvalidArgument(std::string(what) + " " + QuoteForMessage(whole) + " has a part of " +
                           std::to_string(comp.size()) + " bytes; the limit is " +
                           std::to_string(max_len));
  }
  if (comp == "." || comp == "..") {
    return InvalidArgument(std::string(what) + " " + QuoteForMessage(whole) +
                           " contains \".\" or \"..\"; relative path parts are not allowed");
  }
  for (char c : comp) {
    if (!IsNameChar(c)) {
      return InvalidArgument(std::string(what) + " " + QuoteForMessage(whole) +
                             " contains a character outside [A-Za-z0-9_.-]; rename it");
    }
  }
  return Status::Ok();
}

}  // namespace

std::string QuoteForMessage(std::string_view s) {
  std::string out = "\"";
  size_t shown = 0;
  for (unsigned char c : s) {
    if (shown == 80) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
    ++shown;
  }
  out += "\"";
  return out;
}

Status ValidateNamespace(std::string_view ns) {
  if (ns.empty()) {
    return InvalidArgument("namespace is empty; give a per-job id matching [A-Za-z0-9_.-]{1,128}");
  }
  return ValidateComponent(ns, ns, "namespace", kMaxNamespaceLength);
}

Status ValidateStep(uint64_t step) {
  if (step > kMaxStep) {
    return InvalidArgument("step " + std::to_string(step) + " is above the limit " +
                           std::to_string(kMaxStep));
  }
  return Status::Ok();
}

Status ValidateStepRef(std::string_view ns, uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespace(ns));
  return ValidateStep(step);
}

Result<uint64_t> ParseStep(std::string_view text) {
  const std::string range = "steps are decimal integers from 0 to " + std::to_string(kMaxStep) +
                            " (leading zeros are allowed: 0000000100 is step 100)";
  if (text.empty()) return InvalidArgument("step is empty; " + range);
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return InvalidArgument("step " + QuoteForMessage(text) + " is not a decimal number; " + range);
    }
    value = value * 10 + static_cast<uint64_t>(c - '0');
    if (value > kMaxStep) {
      return InvalidArgument("step " + QuoteForMessage(text) + " is above the limit " + std::to_string(kMaxStep) +
                             "; " + range);
    }
  }
  return value;
}

Status ValidateObjectName(std::string_view name, bool allow_reserved) {
  if (name.empty()) return InvalidArgument("object name is empty");
  if (name.size() > kMaxObjectNameLength) {
    return InvalidArgument("object name " + QuoteForMessage(name) + " is " +
                           std::to_string(name.size()) + " bytes; the limit is " +
                           std::to_string(kMaxObjectNameLength));
  }
  if (name.front() == '/') {
    return InvalidArgument("object name " + QuoteForMessage(name) +
                           " is an absolute path; object names are relative");
  }
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    std::string_view comp =
        name.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    TC_RETURN_IF_ERROR(ValidateComponent(name, comp, "object name", kMaxNameComponentLength));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (!allow_reserved && name.substr(0, kReservedPrefix.size()) == kReservedPrefix) {
    return InvalidArgument("object name " + QuoteForMessage(name) +
                           " starts with the reserved prefix \"_tierckpt\"; choose another name");
  }
  return Status::Ok();
}

std::string StepDirName(uint64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%010llu", static_cast<unsigned long long>(step));
  return buf;
}

bool ParseStepDirName(std::string_view dir_name, uint64_t* step) {
  constexpr std::string_view kPrefix = "step_";
  if (dir_name.size() != kPrefix.size() + 10 || dir_name.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  uint64_t v = 0;
  for (char c : dir_name.substr(kPrefix.size())) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *step = v;
  return true;
}

std::string PartRecordName(std::string_view node_id) {
  return std::string(kReservedPrefix) + "_part." + std::string(node_id) + ".json";
}

bool ParsePartRecordName(std::string_view name, std::string* node_id) {
  const std::string prefix = std::string(kReservedPrefix) + "_part.";
  constexpr std::string_view kSuffix = ".json";
  if (name.size() <= prefix.size() + kSuffix.size() || name.substr(0, prefix.size()) != prefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix) {
    return false;
  }
  std::string_view id = name.substr(prefix.size(), name.size() - prefix.size() - kSuffix.size());
  if (!ValidateNamespace(id).ok()) return false;  // node ids follow the namespace rule
  if (node_id != nullptr) *node_id = std::string(id);
  return true;
}

}  // namespace tierckpt
