// tc_s3_bench — tierckpt's S3 durable tier measured on its own: one step of
// --objects objects of --object-size bytes goes through the ObjectStore of an
// s3:// URL and back, and ONE JSON object is printed on stdout (errors go to
// stderr, exit 1). Driven by bench/s3_bench.py, which starts the S3 server
// (moto) and measures boto3 and s3torchconnector on the same bytes in the
// same run; see docs/benchmarks.md.
//
//   tc_s3_bench --url 's3://bucket/prefix?endpoint=http://127.0.0.1:PORT'
//               [--objects 8] [--object-size 268435456] [--threads 1] [--reps 1]
//               [--ns s3bench] [--seed 42] [--scratch /dev/shm]
//
// Per repetition r (step r):
//   upload    PutObjects of the whole step, then CommitStep: what the agent's
//             persister does (S3: every object's requests through one pool of
//             `concurrency` connections, s3/upload_plan.h). Until the sixth
//             session: PutObject of one object after the other.
//   download  ReadObjectToFile of every object, --threads objects at a time,
//             into its own fresh tmpfs file
//             under --scratch (what the agent's restore does: the ranges are
//             pwritten into the file as they arrive), creating the files
//             included in the time. The earlier way, ReadObject into a
//             MAP_POPULATE mapping, cost about twice the kernel time here
//             (every page zeroed before it is filled; docs/benchmarks.md).
// The bytes read back are compared with the source (outside the timing; a
// mismatch fails the run) and the step is deleted. The manifest's checksums
// are computed once, before any timing. Each phase reports wall seconds
// (steady clock), GB/s (1e9 bytes/s), this process's CPU seconds (getrusage
// RUSAGE_SELF: user + system, every thread, so libcurl's work counts) and its
// start and end on CLOCK_MONOTONIC, so the driver can tell the server's CPU
// use during the phase.
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "common/checksum.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/mapping.h"
#include "store/object_store.h"
#include "tierckpt/manifest.h"

namespace {

using nlohmann::ordered_json;
using tierckpt::Result;
using tierckpt::Status;
using tierckpt::bench::Gbps;
using tierckpt::bench::HostBuffer;
using tierckpt::bench::Layout;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Flags {
  std::string url;
  std::string ns = "s3bench";
  std::string scratch = "/dev/shm";
  uint64_t objects = 8;
  uint64_t object_size = 256ull << 20;
  int threads = 1;
  int reps = 1;
  uint64_t seed = 42;
};

// CPU seconds of this process (all threads) and the monotonic clock, at one instant.
struct Sample {
  double user_s = 0;
  double sys_s = 0;
  double mono_s = 0;
  std::chrono::steady_clock::time_point wall;

  static Sample Now() {
    Sample s;
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    s.user_s = static_cast<double>(ru.ru_utime.tv_sec) + static_cast<double>(ru.ru_utime.tv_usec) / 1e6;
    s.sys_s = static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) / 1e6;
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s.mono_s = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
    s.wall = std::chrono::steady_clock::now();
    return s;
  }
};

ordered_json Phase(const Sample& a, const Sample& b, uint64_t bytes) {
  const double seconds = std::chrono::duration<double>(b.wall - a.wall).count();
  const double cpu = (b.user_s - a.user_s) + (b.sys_s - a.sys_s);
  ordered_json j;
  j["seconds"] = seconds;
  j["gbps"] = Gbps(bytes, seconds);
  j["cpu_s"] = cpu;
  j["user_s"] = b.user_s - a.user_s;
  j["sys_s"] = b.sys_s - a.sys_s;
  j["cpu_s_per_gib"] = cpu / (static_cast<double>(bytes) / kGiB);
  j["start_monotonic_s"] = a.mono_s;
  j["end_monotonic_s"] = b.mono_s;
  return j;
}

// Runs fn(i) for every object on `threads` threads; the first error wins.
Status ForEachObject(const Layout& layout, int threads, const std::function<Status(size_t)>& fn) {
  std::mutex mu;
  Status first = Status::Ok();
  tierckpt::bench::ParallelOver(layout.count, threads, [&](size_t i) {
    Status s = fn(i);
    if (!s.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first.ok()) first = s;
    }
  });
  return first;
}

tierckpt::Manifest MakeManifest(const Flags& f, const Layout& layout, const uint8_t* src) {
  tierckpt::Manifest m;
  m.ns = f.ns;
  m.world_size = 1;
  m.node = "tc_s3_bench";
  for (size_t i = 0; i < layout.count; ++i) {  // Layout::Name sorts numerically
    const uint8_t* p = src + layout.Offset(i);
    m.objects.push_back({Layout::Name(i), layout.Size(i),
                         tierckpt::ComputeChecksum(p, layout.Size(i)).ToString(), m.node});
  }
  return m;
}

