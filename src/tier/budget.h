// budget.h — the memory tier's capacity budget: parsing, resolving and
// checking it against the real free space of the tmpfs mount.
//
// A budget spec is one of
//   "1073741824"            plain bytes
//   "512MiB", "8GiB", "1.5G"  binary units: K/KiB, M/MiB, G/GiB, T/TiB (x1024)
//   "500MB", "8GB"           decimal units: KB, MB, GB, TB (x1000)
//   "25%"                    percent of physical RAM, 0 < p <= 100 (decimals ok)
// Suffixes are case-insensitive; "B" alone means bytes. The result must be at
// least kMinBudgetBytes.
//
// CheckBudgetFits is the start-up check that turns Docker's 64 MiB /dev/shm
// into a clear error instead of a SIGBUS later: the budget must fit in the
// mount's free space plus the bytes our own files already occupy there.
//
// Pure functions (MountSpaceOf and PhysicalMemoryBytes ask the kernel);
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::agent {

inline constexpr uint64_t kMinBudgetBytes = 1ull << 20;  // 1 MiB

// "8GiB" → 8589934592. kInvalidArgument naming `flag` and the accepted forms.
Result<uint64_t> ParseByteSize(std::string_view text, std::string_view flag);

// Resolves a budget spec ("25%" or a byte size) against physical_ram bytes.
Result<uint64_t> ResolveBudget(std::string_view spec, uint64_t physical_ram,
                               std::string_view flag = "--memory-budget");

// Total physical RAM (sysconf), 0 if unknown.
uint64_t PhysicalMemoryBytes();

// "4.0 GiB", "64.0 MiB", "512 B".
std::string FormatBytes(uint64_t bytes);

struct MountSpace {
  uint64_t free_bytes = 0;   // available to unprivileged users (f_bavail)
  uint64_t total_bytes = 0;
};
Result<MountSpace> MountSpaceOf(const std::string& path);

// Bytes allocated (st_blocks) by regular files under dir; 0 if dir is absent.
Result<uint64_t> AllocatedBytesUnder(const std::string& dir);

// Ok if budget <= space.free_bytes + our_bytes; otherwise kResourceExhausted:
// "memory budget 4.0 GiB does not fit in <root>: the mount has 64.0 MiB free.
//  Fix: mount a larger tmpfs (...) or lower --memory-budget."
Status CheckBudgetFits(const std::string& root, uint64_t budget, const MountSpace& space,
                       uint64_t our_bytes);

}  // namespace tierckpt::agent
