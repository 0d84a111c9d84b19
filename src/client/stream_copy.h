// stream_copy.h — the client's copy past the cache: non-temporal stores.
//
// An ordinary store first reads its destination line into the cache, so a copy
// far larger than the cache moves each byte three times; a non-temporal store
// writes the line without reading it. glibc's memcpy streams only one large
// block, and even then with `rep movsb` on CPUs that have FSRM: measured on the
// 2-core VM (AMD EPYC, two processes at once, 538 MB into a /dev/shm mapping),
// 1,556 runs of a transformer's sizes take 99 ms with memcpy, 64 ms with SSE2
// streaming and 58 ms with AVX2 streaming (decision 173).
//
// Contract: the stores of StreamCopy are weakly ordered; a thread calls
// StreamFence after its copies and before anything may tell another thread or
// process that the destination is ready.
#pragma once

#include <cstdint>
#include <string_view>

namespace tierckpt::client_internal {

enum class StreamKernel {
  kAvx2,    // 32-byte non-temporal stores; x86-64 CPUs with AVX2
  kSse2,    // 16-byte non-temporal stores; every x86-64 CPU
  kMemcpy,  // ordinary stores; other architectures
};

// The kernel this CPU streams with, decided once: AVX2 where the CPU has it.
StreamKernel BestStreamKernel();
std::string_view StreamKernelName(StreamKernel kernel);
// Whether `kernel` can run on this CPU (the tests run each that can).
bool StreamKernelRuns(StreamKernel kernel);

// Copies n bytes from src to dst (not overlapping), any alignment and size,
// with BestStreamKernel() or the one named.
void StreamCopy(uint8_t* dst, const uint8_t* src, uint64_t n);
void StreamCopy(StreamKernel kernel, uint8_t* dst, const uint8_t* src, uint64_t n);

// Orders this thread's StreamCopy stores before its later memory operations.
void StreamFence();

}  // namespace tierckpt::client_internal
