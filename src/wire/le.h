// le.h — little-endian integers in byte buffers, and hex for messages; shared
// by the local protocol (protocol.cc) and the peer protocol (src/peer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace tierckpt::wire {

// Writes the low `width` bytes (1..8) of v to out, least significant first.
inline void StoreLe(uint8_t* out, uint64_t v, size_t width) {
  for (size_t i = 0; i < width; ++i) out[i] = static_cast<uint8_t>((v >> (8 * i)) & 0xff);
}

// Reads `width` bytes (1..8), least significant first.
inline uint64_t LoadLe(const uint8_t* in, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint64_t>(in[i]) << (8 * i);
  return v;
}

// "0x504b4354", for error messages about magic numbers.
inline std::string Hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

}  // namespace tierckpt::wire