// A fresh tmpfs file of `size` bytes, unlinked at once: the download
// destination, as the agent's memory tier creates one for a restore.
Result<tierckpt::UniqueFd> ScratchFile(const std::string& dir, uint64_t size, int rep) {
  const std::string path =
      tierckpt::JoinPath(dir, "tc_s3_bench-" + std::to_string(::getpid()) + "-" + std::to_string(rep));
  TC_ASSIGN_OR_RETURN(tierckpt::UniqueFd fd, tierckpt::OpenFile(path, O_RDWR | O_CREAT | O_EXCL, 0600));
  // Unlinked while open, so it is gone when the fd closes; a failure only leaves it behind.
  tierckpt::RemoveFile(path, tierckpt::IfMissing::kOk).IgnoreError();
  TC_RETURN_IF_ERROR(tierckpt::TruncateFd(
      fd.get(), size, "sizing the download file " + path + " (free space in --scratch?)"));
  return fd;
}

Result<ordered_json> RunRepetition(const Flags& f, tierckpt::ObjectStore& store, const Layout& layout,
                                   const uint8_t* src, tierckpt::Manifest manifest, int rep) {
  const uint64_t step = static_cast<uint64_t>(rep);
  manifest.step = step;
  manifest.created_unix_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count());
  TC_RETURN_IF_ERROR(store.DeleteStep(f.ns, step));  // a leftover of an interrupted run

  const Sample up0 = Sample::Now();
  std::vector<tierckpt::ObjectBytes> objects;
  for (size_t i = 0; i < layout.count; ++i) {
    objects.push_back(tierckpt::ObjectBytes{Layout::Name(i), src + layout.Offset(i), layout.Size(i)});
  }
  TC_RETURN_IF_ERROR(store.PutObjects(f.ns, step, objects, nullptr));
  TC_RETURN_IF_ERROR(store.CommitStep(manifest));
  const Sample up1 = Sample::Now();

  // One file per object, as the agent restores (ObjectStore::ReadObjectToFile).
  const Sample down0 = Sample::Now();
  std::vector<tierckpt::UniqueFd> files(layout.count);
  TC_RETURN_IF_ERROR(ForEachObject(layout, f.threads, [&](size_t i) -> Status {
    TC_ASSIGN_OR_RETURN(files[i], ScratchFile(f.scratch, layout.Size(i), rep * 100000 + static_cast<int>(i)));
    return store.ReadObjectToFile(f.ns, step, Layout::Name(i), files[i].get(), layout.Size(i));
  }));
  const Sample down1 = Sample::Now();

  for (size_t i = 0; i < layout.count; ++i) {
    TC_ASSIGN_OR_RETURN(tierckpt::Mapping got, tierckpt::Mapping::Map(files[i].get(), layout.Size(i),
                                                                      tierckpt::Mapping::Access::kReadOnly,
                                                                      /*populate=*/true, "download " + Layout::Name(i)));
    if (std::memcmp(got.data(), src + layout.Offset(i), layout.Size(i)) != 0) {
      return tierckpt::Corruption("object " + Layout::Name(i) + " of step " + std::to_string(step) +
                                  " read back from " + store.Describe() + " differs from what was put");
    }
  }

  TC_RETURN_IF_ERROR(store.DeleteStep(f.ns, step));
  ordered_json j;
  j["step"] = step;
  j["upload"] = Phase(up0, up1, layout.total_bytes);
  j["download"] = Phase(down0, down1, layout.total_bytes);
  return j;
}

int Fail(const Status& s) {
  std::fprintf(stderr, "tc_s3_bench: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"tierckpt's S3 durable tier: upload and download one step (bench/s3_bench.py drives it)"};
  app.add_option("--url", f.url, "s3://bucket/prefix?endpoint=...")->required();
  app.add_option("--objects", f.objects, "objects per step (default 8)")->check(CLI::Range(1, 100000));
  app.add_option("--object-size", f.object_size, "bytes per object (default 268435456)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--threads", f.threads, "objects downloaded at once (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--reps", f.reps, "repetitions, each its own step (default 1)")->check(CLI::Range(1, 1000));
  app.add_option("--ns", f.ns, "namespace of the steps (default s3bench)");
  app.add_option("--seed", f.seed, "content seed (default 42)");
  app.add_option("--scratch", f.scratch, "tmpfs directory for the download files (default /dev/shm)");
  CLI11_PARSE(app, argc, argv);

  auto layout = Layout::Make(f.objects * f.object_size, f.object_size);
  if (!layout.ok()) return Fail(layout.status());
  auto store = tierckpt::OpenObjectStore(f.url);
  if (!store.ok()) return Fail(store.status());
  auto src = HostBuffer::Allocate(layout->total_bytes, "source");
  if (!src.ok()) return Fail(src.status());
  tierckpt::bench::FillNonZero(src->data(), src->size(), f.seed);
  const tierckpt::Manifest manifest = MakeManifest(f, *layout, src->data());

  ordered_json reps = ordered_json::array();
  for (int rep = 1; rep <= f.reps; ++rep) {
    auto r = RunRepetition(f, **store, *layout, src->data(), manifest, rep);
    if (!r.ok()) return Fail(r.status().WithContext("repetition " + std::to_string(rep)));
    reps.push_back(std::move(r).value());
  }
  ordered_json out;
  out["store"] = (*store)->Describe();
  out["config"] = {{"objects", layout->count},     {"object_size", f.object_size},
                   {"total_bytes", layout->total_bytes}, {"threads", f.threads},
                   {"reps", f.reps},               {"ns", f.ns}};
  out["repetitions"] = reps;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
