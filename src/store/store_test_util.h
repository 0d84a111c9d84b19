// store_test_util.h — helpers shared by the store tests (test-only).
//
// TempDir (testing/temp_dir.h) owns a fresh directory under /tmp and removes it on destruction.
// MakeManifest builds a valid manifest (sorted, sized, checksummed) for given
// object contents. ListFiles lists every non-directory below a root.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "os/files.h"
#include "testing/temp_dir.h"
#include "tierckpt/manifest.h"

namespace tierckpt::testing_util {


// Object name → contents.
using Contents = std::map<std::string, std::string>;

inline Manifest MakeManifest(const std::string& ns, uint64_t step, const Contents& objects) {
  Manifest m;
  m.ns = ns;
  m.step = step;
  m.world_size = 1;
  m.created_unix_ms = 1700000000000ULL;
  m.node = "node-a";
  for (const auto& [name, data] : objects) {  // std::map: already sorted
    m.objects.push_back({name, data.size(), ComputeChecksum(data.data(), data.size()).ToString(),
                         "node-a"});
  }
  return m;
}

// Deterministic, position-dependent bytes.
inline std::string Pattern(size_t size, unsigned seed) {
  std::string s(size, '\0');
  for (size_t i = 0; i < size; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 8)) & 0xff);
  return s;
}

// Paths (relative to root) of every non-directory entry below root, sorted.
inline std::vector<std::string> ListFiles(const std::string& root, const std::string& rel = "") {
  std::vector<std::string> out;
  const std::string dir = rel.empty() ? root : JoinPath(root, rel);
  auto names = ListDir(dir);
  if (!names.ok()) return out;
  for (const auto& n : *names) {
    const std::string child = rel.empty() ? n : rel + "/" + n;
    auto info = StatPath(JoinPath(root, child));
    if (info.ok() && info->is_dir) {
      auto sub = ListFiles(root, child);
      out.insert(out.end(), sub.begin(), sub.end());
    } else {
      out.push_back(child);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace tierckpt::testing_util
