// golden.h — helpers for the golden wire-format tests (protocol_golden_test,
// peer_frame_golden_test, peer_messages_golden_test): bytes as lowercase hex,
// and the check that a declared message encodes to pinned bytes and decodes
// back to the same bytes. Header-only; for tests. Thread-compatible.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "tierckpt/status.h"

namespace tierckpt::testing_util {

// Two lowercase hex digits per byte.
inline std::string Hex(std::string_view bytes) {
  std::string out;
  char b[3];
  for (unsigned char c : bytes) {
    std::snprintf(b, sizeof(b), "%02x", c);
    out += b;
  }
  return out;
}

// value.Encode() must be exactly `hex`, and T::Decode of those bytes must
// re-encode to them.
template <typename T>
void ExpectGolden(const T& value, std::string_view hex) {
  const std::string bytes = value.Encode();
  EXPECT_EQ(Hex(bytes), hex);
  Result<T> back = T::Decode(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Encode(), bytes);
}

}  // namespace tierckpt::testing_util
