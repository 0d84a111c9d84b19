// xxh3_avx2.cc — XXH3-64 compiled for AVX2, picked at run time by
// checksum.cc when the CPU has it (decision 155).
//
// This file alone is compiled with -mavx2 (src/common/CMakeLists.txt) and
// kept out of the unity batches. It includes nothing but xxhash.h, whose
// functions are all static under XXH_INLINE_ALL: no inline C++ function can
// be emitted here with AVX2 instructions and then picked by the linker for
// another file's callers on a CPU without AVX2.
#include "common/xxh3_avx2.h"

#if TIERCKPT_XXH3_AVX2
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace tierckpt::xxh3_avx2 {

uint64_t Hash(const void* data, size_t size) { return XXH3_64bits(data, size); }

void Update(void* state, const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

}  // namespace tierckpt::xxh3_avx2
#endif
