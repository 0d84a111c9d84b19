// agent_test_util.h — helpers shared by the agent's unit tests (test-only).
//
// TempDir: a fresh directory under /tmp, removed on destruction (tests never
// need /dev/shm). TierHarness: a MemoryTier over a temp root with its own
// verifier queue, destroyed in the safe order (verifier first). WriteObject:
// create → pwrite → seal through the tier, like a client would.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <string>

#include "common/checksum.h"
#include "common/work_queue.h"
#include "os/files.h"
#include "testing/temp_dir.h"
#include "tier/memory_tier.h"

namespace tierckpt::agent::testing {

using TempDir = ::tierckpt::testing_util::TempDir;

inline std::string ChecksumOf(const std::string& data) {
  return ComputeChecksum(data.data(), data.size()).ToString();
}

inline uint64_t InodeOf(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// Creates, fills and seals one object. checksum: "auto" = the right one,
// "" = let the agent compute it, anything else is sent as is.
inline Status WriteObject(MemoryTier& tier, std::string_view ns, uint64_t step, std::string_view name,
                          const std::string& data, uint64_t conn = 1, const std::string& checksum = "auto") {
  TC_ASSIGN_OR_RETURN(CreatedObject obj, tier.CreateObject(ns, step, name, data.size(), conn));
  TC_RETURN_IF_ERROR(PwriteAll(obj.fd.get(), data.data(), data.size(), 0, obj.path));
  return tier.SealObject(ns, step, name, data.size(), checksum == "auto" ? ChecksumOf(data) : checksum);
}

// Writes and commits a step holding the given objects.
inline Result<Manifest> WriteStep(MemoryTier& tier, std::string_view ns, uint64_t step,
                                  const std::map<std::string, std::string>& objects, bool persist = false) {
  for (const auto& [name, data] : objects) TC_RETURN_IF_ERROR(WriteObject(tier, ns, step, name, data));
  return tier.CommitStep(ns, step, 1, persist, {});
}

// Reads a whole file.
inline std::string ReadFd(int fd) {
  std::string out;
  char buf[65536];
  off_t off = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

struct TierHarness {
  explicit TierHarness(uint64_t budget = 64u << 20, uint32_t keep_last = 3, bool has_durable = false,
                       uint64_t persist_every = 0) {
    options.root = dir.Sub("root");
    EXPECT_TRUE(MakeDirs(options.root, 0700).ok());
    options.budget_bytes = budget;
    options.keep_last = keep_last;
    options.has_durable = has_durable;
    options.persist_every = persist_every;
    options.node_id = "node-t";
    EXPECT_TRUE(Reopen().ok());
  }
  // A fresh tier over the same root (what an agent restart does).
  Result<RecoveryReport> Reopen() {
    verifier.reset();
    tier.reset();
    auto v = std::make_unique<WorkQueue>("verify", 2);
    tier = std::make_unique<MemoryTier>(options, v.get());
    verifier = std::move(v);
    return tier->Recover();
  }
  std::string StepDir(std::string_view ns, uint64_t step) const { return Layout(options.root).StepDir(ns, step); }
  std::string PartialDir(std::string_view ns, uint64_t step) const {
    return Layout(options.root).PartialDir(ns, step);
  }

  TempDir dir;
  MemoryTierOptions options;
  std::unique_ptr<MemoryTier> tier;
  std::unique_ptr<WorkQueue> verifier;  // declared after tier: destroyed (joined) first
};

}  // namespace tierckpt::agent::testing
