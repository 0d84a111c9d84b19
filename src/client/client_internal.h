// client_internal.h — the private state behind WritableObject and
// ObjectView, shared by client.cc (which fills it) and objects.cc.
#pragma once

#include <cstdint>
#include <string>

#include "client/mapping_cache.h"
#include "common/checksum.h"
#include "tierckpt/client.h"

namespace tierckpt {

struct WritableObject::Impl {
  std::string ns;
  uint64_t step = 0;
  std::string name;
  uint64_t size = 0;
  client::MappingCache::Lease lease;  // held until the WritableObject dies
  bool sealed = false;
};

struct ObjectView::Impl {
  std::string ns;
  uint64_t step = 0;
  std::string name;
  std::string checksum;          // as sent by the agent (from the manifest)
  Checksum expected;             // checksum, parsed
  std::string repaired;          // the agent's note when it replaced a corrupt copy
  uint64_t verified_age_ms = 0;  // the agent's answer (wire::kNeverVerifiedAgeMs: never)
  // The file's identity when the agent handed it out (ObjectView::Unchanged).
  uint64_t ino = 0;
  int64_t ctime_ns = 0;
  int64_t mtime_ns = 0;
  client::MappingCache::Lease lease;
  // Client::OpenToCopy left the client's hash to the first CopyOut; cleared
  // once a CopyOut found the bytes matching `expected`.
  bool hash_due = false;
};

// Ok when `got` is `expected`, the checksum the manifest gives object
// ns/step/name; else kCorruption naming the object and what to do.
Status CheckObjectChecksum(const std::string& ns, uint64_t step, const std::string& name,
                           const Checksum& expected, const Checksum& got);

}  // namespace tierckpt
