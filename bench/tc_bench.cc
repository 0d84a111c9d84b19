// tc_bench — the memory-tier benchmark: saves and loads a step through the
// client library against a running agent and prints ONE JSON object on
// stdout (errors go to stderr, exit 1). Usually driven by bench/run.py, which
// starts its own agent; see docs/benchmarks.md.
//
//   tc_bench mem_large [--socket PATH] [--total 1GiB] [--object-size 64MiB]
//   tc_bench mem_small [--socket PATH] [--objects 10000] [--object-size 4KiB]
//            [--threads 2] [--reps 5] [--warmup 3] [--ns NS] [--seed S]
//            [--agent-checksum] [--no-baselines]
//            [--verify-reads always|attested|never[,...]] [--attest-max-age SECONDS]
//
// --verify-reads with several modes loads each step once per mode, the order
// rotated per repetition; "load" is the first mode's, "load_modes" has each.
//
// Every client number is reported next to baselines measured in the same run
// over the same bytes and object layout (bench/baselines.h), and as a ratio to
// memcpy_warm: the fastest plain memcpy into resident memory (one call per
// object or 256 KiB calls; the client's thread count or one thread). Save and
// load are reported for the first (cold) repetition and as the median of the
// steady repetitions, never mixed.
// Sizes are bytes, times seconds, throughputs GB/s (1e9 bytes per second).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "baselines.h"
#include "bench_util.h"
#include "client_workload.h"
#include "tierckpt/client.h"

