// tier_restore.h — copying a step from another ObjectStore (the durable
// tier, a peer) into memory-tier files: the parts of MemoryTier::Restore
// that know nothing of the tier's index or lock.
//
// ForEachObject runs a per-object function over a manifest's objects, a
// few at a time; FillObjectFile fetches one object into a file the tier made
// for it (TierFiles) and verifies its bytes against the manifest entry. The
// tier reserves each object (budget, name, file) under its lock and calls
// these without it (memory_tier_restore.cc).
//
// Thread-safe (no state). Errors: the store's, with the object and the
// store named; kCorruption when the copy's bytes do not match the manifest.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "store/object_store.h"
#include "tierckpt/manifest.h"
#include "tierckpt/status.h"

namespace tierckpt::agent {

// Calls fn for every object of manifest, up to `threads` at a time (the
// calling thread among them): one object's phases (create, fetch, verify)
// leave the medium or the CPU idle that another object's can use. Stops
// handing out objects after the first failure and returns it.
Status ForEachObject(const Manifest& manifest, size_t threads,
                     const std::function<Status(const ObjectEntry&)>& fn);

// Writes object e of (ns, step) from store into fd (path: for messages),
// exactly e.size bytes, and checks its checksum (the store's hash of what it
// wrote, or a read-back of the file).
Status FillObjectFile(ObjectStore& store, const std::string& ns, uint64_t step, const ObjectEntry& e, int fd,
                      const std::string& path);

}  // namespace tierckpt::agent
