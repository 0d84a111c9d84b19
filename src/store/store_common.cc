#include "store/store_common.h"

#include "common/names.h"

namespace tierckpt::store_internal {
namespace {

Status InContext(const Status& s, std::string_view op, std::string_view store) {
  if (s.ok()) return s;
  return s.WithContext(std::string(op) + " on " + std::string(store));
}

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

std::string StepLabel(std::string_view store, std::string_view ns, uint64_t step) {
  return std::string(store) + " namespace " + QuoteForMessage(ns) + " step " + std::to_string(step);
}

std::string ObjectLabel(std::string_view store, std::string_view ns, uint64_t step,
                        std::string_view name) {
  return StepLabel(store, ns, step) + " object " + QuoteForMessage(name);
}

Status ValidateNamespaceFor(std::string_view op, std::string_view store, std::string_view ns) {
  return InContext(ValidateNamespace(ns), op, store);
}

Status ValidateStepFor(std::string_view op, std::string_view store, std::string_view ns,
                       uint64_t step) {
  TC_RETURN_IF_ERROR(ValidateNamespaceFor(op, store, ns));
  return InContext(ValidateStep(step), op, store);
}

Result<Manifest> ParseStepManifest(std::string_view text, const std::string& where, std::string_view ns,
                                   uint64_t step) {
  TC_ASSIGN_OR_RETURN(Manifest m, Manifest::Parse(text, where));
  if (m.ns != ns || m.step != step) {
    return Corruption("manifest " + where + " describes namespace " + QuoteForMessage(m.ns) + " step " +
                      std::to_string(m.step) +
                      ", not the step it sits in; it was copied or renamed, restore the step from another tier");
  }
  if (m.checksums_pending) {
    return Corruption(
        "manifest " + where +
        " says its checksums are still pending, which only a memory tier's record may (tierckpt "
        "never writes one to a durable tier); restore the step from another tier");
  }
  return m;
}

Status ValidateObjectFor(std::string_view op, std::string_view store, std::string_view ns,
                         uint64_t step, std::string_view name) {
  TC_RETURN_IF_ERROR(ValidateStepFor(op, store, ns, step));
  if (ParsePartRecordName(name)) return Status::Ok();  // the one reserved name stores hold as an object
  return InContext(ValidateObjectName(name), op, store);
}

Status AddToTree(std::set<std::string>& names, std::string_view name) {
  for (size_t slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1)) {
    if (names.count(std::string(name.substr(0, slash))) != 0) {
      return FailedPrecondition("object " + QuoteForMessage(name.substr(0, slash)) +
                                " exists, so it cannot also be a directory holding " + QuoteForMessage(name));
    }
  }
  const std::string below = std::string(name) + "/";
  auto next = names.lower_bound(below);
  if (next != names.end() && next->compare(0, below.size(), below) == 0) {
    return FailedPrecondition("object " + QuoteForMessage(*next) + " lies below " + QuoteForMessage(name) +
                              "; an object name cannot also be a directory");
  }
  names.emplace(name);
  return Status::Ok();
}

bool LooksLikeTmpName(std::string_view file_name) {
  size_t last_dot = file_name.rfind('.');
  if (last_dot == std::string_view::npos || !AllDigits(file_name.substr(last_dot + 1))) return false;
  std::string_view rest = file_name.substr(0, last_dot);
  size_t pid_dot = rest.rfind('.');
  if (pid_dot == std::string_view::npos || !AllDigits(rest.substr(pid_dot + 1))) return false;
  rest = rest.substr(0, pid_dot);
  constexpr std::string_view kTmp = ".tmp";
  return rest.size() > kTmp.size() && rest.substr(rest.size() - kTmp.size()) == kTmp;
}

}  // namespace tierckpt::store_internal
