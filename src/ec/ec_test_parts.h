// ec_test_parts.h — test helpers of src/ec: random parts (1–5 objects of
// random sizes, empty ones included) with their manifests and bytes, and a
// group's parity computed by ParityAccumulator. Test code only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "common/checksum.h"
#include "common/mutex.h"
#include "ec/parity_accumulator.h"
#include "ec/piece_io.h"
#include "tierckpt/manifest.h"

namespace tierckpt::ec::testing {

inline constexpr const char* kNs = "job";
inline constexpr uint64_t kStep = 42;

struct TestPart {
  Manifest manifest;
  MemoryObjectSource source;
  std::vector<uint8_t> piece;  // the objects back to back, in manifest order
};

// A part of node `node` of 1..5 objects (at least min_objects), sizes drawn
// from 0, 1, up to 3000 and up to 40000 bytes.
inline TestPart MakePart(const std::string& node, std::mt19937& rng, uint64_t min_bytes = 0) {
  TestPart p;
  p.manifest.ns = kNs;
  p.manifest.step = kStep;
  p.manifest.node = node;
  const int count = 1 + static_cast<int>(rng() % 5);
  for (int i = 0; i < count; ++i) {
    size_t size = 0;
    switch (rng() % 4) {
      case 0:
        size = 0;
        break;
      case 1:
        size = 1 + rng() % 3;
        break;
      case 2:
        size = rng() % 3000;
        break;
      default:
        size = rng() % 40000;
        break;
    }
    if (i == 0 && size < min_bytes) size = min_bytes;
    std::vector<uint8_t> bytes(size);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    ObjectEntry e{.name = "rank" + std::to_string(i) + "/" + node + ".pt",
                  .size = size,
                  .checksum = ComputeChecksum(bytes.data(), bytes.size()).ToString(),
                  .node = node};
    p.manifest.objects.push_back(e);
    p.source.Put(e.name, std::move(bytes));
  }
  std::sort(p.manifest.objects.begin(), p.manifest.objects.end(),
            [](const ObjectEntry& a, const ObjectEntry& b) { return a.name < b.name; });
  for (const ObjectEntry& e : p.manifest.objects) {
    const std::vector<uint8_t>* b = p.source.Find(e.name);
    p.piece.insert(p.piece.end(), b->begin(), b->end());
  }
  return p;
}

inline std::vector<TestPart> MakeParts(uint32_t members, uint32_t seed, uint64_t min_bytes = 0) {
  std::mt19937 rng(seed);
  std::vector<TestPart> parts(members);
  for (uint32_t i = 0; i < members; ++i) parts[i] = MakePart("node-" + std::to_string(i), rng, min_bytes);
  return parts;
}

inline ParityAccumulatorConfig Config(uint32_t k, uint32_t m, uint32_t members, size_t chunk) {
  return ParityAccumulatorConfig{.ns = kNs,
                                 .step = kStep,
                                 .group = 3,
                                 .k = k,
                                 .m = m,
                                 .members = members,
                                 .held = {},
                                 .chunk_bytes = chunk};
}

// The m parity pieces of the parts by ReedSolomon::Encode over the pieces
// zero-padded to the longest: what the accumulator must equal.
inline std::vector<std::vector<uint8_t>> EncodedParity(uint32_t k, uint32_t m,
                                                       const std::vector<TestPart>& parts) {
  size_t len = 0;
  for (const TestPart& p : parts) len = std::max(len, p.piece.size());
  std::vector<std::vector<uint8_t>> data(k, std::vector<uint8_t>(len, 0));
  for (size_t i = 0; i < parts.size(); ++i)
    std::copy(parts[i].piece.begin(), parts[i].piece.end(), data[i].begin());
  std::vector<std::vector<uint8_t>> parity(m, std::vector<uint8_t>(len));
  std::vector<const uint8_t*> in;
  std::vector<uint8_t*> out;
  for (auto& d : data) in.push_back(d.data());
  for (auto& p : parity) out.push_back(p.data());
  Result<ReedSolomon> rs = ReedSolomon::Create(k, m);
  EXPECT_TRUE(rs.ok());
  EXPECT_TRUE(rs->Encode(in, out, len).ok());
  return parity;
}

// Where `parties` folds meet: each waits in Arrive until every one has
// arrived, so the folds are shown to run at once; after `timeout` without
// them all, Arrive fails (kTimeout): the folds ran one after the other.
class Rendezvous {
 public:
  Rendezvous(int parties, std::chrono::milliseconds timeout) : parties_(parties), timeout_(timeout) {}
  Status Arrive() {
    MutexLock lock(&mu_);
    ++arrived_;
    all_.SignalAll();
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (arrived_ < parties_) {
      if (!all_.WaitUntil(deadline) && arrived_ < parties_) {
        return Timeout("only " + std::to_string(arrived_) + " of " + std::to_string(parties_) +
                       " folds reached their first read at once: they did not run side by side");
      }
    }
    return Status::Ok();
  }
  int arrived() {
    MutexLock lock(&mu_);
    return arrived_;
  }

 private:
  const int parties_;
  const std::chrono::milliseconds timeout_;
  Mutex mu_;
  CondVar all_{&mu_};
  int arrived_ GUARDED_BY(mu_) = 0;
};

// An ObjectSource whose first read waits at a Rendezvous, then reads from inner.
class MeetingSource : public ObjectSource {
 public:
  MeetingSource(ObjectSource* inner, Rendezvous* meet) : inner_(inner), meet_(meet) {}
  Status Read(std::string_view name, uint64_t offset, uint8_t* buf, size_t len) override {
    if (!met_) {
      met_ = true;
      TC_RETURN_IF_ERROR(meet_->Arrive());
    }
    return inner_->Read(name, offset, buf, len);
  }

 private:
  ObjectSource* const inner_;
  Rendezvous* const meet_;
  bool met_ = false;
};

}  // namespace tierckpt::ec::testing
