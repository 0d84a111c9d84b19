// checksum.h — object checksums, spelled "xxh3-64:<16 hex digits>".
//
// One algorithm today, XXH3-64 from libxxhash (seed 0), over the object's bytes
// in order, so any xxh3 tool reproduces it (`xxhsum -H3`). The spelling
// carries the algorithm so others (crc32c, xxh3-128) can be added without a
// format break; Parse rejects algorithms it does not know.
//
// Hasher is a streaming state: not thread-safe, one per object. The free
// functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt {

struct Checksum {
  uint64_t value = 0;

  std::string ToString() const;  // "xxh3-64:00ab..."
  static Result<Checksum> Parse(std::string_view text);
  bool operator==(const Checksum&) const = default;
};

Checksum ComputeChecksum(const void* data, size_t size);

// Which build of XXH3 this process hashes with: "avx2" where the CPU has it
// and the library was built for x86-64, else "baseline" (decision 155). Every
// build computes the same checksums; only the speed differs.
std::string_view ChecksumKernel();

class Hasher {
 public:
  Hasher();
  ~Hasher();
  Hasher(const Hasher&) = delete;
  Hasher& operator=(const Hasher&) = delete;

  void Update(const void* data, size_t size);
  Checksum Finish() const;  // may be called more than once

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Copies size bytes from src to dst and returns the checksum of those bytes,
// in one pass (chunked so the hash reads from cache). src and dst must not
// overlap.
Checksum CopyAndChecksum(void* dst, const void* src, size_t size);

}  // namespace tierckpt
