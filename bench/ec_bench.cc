// ec_bench — the Reed-Solomon code of src/ec against the machine's memcpy
// (issue 23 item 5, first figures): how fast a node encodes its group's
// parity and rebuilds lost pieces, as ratios of one memcpy of the same bytes
// measured in the same run, rounds interleaved.
//
//   build/release/bench/ec_bench [--k 4] [--m 2] [--piece-mib 64] [--rounds 7] [--json]
//
// Per round, on K data pieces of --piece-mib MiB each (resident, pre-faulted):
//   memcpy       copy of the K pieces (K × piece bytes): the limit;
//   encode       ec_encode_data of the M parity pieces from the K (reads K × piece);
//   update       the same parity folded in one piece at a time (what a parity
//                holder does as parts arrive from their nodes);
//   rebuild      M lost data pieces rebuilt from K survivors (reads K × piece).
// Throughput is of the K × piece input bytes; the median of the rounds is
// reported, each ratio taken within its round first.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_util.h"
#include "ec/reed_solomon.h"

namespace tierckpt::bench {
namespace {

double Seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(uint32_t k, uint32_t m, uint64_t piece, int rounds, bool json) {
  Result<ec::ReedSolomon> rs = ec::ReedSolomon::Create(k, m);
  if (!rs.ok()) {
    std::fprintf(stderr, "ec_bench: %s\n", rs.status().ToString().c_str());
    return 2;
  }
  std::vector<HostBuffer> data, parity, rebuilt;
  auto alloc = [&](std::vector<HostBuffer>* out, uint32_t n, const char* what) {
    for (uint32_t i = 0; i < n; ++i) {
      Result<HostBuffer> b = HostBuffer::Allocate(piece, what);
      if (!b.ok()) return b.status();
      b->Touch();
      out->push_back(std::move(*b));
    }
    return Status::Ok();
  };
  Status st = alloc(&data, k, "data piece");
  if (st.ok()) st = alloc(&parity, m, "parity piece");
  if (st.ok()) st = alloc(&rebuilt, k, "copy / rebuilt piece");
  if (!st.ok()) {
    std::fprintf(stderr, "ec_bench: %s\n", st.ToString().c_str());
    return 1;
  }
  for (uint32_t i = 0; i < k; ++i) {
    for (uint64_t j = 0; j < piece; ++j) data[i].data()[j] = static_cast<uint8_t>((j * 131 + i * 7 + 1) & 0xff);
  }
  std::vector<const uint8_t*> in;
  for (auto& b : data) in.push_back(b.data());
  std::vector<uint8_t*> out;
  for (auto& b : parity) out.push_back(b.data());
  const double bytes = static_cast<double>(k) * static_cast<double>(piece);
  std::vector<double> t_copy, r_encode, r_update, r_rebuild, t_encode, t_update, t_rebuild;
  bool ok = true;
  for (int r = 0; r < rounds; ++r) {
    const double copy = Seconds([&] {
      for (uint32_t i = 0; i < k; ++i) std::memcpy(rebuilt[i].data(), data[i].data(), piece);
    });
    const double enc = Seconds([&] { ok &= rs->Encode(in, out, piece).ok(); });
    std::vector<HostBuffer>& upd = parity;  // re-zeroed, then folded piece by piece
    for (auto& b : upd) std::memset(b.data(), 0, piece);
    const double update = Seconds([&] {
      for (uint32_t i = 0; i < k; ++i) ok &= rs->Update(i, data[i].data(), out, piece).ok();
    });
    // Lose the first min(m, k) data pieces; rebuild them from the rest and the parity.
    const uint32_t lost = std::min(m, k);
    std::vector<const uint8_t*> pieces(k + m);
    std::vector<uint8_t*> want(k + m, nullptr);
    for (uint32_t i = 0; i < k; ++i) pieces[i] = i < lost ? nullptr : data[i].data();
    for (uint32_t j = 0; j < m; ++j) pieces[k + j] = parity[j].data();
    for (uint32_t i = 0; i < lost; ++i) want[i] = rebuilt[i].data();
    const double rebuild = Seconds([&] { ok &= rs->Reconstruct(pieces, want, piece).ok(); });
    for (uint32_t i = 0; i < lost; ++i) ok &= std::memcmp(rebuilt[i].data(), data[i].data(), piece) == 0;
    t_copy.push_back(copy);
    t_encode.push_back(enc);
    t_update.push_back(update);
    t_rebuild.push_back(rebuild);
    r_encode.push_back(enc / copy);
    r_update.push_back(update / copy);
    r_rebuild.push_back(rebuild / copy);
  }
  if (!ok) {
    std::fprintf(stderr, "ec_bench: a rebuilt piece differs from the original, or a call failed\n");
    return 1;
  }
  const double gb = bytes / 1e9;
  if (json) {
    std::printf(
        "{\"k\": %u, \"m\": %u, \"piece_bytes\": %llu, \"rounds\": %d, \"memcpy_gbps\": %.3f, "
        "\"encode_gbps\": %.3f, \"update_gbps\": %.3f, \"rebuild_gbps\": %.3f, \"encode_x_memcpy\": %.3f, "
        "\"update_x_memcpy\": %.3f, \"rebuild_x_memcpy\": %.3f}\n",
        k, m, static_cast<unsigned long long>(piece), rounds, gb / Median(t_copy), gb / Median(t_encode),
        gb / Median(t_update), gb / Median(t_rebuild), Median(r_encode), Median(r_update), Median(r_rebuild));
  } else {
    std::printf("Reed-Solomon %u+%u, %u data pieces of %llu bytes, %d rounds (medians; time × the memcpy of the "
                "same round)\n",
                k, m, k, static_cast<unsigned long long>(piece), rounds);
    std::printf("  %-8s %8.2f GB/s  1.00×\n", "memcpy", gb / Median(t_copy));
    std::printf("  %-8s %8.2f GB/s  %.2f×\n", "encode", gb / Median(t_encode), Median(r_encode));
    std::printf("  %-8s %8.2f GB/s  %.2f×\n", "update", gb / Median(t_update), Median(r_update));
    std::printf("  %-8s %8.2f GB/s  %.2f×  (%u lost pieces)\n", "rebuild", gb / Median(t_rebuild),
                Median(r_rebuild), std::min(m, k));
  }
  return 0;
}

}  // namespace
}  // namespace tierckpt::bench

int main(int argc, char** argv) {
  CLI::App app{"ec_bench: Reed-Solomon encode and rebuild against memcpy (docs/benchmarks.md)"};
  uint32_t k = 4, m = 2;
  uint64_t piece_mib = 64;
  int rounds = 7;
  bool json = false;
  app.add_option("--k", k, "data pieces")->check(CLI::Range(1, 255));
  app.add_option("--m", m, "parity pieces")->check(CLI::Range(1, 255));
  app.add_option("--piece-mib", piece_mib, "MiB per piece")->check(CLI::Range(1, 1 << 20));
  app.add_option("--rounds", rounds, "interleaved rounds")->check(CLI::Range(1, 1000));
  app.add_flag("--json", json, "one JSON object");
  CLI11_PARSE(app, argc, argv);
  if (k + m > tierckpt::ec::ReedSolomon::kMaxPieces) {
    std::fprintf(stderr, "ec_bench: --k %u --m %u: at most %u pieces in all\n", k, m,
                 tierckpt::ec::ReedSolomon::kMaxPieces);
    return 2;
  }
  return tierckpt::bench::Run(k, m, piece_mib << 20, rounds, json);
}
