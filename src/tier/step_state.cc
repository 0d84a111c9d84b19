#include "tier/step_state.h"

namespace tierckpt::agent {

const char* PersistStateName(PersistState s) {
  switch (s) {
    case PersistState::kNone:
      return "";
    case PersistState::kQueued:
    case PersistState::kRunning:
      return "pending";
    case PersistState::kDurable:
      return "committed";
    case PersistState::kFailed:
      return "failed";
  }
  return "";
}

std::string JoinIds(const std::vector<std::string>& ids, std::string_view sep) {
  std::string out;
  for (const std::string& id : ids) {
    if (!out.empty()) out += sep;
    out += id;
  }
  return out;
}

std::string StepLabel(std::string_view ns, uint64_t step) {
  return std::string(ns) + "/" + std::to_string(step);
}

uint64_t StepState::Bytes() const {
  if (committed) return manifest.TotalBytes();
  uint64_t total = 0;
  for (const auto& [name, o] : objects) total += o.size;
  return total;
}

}  // namespace tierckpt::agent
