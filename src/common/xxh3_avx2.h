// xxh3_avx2.h — XXH3-64 built for AVX2 (xxh3_avx2.cc), for checksum.cc only.
//
// Debian's libxxhash and an inline build at the x86-64 baseline run XXH3 on
// SSE2: about 9 GB/s from cache on the 2-core VM, against 40-50 GB/s with
// AVX2 (decision 155). Every variant computes the same hash, so a state
// updated here may be updated or finished by the baseline build and the
// other way round.
//
// Contract: call these only where the CPU has AVX2 (checksum.cc checks
// __builtin_cpu_supports once); TIERCKPT_XXH3_AVX2 is 0 where they are not
// built (not x86-64).
#pragma once

#include <cstddef>
#include <cstdint>

#ifndef TIERCKPT_XXH3_AVX2
#define TIERCKPT_XXH3_AVX2 0
#endif

namespace tierckpt::xxh3_avx2 {

// XXH3_64bits(data, size), seed 0.
uint64_t Hash(const void* data, size_t size);
// XXH3_64bits_update on an XXH3_state_t the caller reset.
void Update(void* state, const void* data, size_t size);

}  // namespace tierckpt::xxh3_avx2
