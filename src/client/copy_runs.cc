// The scatter/gather copy between an object's mapping and the caller's memory.
#include "client/copy_runs.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/client_internal.h"

namespace tierckpt {
namespace client_internal {
namespace {

constexpr int kMaxThreads = 64;
// Below this many bytes per extra thread, starting a thread costs more than it saves.
constexpr uint64_t kMinBytesPerThread = 4ull << 20;

void CopyOne(uint8_t* object, const CopyRun& run, uint64_t skip, uint64_t len, CopyDirection direction) {
  uint8_t* in_object = object + run.offset + skip;
  auto* in_caller = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(run.address)) + skip;
  if (direction == CopyDirection::kIntoObject) {
    std::memcpy(in_object, in_caller, len);
  } else {
    std::memcpy(in_caller, in_object, len);
  }
}

// Copies bytes [begin, end) of the concatenation of all runs.
void CopyShare(uint8_t* object, const CopyRun* runs, size_t count, uint64_t begin, uint64_t end,
               CopyDirection direction) {
  uint64_t at = 0;
  for (size_t i = 0; i < count && at < end; ++i) {
    const uint64_t run_end = at + runs[i].size;
    if (run_end > begin) {
      const uint64_t from = std::max(begin, at) - at;
      const uint64_t to = std::min(end, run_end) - at;
      if (to > from) CopyOne(object, runs[i], from, to - from, direction);
    }
    at = run_end;
  }
}

}  // namespace

Status CopyRuns(uint8_t* object, size_t object_size, std::string_view object_name, const CopyRun* runs,
                size_t count, int threads, CopyDirection direction) {
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgument("copy of object " + std::string(object_name) + ": threads must be 1.." +
                           std::to_string(kMaxThreads) + ", not " + std::to_string(threads));
  }
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
  if (total == 0) return Status();
  const uint64_t useful = std::max<uint64_t>(1, total / kMinBytesPerThread);
  const int n = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(threads), useful));
  const uint64_t share = (total + n - 1) / n;
  std::vector<std::thread> helpers;
  helpers.reserve(n - 1);
  for (int t = 1; t < n; ++t) {
    const uint64_t begin = share * t;
    const uint64_t end = std::min(total, begin + share);
    helpers.emplace_back(CopyShare, object, runs, count, begin, end, direction);
  }
  CopyShare(object, runs, count, 0, std::min(total, share), direction);
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
  if (view.data() == nullptr) return FailedPrecondition("CopyOut: the view holds no object");
  // The mapping is read-only: CopyRuns only reads through the object pointer in this direction.
  return client_internal::CopyRuns(const_cast<uint8_t*>(view.data()), view.size(), view.name(), runs, count,
                                   threads, client_internal::CopyDirection::kOutOfObject);
}

}  // namespace tierckpt
