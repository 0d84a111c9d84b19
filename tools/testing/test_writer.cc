// tc_test_writer — writes a generated multi-object checkpoint step through the
// client library. Used by the integration tests and the demo; not installed.
//
//   tc_test_writer --ns NS --step N [--objects K] [--size BYTES] [--seed S]
//                  [--ref-dir DIR] [--persist] [--wait-durable]
//                  [--hang-in-object I] [--no-commit] [--direct] [--socket PATH]
//
// Object i is named "obj_<i>.bin" and holds a splitmix64 stream seeded by
// (seed, step, i), so two runs with the same arguments write the same bytes.
// --ref-dir also writes each object as a plain file there, for comparison.
// By default each object is generated in a private buffer and saved with
// Client::WriteObject (copy + client checksum, verified by the agent).
// --direct generates straight into the shared memory of a CreateObject and
// seals without a checksum (the agent computes it), allocating nothing.
// --hang-in-object I creates object I, fills half of it, prints
// "HANG <name>" on stdout and sleeps forever: the test then SIGKILLs it.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "os/files.h"
#include "tierckpt/client.h"

namespace {

void Fill(uint8_t* dst, size_t n, uint64_t seed) {
  uint64_t x = seed;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    std::memcpy(dst + i, &z, 8);
  }
  for (; i < n; ++i) dst[i] = static_cast<uint8_t>(seed + i);
}

int Fail(const tierckpt::Status& s) {
  std::fprintf(stderr, "tc_test_writer: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"write a generated checkpoint step (tests and demo)"};
  std::string socket, ns, ref_dir;
  uint64_t step = 0, size = 1 << 20, seed = 1;
  int objects = 4, hang_in = -1;
  bool persist = false, wait_durable = false, no_commit = false, direct = false, hold = false;
  std::string prefix = "obj_";
  std::vector<std::string> members;
  app.add_option("--socket", socket, "agent socket (default: TIERCKPT_SOCKET or the default path)");
  app.add_option("--ns", ns, "namespace")->required();
  app.add_option("--step", step, "step")->required();
  app.add_option("--objects", objects, "number of objects")->check(CLI::Range(1, 100000));
  app.add_option("--size", size, "bytes per object");
  app.add_option("--seed", seed, "content seed");
  app.add_option("--ref-dir", ref_dir, "also write the objects here as plain files");
  app.add_flag("--persist", persist, "persist the step to the durable tier");
  app.add_flag("--wait-durable", wait_durable, "wait until the step is durable");
  app.add_option("--hang-in-object", hang_in, "stop forever halfway through object I");
  app.add_flag("--no-commit", no_commit, "write and seal, but do not commit");
  app.add_flag("--direct", direct, "generate into shared memory; the agent computes checksums");
  app.add_option("--prefix", prefix, "object names: PREFIX<i>.bin (default obj_)");
  app.add_option("--members", members, "commit a step spanning these nodes' agents (their parts written, "
                 "sealed and held by --no-commit --hold writers)")->delimiter(',');
  app.add_flag("--hold", hold, "with --no-commit: stay connected (the step stays written) until standard "
               "input closes");
  CLI11_PARSE(app, argc, argv);

  tierckpt::ClientOptions opts;
  opts.socket_path = socket;
  opts.client_name = "tc_test_writer";
  opts.writer_id = tierckpt::ClientOptions::RandomWriterId();
  auto client = tierckpt::Client::Connect(opts);
  if (!client.ok()) return Fail(client.status());
  auto& c = **client;
  if (auto s = c.BeginStep(ns, step); !s.ok()) return Fail(s);
  if (!ref_dir.empty()) {
    if (auto s = tierckpt::MakeDirs(ref_dir); !s.ok()) return Fail(s);
  }
  std::vector<uint8_t> buf;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> refs;  // name, bytes: for --ref-dir
  for (int i = 0; i < objects; ++i) {
    std::string name = prefix + std::to_string(i) + ".bin";
    uint64_t object_seed = seed * 1000003ULL + step * 7919ULL + static_cast<uint64_t>(i);
    if (direct || i == hang_in) {
      auto obj = c.CreateObject(ns, step, name, size);
      if (!obj.ok()) return Fail(obj.status());
      if (i == hang_in) {
        Fill(obj->data(), size / 2, object_seed);
        std::printf("HANG %s\n", name.c_str());
        std::fflush(stdout);
        while (true) std::this_thread::sleep_for(std::chrono::hours(1));
      }
      Fill(obj->data(), size, object_seed);
      if (!ref_dir.empty()) refs.emplace_back(name, std::vector<uint8_t>(obj->data(), obj->data() + size));
      if (auto s = c.Seal(*obj); !s.ok()) return Fail(s);
    } else {
      buf.resize(size);
      Fill(buf.data(), buf.size(), object_seed);
      if (auto s = c.WriteObject(ns, step, name, buf.data(), buf.size()); !s.ok()) return Fail(s);
      if (!ref_dir.empty()) refs.emplace_back(name, std::move(buf));
      buf = {};
    }
  }
  // The reference copies are written after the commit, so that nothing stands between the last
  // seal and the commit (tests kill the agent right after it: test_crash.py), and after a commit
  // that failed too: an agent killed once the step's record is written but before it answered
  // leaves the step committed while this writer got no answer, and the test then compares the
  // restored step with these copies.
  auto write_refs = [&]() -> tierckpt::Status {
    for (const auto& [name, bytes] : refs) {
      TC_RETURN_IF_ERROR(tierckpt::WriteFileAtomic(
          tierckpt::JoinPath(ref_dir, name),
          std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), /*durable=*/false));
    }
    return tierckpt::Status::Ok();
  };
  if (no_commit) {
    if (auto s = write_refs(); !s.ok()) return Fail(s);
    std::printf("SEALED %d\n", objects);
    std::fflush(stdout);
    if (hold) {  // a disconnected writer's uncommitted step is dropped: hold it for a spanning commit
      char line[256];
      while (std::fgets(line, sizeof line, stdin) != nullptr) {
      }
    }
    return 0;
  }
  tierckpt::CommitOptions co;
  co.persist = persist;
  co.world_size = members.empty() ? 1 : static_cast<uint32_t>(members.size());
  co.members = members;
  auto m = c.Commit(ns, step, co);
  const tierckpt::Status refs_written = write_refs();
  if (!m.ok()) {
    if (!refs_written.ok()) Fail(refs_written);  // said too, but the commit's failure is the exit's cause
    return Fail(m.status());
  }
  if (!refs_written.ok()) return Fail(refs_written);
  if (wait_durable) {
    if (auto s = c.WaitDurable(ns, step, std::chrono::minutes(5)); !s.ok()) return Fail(s);
  }
  std::printf("COMMITTED %s %llu %llu\n", ns.c_str(), static_cast<unsigned long long>(step),
              static_cast<unsigned long long>(m->TotalBytes()));
  return 0;
}
