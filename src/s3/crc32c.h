// crc32c.h — CRC-32C (Castagnoli), the checksum S3 verifies per part and per
// object (x-amz-checksum-crc32c).
//
// Parameters: reflected polynomial 0x82F63B78 (0x1EDC6F41 normal), initial
// value and final xor 0xFFFFFFFF; Crc32c("123456789") == 0xE3069283.
//
// Crc32c streams like zlib's crc32: pass the previous result as `crc` to
// continue, so Crc32c(b, nb, Crc32c(a, na)) == Crc32c(a||b, na + nb), and
// crc = 0 starts afresh. Crc32cCombine joins the CRCs of two pieces computed
// independently (parts uploaded in parallel) into the CRC of their
// concatenation, in O(log len_b) without touching the data.
//
// On x86-64 with SSE4.2 (checked once at run time) Crc32c uses the crc32
// instruction on three interleaved streams; elsewhere a slicing-by-8 table.
// Both give identical results (tested). All functions are pure and
// thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tierckpt::s3 {

uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// CRC of A||B given crc_a = Crc32c(A), crc_b = Crc32c(B) and len_b = |B|.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// Base64 of the four big-endian bytes: the x-amz-checksum-crc32c value
// (0xE3069283 → "4waSgw==").
std::string Crc32cBase64(uint32_t crc);

namespace internal {
// The two implementations behind Crc32c, exposed for tests and benchmarks.
uint32_t Crc32cSoftware(const void* data, size_t size, uint32_t crc);
// Precondition: Crc32cHardwareAvailable().
uint32_t Crc32cHardware(const void* data, size_t size, uint32_t crc);
bool Crc32cHardwareAvailable();
}  // namespace internal

}  // namespace tierckpt::s3
