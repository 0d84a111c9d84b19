#include "client_workload.h"

#include <chrono>
#include <cstring>

namespace tierckpt::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string Where(const std::string& ns, uint64_t step, const std::string& phase) {
  return "namespace " + ns + " step " + std::to_string(step) + " (" + phase + " repetition)";
}

Status CheckLoaded(const Layout& layout, const HostBuffer& src, const HostBuffer& dst,
                   const std::string& where) {
  for (size_t i = 0; i < layout.count; ++i) {
    if (std::memcmp(dst.data() + layout.Offset(i), src.data() + layout.Offset(i), layout.Size(i)) !=
        0) {
      return Corruption(where + ": object " + Layout::Name(i) +
                        " loaded back differs from the bytes saved");
    }
  }
  return Status::Ok();
}

void ClobberEnds(const Layout& layout, const HostBuffer& dst) {
  for (size_t i = 0; i < layout.count; ++i) {
    dst.data()[layout.Offset(i)] = 0;
    dst.data()[layout.Offset(i) + layout.Size(i) - 1] = 0;
  }
}

}  // namespace

Result<std::vector<Repetition>> RunSaveLoad(Client& client, const Layout& layout,
                                            const HostBuffer& src, const HostBuffer& dst,
                                            const WorkloadOptions& options) {
  uint64_t first_step = 1;
  if (auto latest = client.LatestStep(options.ns); latest.ok()) {
    first_step = *latest + 1;
  } else if (latest.status().code() != Code::kNotFound) {
    return latest.status().WithContext("finding the latest step of namespace " + options.ns);
  }

  std::vector<ObjectSource> sources(layout.count);
  std::vector<ObjectDest> dests(layout.count);
  for (size_t i = 0; i < layout.count; ++i) {
    std::string name = Layout::Name(i);
    sources[i] = {name, src.data() + layout.Offset(i), layout.Size(i)};
    dests[i] = {std::move(name), dst.data() + layout.Offset(i), layout.Size(i)};
  }

  std::vector<Repetition> reps;
  const int total = 1 + options.warmup + options.reps;
  for (int r = 0; r < total; ++r) {
    Repetition rep;
    rep.phase = r == 0 ? "cold" : (r <= options.warmup ? "warmup" : "steady");
    rep.step = first_step + static_cast<uint64_t>(r);
    const std::string where = Where(options.ns, rep.step, rep.phase);

    auto t0 = Clock::now();
    TC_RETURN_IF_ERROR(client.BeginStep(options.ns, rep.step).WithContext("begin " + where));
    auto t1 = Clock::now();
    TC_RETURN_IF_ERROR(client.WriteObjects(options.ns, rep.step, sources).WithContext("write " + where));
    auto t2 = Clock::now();
    CommitOptions commit;
    commit.world_size = 1;
    auto manifest = client.Commit(options.ns, rep.step, commit);
    if (!manifest.ok()) return manifest.status().WithContext("commit " + where);
    auto t3 = Clock::now();
    rep.begin_s = std::chrono::duration<double>(t1 - t0).count();
    rep.write_seal_s = std::chrono::duration<double>(t2 - t1).count();
    rep.commit_s = std::chrono::duration<double>(t3 - t2).count();
    rep.save_s = std::chrono::duration<double>(t3 - t0).count();
    if (manifest->TotalBytes() != layout.total_bytes) {
      return Internal("commit " + where + ": manifest holds " + std::to_string(manifest->TotalBytes()) +
                      " bytes, the benchmark wrote " + std::to_string(layout.total_bytes));
    }

    const size_t modes = options.loads.size();
    rep.load_s_by_mode.assign(modes, 0.0);
    for (size_t k = 0; k < modes; ++k) {
      const size_t m = (k + static_cast<size_t>(r)) % modes;
      ClobberEnds(layout, dst);
      auto t4 = Clock::now();
      TC_RETURN_IF_ERROR(
          client.ReadObjects(options.ns, rep.step, dests, options.loads[m]).WithContext("load " + where));
      rep.load_s_by_mode[m] = SecondsSince(t4);
      TC_RETURN_IF_ERROR(CheckLoaded(layout, src, dst, "load " + where));
    }
    rep.load_s = rep.load_s_by_mode.empty() ? 0.0 : rep.load_s_by_mode[0];
    reps.push_back(rep);
  }
  return reps;
}

}  // namespace tierckpt::bench
