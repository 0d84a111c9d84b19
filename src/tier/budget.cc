#include "tier/budget.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "os/fd.h"
#include "os/files.h"

namespace tierckpt::agent {
namespace {

Status BadSize(std::string_view text, std::string_view flag, std::string_view why) {
  return InvalidArgument(std::string(flag) + " \"" + std::string(text.substr(0, 40)) + "\" " +
                         std::string(why) +
                         "; use bytes (\"1073741824\"), a size with a unit (\"512MiB\", \"8GiB\", "
                         "\"500MB\") or a percent of RAM (\"25%\")");
}

std::string Lower(std::string_view s) {
  std::string out;
  for (char c : s) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Parses a non-negative decimal number with an optional fraction; the rest of
// the text goes to *rest.
bool ParseNumber(std::string_view text, double* value, std::string_view* rest) {
  size_t i = 0;
  bool digits = false;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    ++i;
    digits = true;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      digits = true;
    }
  }
  if (!digits || i > 40) return false;
  *value = std::strtod(std::string(text.substr(0, i)).c_str(), nullptr);
  *rest = text.substr(i);
  return true;
}

bool UnitMultiplier(std::string_view unit, double* mult) {
  std::string u = Lower(unit);
  struct U {
    const char* name;
    double mult;
  };
  static const U kUnits[] = {
      {"", 1.0},           {"b", 1.0},
      {"k", 1024.0},       {"kib", 1024.0},       {"kb", 1e3},
      {"m", 1048576.0},    {"mib", 1048576.0},    {"mb", 1e6},
      {"g", 1073741824.0}, {"gib", 1073741824.0}, {"gb", 1e9},
      {"t", 1099511627776.0}, {"tib", 1099511627776.0}, {"tb", 1e12},
  };
  for (const auto& k : kUnits) {
    if (u == k.name) {
      *mult = k.mult;
      return true;
    }
  }
  return false;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<uint64_t> ParseByteSize(std::string_view text, std::string_view flag) {
  std::string_view t = Trim(text);
  if (t.empty()) return BadSize(text, flag, "is empty");
  double value = 0;
  std::string_view rest;
  if (!ParseNumber(t, &value, &rest)) return BadSize(text, flag, "does not start with a number");
  double mult = 1;
  if (!UnitMultiplier(Trim(rest), &mult)) return BadSize(text, flag, "has an unknown unit");
  double bytes = std::floor(value * mult);
  if (!(bytes < 1.8e19)) return BadSize(text, flag, "is too large");
  return static_cast<uint64_t>(bytes);
}

Result<uint64_t> ResolveBudget(std::string_view spec, uint64_t physical_ram, std::string_view flag) {
  std::string_view t = Trim(spec);
  uint64_t bytes = 0;
  if (!t.empty() && t.back() == '%') {
    double pct = 0;
    std::string_view rest;
    if (!ParseNumber(Trim(t.substr(0, t.size() - 1)), &pct, &rest) || !rest.empty()) {
      return BadSize(spec, flag, "is not a valid percent");
    }
    if (pct <= 0 || pct > 100) return BadSize(spec, flag, "must be a percent in (0, 100]");
    if (physical_ram == 0) {
      return InvalidArgument(std::string(flag) + " \"" + std::string(spec) +
                             "\" is a percent of RAM, but the physical RAM size is unknown on this "
                             "machine; give the budget in bytes (e.g. \"8GiB\")");
    }
    bytes = static_cast<uint64_t>(std::floor(static_cast<double>(physical_ram) * pct / 100.0));
  } else {
    TC_ASSIGN_OR_RETURN(bytes, ParseByteSize(spec, flag));
  }
  if (bytes < kMinBudgetBytes) {
    return InvalidArgument(std::string(flag) + " \"" + std::string(spec.substr(0, 40)) + "\" is " +
                           FormatBytes(bytes) + "; the minimum is " + FormatBytes(kMinBudgetBytes));
  }
  return bytes;
}

uint64_t PhysicalMemoryBytes() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", v, kUnits[u]);
  return buf;
}

Result<MountSpace> MountSpaceOf(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return ErrnoStatus("statvfs " + path);
  MountSpace m;
  m.free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  m.total_bytes = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  return m;
}

Result<uint64_t> AllocatedBytesUnder(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return uint64_t{0};
    return ErrnoStatus("stat " + dir);
  }
  if (S_ISREG(st.st_mode)) return static_cast<uint64_t>(st.st_blocks) * 512;
  if (!S_ISDIR(st.st_mode)) return uint64_t{0};
  TC_ASSIGN_OR_RETURN(auto names, ListDir(dir));
  uint64_t total = 0;
  for (const auto& n : names) {
    TC_ASSIGN_OR_RETURN(uint64_t sub, AllocatedBytesUnder(JoinPath(dir, n)));
    total += sub;
  }
  return total;
}

Status CheckBudgetFits(const std::string& root, uint64_t budget, const MountSpace& space,
                       uint64_t our_bytes) {
  if (budget <= space.free_bytes + our_bytes) return Status::Ok();
  std::string have = "the mount has " + FormatBytes(space.free_bytes) + " free";
  if (our_bytes > 0) have += " (plus " + FormatBytes(our_bytes) + " already held by this agent's files)";
  return ResourceExhausted("memory budget " + FormatBytes(budget) + " does not fit in " + root + ": " +
                           have +
                           ". Fix: mount a larger tmpfs (docker run --shm-size=..., Kubernetes "
                           "emptyDir.medium: Memory with sizeLimit) or lower --memory-budget.");
}

}  // namespace tierckpt::agent
