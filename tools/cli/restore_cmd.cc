// tierckpt restore NS STEP --to DIR: the step's objects as plain files, each
// verified against its checksum while it is written, the manifest last.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>

#include "cli.h"
#include "common/checksum.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/parallel.h"
#include "output.h"
#include "tierckpt/manifest.h"

namespace tierckpt::cli {
namespace {

// Hash and write in chunks that stay in cache between the two passes.
constexpr size_t kChunk = 256u << 10;

struct RestoreOptions {
  std::string ns;
  uint64_t step = 0;
  std::string to;
  bool force = false;
  int threads = 2;
};

// Writes the view to dest via a temporary file and a rename; the bytes
// written are the bytes hashed, so a mismatch leaves nothing at dest.
Status WriteVerified(const std::string& ns, uint64_t step, const std::string& object_path, const ObjectView& view, const std::string& dest,
                     Progress& progress) {
  TC_ASSIGN_OR_RETURN(Checksum expected, Checksum::Parse(view.checksum()));
  TC_RETURN_IF_ERROR(MakeDirs(DirName(dest), 0755));
  const std::string tmp = dest + ".tierckpt-tmp." + std::to_string(::getpid());
  return WriteFileVia(tmp, dest, 0644, /*sync_data=*/false, [&](int fd) -> Status {
    Hasher hasher;
    for (size_t off = 0; off < view.size(); off += kChunk) {
      const size_t n = std::min(kChunk, view.size() - off);
      hasher.Update(view.data() + off, n);
      Status s = PwriteAll(fd, view.data() + off, n, off, tmp);
      progress.Add(n);
      TC_RETURN_IF_ERROR(s);
    }
    Checksum got = hasher.Finish();
    if (!(got == expected)) {
      return Corruption("object " + object_path + " in the memory tier is corrupt: expected " +
                        expected.ToString() + ", got " + got.ToString() + "; nothing was written to " + dest +
                        ". Drop the memory copy with `tierckpt rm " + ns + " " + std::to_string(step) +
                        "` and restore again from the durable tier");
    }
    return Status::Ok();
  });
}

// Like the objects: 0644 (before umask), via a temporary file and a rename.
Status WriteManifest(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tierckpt-tmp." + std::to_string(::getpid());
  return WriteFileVia(tmp, path, 0644, /*sync_data=*/false,
                      [&](int fd) { return PwriteAll(fd, text.data(), text.size(), 0, tmp); });
}

int RunRestore(const GlobalOptions& g, const RestoreOptions& o) {
  const std::string step_name = o.ns + "/" + std::to_string(o.step);
  Result<FileInfo> info = StatPath(o.to);
  if (!info.ok()) return Fail(info.status().WithContext("checking --to"));
  if (info->exists && !info->is_dir) return Fail("--to " + o.to + " exists and is not a directory");
  if (info->exists && !o.force) {
    Result<std::vector<std::string>> entries = ListDir(o.to);
    if (!entries.ok()) return Fail(entries.status().WithContext("checking --to"));
    if (!entries->empty()) {
      return Fail(o.to + " is not empty; restore into an empty or new directory, or pass --force to overwrite "
                         "the step's files in it");
    }
  }

  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<Manifest> m = client->Show(o.ns, o.step);
  if (!m.ok()) return Fail(m.status().WithContext("restoring " + step_name));
  Status made = MakeDirs(o.to, 0755);
  if (!made.ok()) return Fail(made.WithContext("creating --to"));
  // An older manifest would claim the directory is complete while it is not.
  const std::string manifest_path = JoinPath(o.to, kManifestName);
  // None there (a fresh --to) is what we want.
  Status removed = RemoveFile(manifest_path, IfMissing::kOk, "removing the old");
  if (!removed.ok()) return Fail(removed);

  Progress progress("restoring", m->TotalBytes(), Progress::ShouldShow(g.progress));
  Status copied = ParallelFor(m->objects.size(), o.threads, [&](size_t i) -> Status {
    const ObjectEntry& e = m->objects[i];
    const std::string object_path = step_name + "/" + e.name;
    Result<ObjectView> view = client->Open(o.ns, o.step, e.name);
    Status wrote = view.ok() ? Status::Ok() : view.status();
    if (view.ok()) {
      if (view->size() != e.size || view->checksum() != e.checksum) {
        return Corruption("object " + object_path + " has size " + std::to_string(view->size()) + " and checksum " +
                          view->checksum() + " in the memory tier but " + std::to_string(e.size) + " and " +
                          e.checksum + " in the manifest");
      }
      wrote = WriteVerified(o.ns, o.step, object_path, *view, JoinPath(o.to, e.name), progress);
      // A repair of another object drops and restores the whole step: a file
      // recycled under this copy is read again.
      if (wrote.ok()) wrote = view->Unchanged();
    }
    if (wrote.code() != Code::kCorruption) return wrote.WithContext("restoring object " + object_path);
    // The memory copy is damaged: the agent re-hashes it and restores the step
    // from a replica holder or the durable tier (Client::OpenVerified).
    if (view.ok()) *view = ObjectView();  // unmaps the bad copy before the agent replaces it
    Result<ObjectView> fresh = client->OpenVerified(o.ns, o.step, e.name);
    if (!fresh.ok()) {
      return fresh.status().WithContext("restoring object " + object_path + " after its memory copy failed (" +
                                        wrote.message() + ")");
    }
    std::fprintf(stderr, "tierckpt: %s: the memory copy was damaged (%s); read from %s\n", object_path.c_str(),
                 wrote.message().c_str(), fresh->repaired().empty() ? "the agent" : fresh->repaired().c_str());
    TC_RETURN_IF_ERROR(WriteVerified(o.ns, o.step, object_path, *fresh, JoinPath(o.to, e.name), progress));
    return fresh->Unchanged();
  });
  if (!copied.ok()) {
    progress.Finish();
    Fail(copied);
    std::fprintf(stderr, "tierckpt: %s is incomplete (no %s written); fix the cause and run the restore again with --force\n",
                 o.to.c_str(), std::string(kManifestName).c_str());
    return kExitFailure;
  }
  // The manifest last: a directory with it holds the whole, verified step.
  Status wrote = WriteManifest(manifest_path, m->ToJson());
  progress.Finish();
  if (!wrote.ok()) return Fail(wrote.WithContext("writing the manifest of " + step_name));
  const double secs = progress.Seconds();
  if (g.json) {
    PrintJson({{"namespace", o.ns},
               {"step", o.step},
               {"objects", m->objects.size()},
               {"bytes", m->TotalBytes()},
               {"seconds", secs},
               {"dir", o.to}});
    return kExitOk;
  }
  std::printf("restored %s: %zu objects, %s in %.2f s (%s) to %s\n", step_name.c_str(), m->objects.size(),
              HumanSize(m->TotalBytes()).c_str(), secs, HumanRate(m->TotalBytes(), secs).c_str(), o.to.c_str());
  return kExitOk;
}

}  // namespace

void AddRestoreCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<RestoreOptions>();
  CLI::App* sub = app.add_subcommand(
      "restore", "write a step's objects as plain files into a directory (from memory, or durable when memory lacks it)");
  sub->add_option("namespace", o->ns, "namespace")->required();
  AddStepArgument(sub, &o->step);
  sub->add_option("--to", o->to, "target directory (created if missing; must be empty unless --force)")->required();
  sub->add_flag("--force", o->force, "restore into a non-empty directory, overwriting the step's files");
  sub->add_option("--threads", o->threads, "objects copied in parallel")
      ->transform(DecimalOnly())->check(CLI::Range(1, 64));
  sub->callback([&cli, o] { cli.exit_code = RunRestore(cli.global, *o); });
}

}  // namespace tierckpt::cli
