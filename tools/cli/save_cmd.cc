// tierckpt save NS STEP --from DIR: every regular file under DIR becomes an
// object of the step (its path relative to DIR is the object name).
#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli.h"
#include "common/names.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/parallel.h"
#include "output.h"
#include "tierckpt/manifest.h"

namespace tierckpt::cli {
namespace {

constexpr size_t kReadChunk = 8u << 20;  // progress granularity

struct SaveOptions {
  std::string ns;
  uint64_t step = 0;
  std::string from;
  bool persist = false;
  bool wait_durable = false;
  double timeout_s = 0;
  uint32_t world_size = 0;
  int threads = 2;
};

struct SourceFile {
  std::string name;  // relative to the source directory, '/'-separated
  std::string path;
  uint64_t size = 0;
};

// Collects the regular files below dir/rel; other entries go to *skipped.
Status Walk(const std::string& dir, const std::string& rel, std::vector<SourceFile>* files,
            std::vector<std::string>* skipped) {
  const std::string here = rel.empty() ? dir : JoinPath(dir, rel);
  TC_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDir(here));
  for (const std::string& n : names) {
    const std::string name = rel.empty() ? n : rel + "/" + n;
    const std::string path = JoinPath(dir, name);
    TC_ASSIGN_OR_RETURN(DirEntry e, StatNoFollow(path));  // a link is skipped, never followed
    // Listed a moment ago and gone now: the directory is changing under the save.
    if (e.type == EntryType::kMissing) return ErrnoStatus("lstat " + path, ENOENT);
    if (e.type == EntryType::kDirectory) {
      TC_RETURN_IF_ERROR(Walk(dir, name, files, skipped));
    } else if (e.type == EntryType::kRegular) {
      if (rel.empty() && n == kManifestName) continue;  // a restored step's manifest
      files->push_back({name, path, e.size});
    } else {
      skipped->push_back(path);
    }
  }
  return Status::Ok();
}

Status SaveFile(Client& client, const SaveOptions& o, const SourceFile& f, Progress& progress) {
  TC_ASSIGN_OR_RETURN(UniqueFd fd, OpenFile(f.path, O_RDONLY | O_CLOEXEC));
  TC_ASSIGN_OR_RETURN(WritableObject obj, client.CreateObject(o.ns, o.step, f.name, f.size));
  for (uint64_t off = 0; off < f.size; off += kReadChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadChunk, f.size - off));
    // Straight into the shared mapping; the agent computes the checksum.
    Status r = PreadExact(fd.get(), obj.data() + off, n, off, f.path);
    if (!r.ok()) {
      return r.code() == Code::kCorruption ? Corruption(f.path + " shrank while it was being saved")
                                           : r;
    }
    progress.Add(n);
  }
  return client.Seal(obj, "");
}

int RunSave(const GlobalOptions& g, const SaveOptions& o) {
  const std::string step_name = o.ns + "/" + std::to_string(o.step);
  Result<FileInfo> info = StatPath(o.from);
  if (!info.ok()) return Fail(info.status().WithContext("reading --from"));
  if (!info->exists || !info->is_dir) return Fail("--from " + o.from + " is not a directory");
  std::vector<SourceFile> files;
  std::vector<std::string> skipped;
  Status walked = Walk(o.from, "", &files, &skipped);
  if (!walked.ok()) return Fail(walked.WithContext("listing " + o.from));
  for (const std::string& s : skipped) std::fprintf(stderr, "tierckpt: skipping %s (not a regular file)\n", s.c_str());
  if (files.empty()) return Fail("no regular files under " + o.from + ": nothing to save");
  uint64_t total = 0;
  for (const SourceFile& f : files) {
    Status valid = ValidateObjectName(f.name);
    if (!valid.ok()) {
      return Fail("file " + f.path + " cannot be saved as an object: " + valid.message() +
                  " (or leave that file out of the directory)");
    }
    total += f.size;
  }

  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  if ((o.persist || o.wait_durable) && client->durable_base().empty()) {
    return Fail("the agent at " + client->socket_path() +
                " has no durable tier, so --persist/--wait-durable cannot work; restart it with "
                "`tierckpt agent start --durable DIR_OR_URL`");
  }
  Status begun = client->BeginStep(o.ns, o.step);
  if (!begun.ok()) return Fail(begun.WithContext("starting step " + step_name));

  Progress progress("saving", total, Progress::ShouldShow(g.progress));
  Status copied = ParallelFor(files.size(), o.threads, [&](size_t i) {
    return SaveFile(*client, o, files[i], progress).WithContext("saving file " + files[i].path);
  });
  if (!copied.ok()) {
    progress.Finish();
    client->Abort(o.ns, o.step).IgnoreError();  // best effort: the agent also drops it on disconnect
    Fail(copied);
    std::fprintf(stderr, "tierckpt: step %s was aborted; nothing was committed\n", step_name.c_str());
    return kExitFailure;
  }
  CommitOptions commit;
  commit.world_size = o.world_size;
  commit.persist = o.persist || o.wait_durable;
  Result<Manifest> m = client->Commit(o.ns, o.step, commit);
  progress.Finish();
  if (!m.ok()) {
    client->Abort(o.ns, o.step).IgnoreError();
    return Fail(m.status().WithContext("committing step " + step_name));
  }
  const double save_s = progress.Seconds();
  if (o.wait_durable) {
    auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
    Status w = client->WaitDurable(o.ns, o.step, timeout);
    if (!w.ok()) {
      return Fail(w.WithContext("step " + step_name + " is committed in memory, but waiting for the durable copy failed"));
    }
  }
  const std::string durable = o.wait_durable ? "committed" : (commit.persist ? "pending" : "");
  if (g.json) {
    PrintJson({{"namespace", o.ns},
               {"step", o.step},
               {"objects", m->objects.size()},
               {"bytes", m->TotalBytes()},
               {"seconds", save_s},
               {"memory", "committed"},
               {"durable", durable}});
    return kExitOk;
  }
  std::printf("saved %s: %zu objects, %s in %.2f s (%s)%s\n", step_name.c_str(), m->objects.size(),
              HumanSize(m->TotalBytes()).c_str(), save_s, HumanRate(m->TotalBytes(), save_s).c_str(),
              durable == "committed" ? "; durable"
              : durable == "pending" ? "; persisting in the background"
                                     : "");
  return kExitOk;
}

}  // namespace

void AddSaveCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<SaveOptions>();
  CLI::App* sub = app.add_subcommand("save", "save the files of a directory as a step in the memory tier");
  sub->add_option("namespace", o->ns, "namespace")->required();
  AddStepArgument(sub, &o->step);
  sub->add_option("--from", o->from, "directory whose regular files (recursively) become the step's objects")
      ->required();
  sub->add_flag("--persist", o->persist, "also persist the step to the durable tier (in the background)");
  auto* wait = sub->add_flag("--wait-durable", o->wait_durable, "persist and wait until the durable copy is committed");
  sub->add_option("--timeout", o->timeout_s, "with --wait-durable: give up waiting after this many seconds (0 = never)")
      ->needs(wait)
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--world-size", o->world_size, "number of ranks that wrote this step, recorded in the manifest")
      ->transform(DecimalOnly());
  sub->add_option("--threads", o->threads, "files copied in parallel")
      ->transform(DecimalOnly())->check(CLI::Range(1, 64));
  sub->callback([&cli, o] { cli.exit_code = RunSave(cli.global, *o); });
}

}  // namespace tierckpt::cli