namespace {

using nlohmann::ordered_json;
using tierckpt::bench::Gbps;
using tierckpt::bench::Layout;
using tierckpt::bench::Measurement;
using tierckpt::bench::Median;
using tierckpt::bench::Repetition;

// Targets of issue 2 for large objects, as ratios to memcpy_warm.
constexpr double kSaveTarget = 0.7;
constexpr double kLoadTarget = 0.8;

struct Flags {
  std::string workload;
  std::string socket;
  std::string ns;
  uint64_t total = 0;        // 0: the workload's default
  uint64_t object_size = 0;  // 0: the workload's default
  uint64_t objects = 0;      // alternative to total: objects * object_size
  int threads = 2;
  int reps = 5;
  int warmup = 3;
  uint64_t seed = 42;
  bool baselines = true;         // false: client numbers only (for profiling)
  bool client_checksum = tierckpt::ClientOptions{}.client_checksum;
  std::string verify_reads = "always";  // comma-separated ReadVerify modes
  double attest_max_age_s = 900;
};

int Fail(const tierckpt::Status& s) {
  std::fprintf(stderr, "tc_bench: %s\n", s.ToString().c_str());
  return 1;
}

ordered_json Throughput(uint64_t bytes, size_t objects, double seconds) {
  ordered_json j;
  j["seconds"] = seconds;
  j["gbps"] = Gbps(bytes, seconds);
  j["objects_per_s"] = seconds > 0 ? static_cast<double>(objects) / seconds : 0.0;
  return j;
}

double Ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// "cold" (repetition 0) and "steady" (medians over the steady repetitions).
ordered_json SaveSummary(const Layout& layout, const std::vector<Repetition>& reps) {
  const Repetition& c = reps.front();
  ordered_json cold = Throughput(layout.total_bytes, layout.count, c.save_s);
  cold["step"] = c.step;
  cold["begin_s"] = c.begin_s;
  cold["write_seal_s"] = c.write_seal_s;
  cold["commit_s"] = c.commit_s;
  std::vector<double> save, begin, write, commit;
  for (const auto& r : reps) {
    if (r.phase != "steady") continue;
    save.push_back(r.save_s);
    begin.push_back(r.begin_s);
    write.push_back(r.write_seal_s);
    commit.push_back(r.commit_s);
  }
  ordered_json steady = Throughput(layout.total_bytes, layout.count, Median(save));
  steady["repetitions"] = save.size();
  steady["begin_s"] = Median(begin);
  steady["write_seal_s"] = Median(write);
  steady["commit_s"] = Median(commit);
  steady["min_seconds"] = *std::min_element(save.begin(), save.end());
  steady["max_seconds"] = *std::max_element(save.begin(), save.end());
  return {{"cold", cold}, {"steady", steady}};
}

// The loads of mode index `mode` (WorkloadOptions::loads).
ordered_json LoadSummary(const Layout& layout, const std::vector<Repetition>& reps, size_t mode = 0) {
  ordered_json cold = Throughput(layout.total_bytes, layout.count, reps.front().load_s_by_mode[mode]);
  cold["step"] = reps.front().step;
  std::vector<double> load;
  for (const auto& r : reps) {
    if (r.phase == "steady") load.push_back(r.load_s_by_mode[mode]);
  }
  ordered_json steady = Throughput(layout.total_bytes, layout.count, Median(load));
  steady["repetitions"] = load.size();
  steady["min_seconds"] = *std::min_element(load.begin(), load.end());
  steady["max_seconds"] = *std::max_element(load.begin(), load.end());
  return {{"cold", cold}, {"steady", steady}};
}

// Ratios to memcpy_warm (and to copy_checksum_warm), and for mem_large the
// issue's targets, quoted on the steady state.
void AddRatios(const Flags& f, const Layout& layout, const std::vector<Measurement>& baselines,
               const ordered_json& save, const ordered_json& load, ordered_json* out) {
  auto baseline_gbps = [&](const char* name) {
    return Gbps(layout.total_bytes, tierckpt::bench::Find(baselines, name)->seconds);
  };
  const double memcpy_gbps = baseline_gbps("memcpy_warm");
  auto gbps = [](const ordered_json& j) { return j["gbps"].get<double>(); };
  ordered_json ratios;
  ratios["baseline"] = "memcpy_warm: " + tierckpt::bench::Find(baselines, "memcpy_warm")->detail +
                       " (resident destination)";
  ratios["save_steady_vs_memcpy"] = Ratio(gbps(save["steady"]), memcpy_gbps);
  ratios["save_cold_vs_memcpy"] = Ratio(gbps(save["cold"]), memcpy_gbps);
  ratios["load_steady_vs_memcpy"] = Ratio(gbps(load["steady"]), memcpy_gbps);
  ratios["load_cold_vs_memcpy"] = Ratio(gbps(load["cold"]), memcpy_gbps);
  const double cc_gbps = baseline_gbps("copy_checksum_warm");
  ratios["save_steady_vs_copy_checksum"] = Ratio(gbps(save["steady"]), cc_gbps);
  ratios["load_steady_vs_copy_checksum"] = Ratio(gbps(load["steady"]), cc_gbps);
  (*out)["ratios"] = ratios;
  if (f.workload == "mem_large") {
    const double s = ratios["save_steady_vs_memcpy"].get<double>();
    const double l = ratios["load_steady_vs_memcpy"].get<double>();
    (*out)["targets"] = {
        {"quoted", "steady state, ratio to memcpy_warm"},
        {"save", {{"target", kSaveTarget}, {"measured", s}, {"met", s >= kSaveTarget}}},
        {"load", {{"target", kLoadTarget}, {"measured", l}, {"met", l >= kLoadTarget}}}};
  }
}

ordered_json PerRepetition(const Layout& layout, const std::vector<Repetition>& reps) {
  ordered_json per_rep = ordered_json::array();
  for (const Repetition& r : reps) {
    per_rep.push_back({{"phase", r.phase},
                       {"step", r.step},
                       {"begin_s", r.begin_s},
                       {"write_seal_s", r.write_seal_s},
                       {"commit_s", r.commit_s},
                       {"save_s", r.save_s},
                       {"save_gbps", Gbps(layout.total_bytes, r.save_s)},
                       {"load_s", r.load_s},
                       {"load_gbps", Gbps(layout.total_bytes, r.load_s)}});
  }
  return per_rep;
}

// The agent's stats at the end (pool segments, bytes used), as JSON.
void AddAgentStats(tierckpt::Client& client, ordered_json* out) {
  if (auto stats = client.Stats(); stats.ok()) {
    ordered_json j = ordered_json::parse(*stats, nullptr, /*allow_exceptions=*/false);
    (*out)["agent_stats"] = j.is_discarded() ? ordered_json(*stats) : j;
  } else {
    (*out)["agent_stats"] = {{"error", stats.status().ToString()}};
  }
}

int Run(const Flags& f) {
  const bool large = f.workload == "mem_large";
  const uint64_t object_size = f.object_size != 0 ? f.object_size : (large ? 64ull << 20 : 4096);
  uint64_t total = f.total;
  if (f.objects != 0) total = f.objects * object_size;
  if (total == 0) total = large ? 1ull << 30 : 10000 * object_size;
  auto layout = Layout::Make(total, object_size);
  if (!layout.ok()) return Fail(layout.status());
  const std::string ns = f.ns.empty() ? "bench_" + f.workload : f.ns;

  auto src = tierckpt::bench::HostBuffer::Allocate(total, "source");
  if (!src.ok()) return Fail(src.status());
  auto dst = tierckpt::bench::HostBuffer::Allocate(total, "destination");
  if (!dst.ok()) return Fail(dst.status());
  tierckpt::bench::FillNonZero(src->data(), src->size(), f.seed);
  dst->Touch();

  tierckpt::ClientOptions copts;
  copts.socket_path = f.socket;
  copts.client_name = "tc_bench";
  copts.copy_threads = f.threads;
  copts.client_checksum = f.client_checksum;
  auto client = tierckpt::Client::Connect(copts);
  if (!client.ok()) return Fail(client.status());

  tierckpt::Result<std::vector<Measurement>> baselines = std::vector<Measurement>{};
  if (f.baselines) baselines = tierckpt::bench::RunBaselines(*layout, *src, *dst, f.threads);
  if (!baselines.ok()) return Fail(baselines.status());

  tierckpt::bench::WorkloadOptions wopts{ns, f.warmup, f.reps, {}};
  std::vector<std::string> mode_names;
  for (size_t pos = 0; pos <= f.verify_reads.size();) {
    size_t comma = f.verify_reads.find(',', pos);
    if (comma == std::string::npos) comma = f.verify_reads.size();
    const std::string name = f.verify_reads.substr(pos, comma - pos);
    auto mode = tierckpt::ParseReadVerifyMode(name);
    if (!mode.ok()) return Fail(mode.status().WithContext("--verify-reads"));
    tierckpt::ReadVerify v;
    v.mode = *mode;
    v.max_age = std::chrono::milliseconds(static_cast<int64_t>(f.attest_max_age_s * 1000));
    wopts.loads.push_back(v);
    mode_names.push_back(name);
    pos = comma + 1;
  }
  auto reps = tierckpt::bench::RunSaveLoad(**client, *layout, *src, *dst, wopts);
  if (!reps.ok()) return Fail(reps.status());

  ordered_json out;
  out["workload"] = f.workload;
  out["units"] = {{"sizes", "bytes"}, {"times", "seconds"}, {"throughput", "GB/s = 1e9 bytes/s"}};
  out["config"] = {{"socket", (*client)->socket_path()},
                   {"namespace", ns},
                   {"total_bytes", layout->total_bytes},
                   {"object_size", layout->object_size},
                   {"objects", layout->count},
                   {"copy_threads", f.threads},
                   {"client_checksum", f.client_checksum},
                   {"verify_reads", mode_names},
                   {"attest_max_age_s", f.attest_max_age_s},
                   {"warmup_repetitions", f.warmup},
                   {"steady_repetitions", f.reps},
                   {"seed", f.seed}};

  ordered_json base;
  for (const Measurement& m : *baselines) {
    ordered_json j = Throughput(layout->total_bytes, layout->count, m.seconds);
    j["threads"] = m.threads;
    j["runs"] = m.runs;
    j["reported"] = m.runs > 1 ? "best" : "single";
    if (!m.detail.empty()) j["detail"] = m.detail;
    base[m.name] = j;
  }
  out["baselines"] = base;
  ordered_json save = SaveSummary(*layout, *reps);
  ordered_json load = LoadSummary(*layout, *reps);
  out["save"] = save;
  out["load"] = load;
  if (f.baselines) AddRatios(f, *layout, *baselines, save, load, &out);
  ordered_json modes;
  for (size_t m = 0; m < mode_names.size(); ++m) {
    ordered_json one = LoadSummary(*layout, *reps, m);
    if (f.baselines) {
      const double memcpy_gbps =
          Gbps(layout->total_bytes, tierckpt::bench::Find(*baselines, "memcpy_warm")->seconds);
      one["steady_vs_memcpy"] = Ratio(one["steady"]["gbps"].get<double>(), memcpy_gbps);
      one["cold_vs_memcpy"] = Ratio(one["cold"]["gbps"].get<double>(), memcpy_gbps);
    }
    modes[mode_names[m]] = one;
  }
  out["load_modes"] = modes;
  const tierckpt::ReadCounters rc = (*client)->read_counters();
  out["read_counters"] = {{"hashed", rc.hashed}, {"attested", rc.attested}, {"unverified", rc.unverified}};
  out["repetitions"] = PerRepetition(*layout, *reps);
  AddAgentStats(**client, &out);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tierckpt memory-tier benchmark: one workload, one JSON object on stdout"};
  Flags f;
  app.add_option("workload", f.workload, "mem_large (1 GiB in 64 MiB objects) or mem_small (10,000 x 4 KiB)")
      ->required()
      ->check(CLI::IsMember({"mem_large", "mem_small"}));
  app.add_option("--socket", f.socket, "agent socket (default: TIERCKPT_SOCKET or the default path)");
  app.add_option("--ns", f.ns, "namespace to write (default: bench_<workload>)");
  app.add_option("--total", f.total, "bytes per step (default 1GiB for mem_large)")
      ->transform(CLI::AsSizeValue(true));
  app.add_option("--object-size", f.object_size, "bytes per object (default 64MiB / 4KiB)")
      ->transform(CLI::AsSizeValue(true));
  app.add_option("--objects", f.objects,
                 "objects per step; sets total = objects * object size (mem_small default 10000)");
  app.add_option("--threads", f.threads, "client copy_threads, and the baselines' thread count")
      ->check(CLI::Range(1, 64));
  app.add_option("--reps", f.reps, "steady-state repetitions (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", f.warmup, "repetitions after the cold one that are not reported as steady; "
                                       "at least the agent's keep-last K")
      ->check(CLI::Range(0, 1000));
  app.add_option("--seed", f.seed, "seed of the source bytes");
  app.add_flag("!--no-baselines", f.baselines, "skip the memcpy baselines and ratios (profiling)");
  app.add_flag("--client-checksum,!--agent-checksum", f.client_checksum,
               "who hashes on save (ClientOptions::client_checksum): the client in its copy pass (default) "
               "or the agent at rest (--agent-checksum)");
  app.add_option(
      "--verify-reads", f.verify_reads,
      "read check of the loads (Client::ReadVerify): always (default), attested, never, or several "
      "comma-separated (each step loaded once per mode, interleaved)");
  app.add_option("--attest-max-age", f.attest_max_age_s,
                 "seconds an agent verification is trusted (attested)")
      ->check(CLI::Range(0.0, 1e9));
  CLI11_PARSE(app, argc, argv);
  if (f.total != 0 && f.objects != 0) {
    std::fprintf(stderr, "tc_bench: give --total or --objects, not both\n");
    return 2;
  }
  return Run(f);
}
