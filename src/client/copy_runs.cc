// The scatter/gather copy between an object's mapping and the caller's memory.
#include "client/copy_runs.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/client_internal.h"
#include "client/stream_copy.h"

namespace tierckpt {
namespace client_internal {
namespace {

constexpr int kMaxThreads = 64;
// Below this many bytes per extra thread, starting a thread costs more than it saves.
constexpr uint64_t kMinBytesPerThread = 4ull << 20;

// The one-pass verified copy's piece (the hash's unit; the copy of a piece
// reads it from L2), and the size above which a copy bypasses the cache
// (stream_copy.h): a CopyRuns of more bytes than that in all, or a verified
// copy of a larger object. Ordinary stores would first read every destination
// line: 1.6-1.7x the time on the 2-core VM (decision 173).
constexpr uint64_t kVerifiedPiece = 64u << 10;
constexpr uint64_t kStreamAbove = 8u << 20;

void CopyOne(uint8_t* object, const CopyRun& run, uint64_t skip, uint64_t len, CopyDirection direction,
             bool stream) {
  uint8_t* in_object = object + run.offset + skip;
  auto* in_caller = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(run.address)) + skip;
  uint8_t* dst = direction == CopyDirection::kIntoObject ? in_object : in_caller;
  const uint8_t* src = direction == CopyDirection::kIntoObject ? in_caller : in_object;
  if (stream) {
    StreamCopy(dst, src, len);
  } else {
    std::memcpy(dst, src, len);
  }
}

// Copies bytes [begin, end) of the concatenation of all runs.
// With stream, every byte goes with non-temporal stores, fenced before returning.
void CopyShare(uint8_t* object, const CopyRun* runs, size_t count, uint64_t begin, uint64_t end,
               CopyDirection direction, bool stream) {
  uint64_t at = 0;
  for (size_t i = 0; i < count && at < end; ++i) {
    const uint64_t run_end = at + runs[i].size;
    if (run_end > begin) {
      const uint64_t from = std::max(begin, at) - at;
      const uint64_t to = std::min(end, run_end) - at;
      if (to > from) CopyOne(object, runs[i], from, to - from, direction, stream);
    }
    at = run_end;
  }
  if (stream) StreamFence();  // each thread fences its own stores
}

// Every run within the object and with an address: the sum of their sizes, or
// kInvalidArgument naming the first that is not.
Result<uint64_t> CheckRuns(size_t object_size, std::string_view object_name, const CopyRun* runs,
                           size_t count) {
  if (count > 0 && runs == nullptr)
    return InvalidArgument("copy of object " + std::string(object_name) + ": no runs");
  uint64_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const CopyRun& r = runs[i];
    if (r.offset > object_size || r.size > object_size - r.offset) {
      return InvalidArgument("copy of object " + std::string(object_name) + ": run " + std::to_string(i) +
                             " (offset " + std::to_string(r.offset) + ", " + std::to_string(r.size) +
                             " bytes) ends past the object's " + std::to_string(object_size) +
                             " bytes; nothing was copied");
    }
    if (r.size > 0 && r.address == 0) {
      return InvalidArgument("copy of object " + std::string(object_name) + ": run " + std::to_string(i) +
                             " has a null address; nothing was copied");
    }
    total += r.size;
  }
  return total;
}

}  // namespace

Result<Checksum> CopyOutAndChecksum(const uint8_t* object, size_t object_size, std::string_view object_name,
                                    const CopyRun* runs, size_t count) {
  TC_RETURN_IF_ERROR(CheckRuns(object_size, object_name, runs, count).status());
  std::vector<size_t> order;  // the runs with bytes, by their offset in the object
  order.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (runs[i].size > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [runs](size_t a, size_t b) { return runs[a].offset < runs[b].offset; });
  const bool stream = object_size > kStreamAbove;
  std::vector<size_t> active;  // runs that reach into the current piece
  size_t next = 0;
  Hasher hasher;
  for (uint64_t piece = 0; piece < object_size; piece += kVerifiedPiece) {
    const uint64_t end = std::min<uint64_t>(object_size, piece + kVerifiedPiece);
    hasher.Update(object + piece, end - piece);
    while (next < order.size() && runs[order[next]].offset < end) active.push_back(order[next++]);
    for (size_t k = 0; k < active.size();) {
      const CopyRun& r = runs[active[k]];
      const uint64_t from = std::max(piece, r.offset);
      const uint64_t to = std::min(end, r.offset + r.size);
      auto* dst = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(r.address)) + (from - r.offset);
      if (stream) {
        StreamCopy(dst, object + from, to - from);
      } else {
        std::memcpy(dst, object + from, to - from);
      }
      if (r.offset + r.size <= end) {
        active[k] = active.back();
        active.pop_back();
      } else {
        ++k;
      }
    }
  }
  if (stream) StreamFence();
  return hasher.Finish();
}

Status CopyRuns(uint8_t* object, size_t object_size, std::string_view object_name, const CopyRun* runs,
                size_t count, int threads, CopyDirection direction) {
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgument("copy of object " + std::string(object_name) + ": threads must be 1.." +
                           std::to_string(kMaxThreads) + ", not " + std::to_string(threads));
  }
  TC_ASSIGN_OR_RETURN(const uint64_t total, CheckRuns(object_size, object_name, runs, count));
  if (total == 0) return Status();
  const uint64_t useful = std::max<uint64_t>(1, total / kMinBytesPerThread);
  const int n = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(threads), useful));
  const uint64_t share = (total + n - 1) / n;
  // A copy larger than a cache streams every run, whatever its size: glibc's memcpy takes
  // non-temporal stores only for one large block, so a state dict of many tensors of a few hundred
  // KiB (a transformer's) would be copied with ordinary stores, each first reading its destination
  // line (decision 173).
  const bool stream = total > kStreamAbove;
  std::vector<std::thread> helpers;
  helpers.reserve(n - 1);
  for (int t = 1; t < n; ++t) {
    const uint64_t begin = share * t;
    const uint64_t end = std::min(total, begin + share);
    helpers.emplace_back(CopyShare, object, runs, count, begin, end, direction, stream);
  }
  CopyShare(object, runs, count, 0, std::min(total, share), direction, stream);
  for (auto& h : helpers) h.join();
  return Status();
}

}  // namespace client_internal

Status CopyIn(const WritableObject& object, const CopyRun* runs, size_t count, int threads) {
  if (object.data() == nullptr) return FailedPrecondition("CopyIn: the object is not open for writing");
  return client_internal::CopyRuns(object.data(), object.size(), object.name(), runs, count, threads,
                                   client_internal::CopyDirection::kIntoObject);
}

Status CopyOut(const ObjectView& view, const CopyRun* runs, size_t count, int threads) {
  if (view.hash_due()) {
    ObjectView::Impl& v = *view.impl_;
    TC_ASSIGN_OR_RETURN(Checksum got, client_internal::CopyOutAndChecksum(v.lease.data(), v.lease.size(),
                                                                          v.name, runs, count));
    TC_RETURN_IF_ERROR(CheckObjectChecksum(v.ns, v.step, v.name, v.expected, got));
    v.hash_due = false;
    return Status();
  }
  if (view.data() == nullptr) return FailedPrecondition("CopyOut: the view holds no object");
  // The mapping is read-only: CopyRuns only reads through the object pointer in this direction.
  return client_internal::CopyRuns(const_cast<uint8_t*>(view.data()), view.size(), view.name(), runs, count,
                                   threads, client_internal::CopyDirection::kOutOfObject);
}

}  // namespace tierckpt
