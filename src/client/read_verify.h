// read_verify.h — the one decision of a read's integrity check: does the
// client hash this object, given the caller's ReadVerify
// (include/tierckpt/client.h) and the agent's answer of how long ago it last
// verified the bytes (OpenObject's verified_age_ms, wire/protocol.h)?
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "tierckpt/client.h"

namespace tierckpt::client {

// What a read does with one object.
enum class ReadCheck {
  kHash,        // the client re-hashes it (kAlways; kAttested without a fresh attestation)
  kAttested,    // kAttested, and the agent verified it at most max_age ago
  kUnverified,  // kNever
};

// verified_age_ms: wire::kNeverVerifiedAgeMs when the agent never verified it.
ReadCheck DecideReadCheck(const ReadVerify& verify, uint64_t verified_age_ms);

}  // namespace tierckpt::client
