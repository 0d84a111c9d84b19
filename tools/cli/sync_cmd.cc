// tierckpt sync --local DIR --remote URL [--once | -- COMMAND...]: directory
// sync (src/sync/, docs/sync.md). --once: one pass (pull what is missing,
// push what is new, delete nothing). Otherwise the first pass, then watching
// (sync_loop.h) until SIGTERM/SIGINT or until COMMAND exits, then a final
// flush within --grace seconds.
#include <signal.h>

#include <chrono>
#include <vector>

#include <cstdio>
#include <optional>
#include <memory>
#include <string>

#include "cli.h"
#include "output.h"
#include "common/log.h"
#include "os/process.h"
#include "os/signal_fd.h"
#include "sync/sync.h"
#include "sync/sync_loop.h"

namespace tierckpt::cli {
namespace {

struct SyncCommandOptions {
  std::string local;
  std::string remote;
  std::string instance;
  bool instance_host = false;
  bool once = false;
  bool no_pull = false;
  int grace_s = 60;
  int settle_ms = 1000;
  int concurrency = 8;
  std::vector<std::string> command;
};

// Runs command (looked up on PATH), with the signals unblocked.
Result<Child> StartCommand(const std::vector<std::string>& command) {
  SpawnOptions spawn;
  spawn.argv = command;
  spawn.search_path = true;
  spawn.exec_failure_prefix = "tierckpt sync: cannot run " + command[0] + ": ";
  return Child::Spawn(spawn);
}

std::string StatusLine(const sync::SyncStatus& s) {
  std::string line = "sync: " + std::to_string(s.pending) + " file(s) pending (" + HumanSize(s.pending_bytes) +
                     "), " + std::to_string(s.uploaded) + " uploaded (" + HumanSize(s.uploaded_bytes) + "), " +
                     std::to_string(s.deleted) + " deleted";
  if (!s.last_error.empty()) line += "; last error: " + s.last_error;
  return line;
}

int RunWatch(const GlobalOptions& g, const SyncCommandOptions& o, sync::BlobStore& remote, sync::SyncOptions so) {
  (void)g;
  // SIGCHLD too: the command's exit wakes the loop.
  Result<SignalFd> sfd = SignalFd::Open({SIGINT, SIGTERM, SIGCHLD}, "SIGINT/SIGTERM/SIGCHLD");
  if (!sfd.ok()) return Fail(sfd.status());
  sync::WatchOptions wo;
  wo.sync = std::move(so);
  wo.settle = std::chrono::milliseconds(o.settle_ms);
  sync::SyncLoop loop(&remote, wo);
  Result<sync::SyncReport> first = loop.Start();
  if (!first.ok()) return Fail(first.status().WithContext("sync of " + o.local + " with " + remote.Describe()));
  for (const std::string& w : first->warnings) {
    std::fprintf(stderr, "tierckpt sync: warning: %s\n", w.c_str());
  }
  std::fprintf(stderr, "sync: watching %s -> %s%s (pulled %zu file(s), pushed %zu)\n", o.local.c_str(),
               remote.Describe().c_str(), o.instance.empty() ? "" : (o.instance + "/").c_str(), first->pulled,
               first->pushed);
  Child child;  // killed and reaped on every return, if it still runs
  if (!o.command.empty()) {
    Result<Child> started = StartCommand(o.command);
    if (!started.ok()) return Fail(started.status().WithContext("starting " + o.command[0]));
    child = std::move(started).value();
  }
  const bool has_child = child.running();
  int child_status = -1;
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  std::string last_line;
  Clock::time_point last_print = Clock::now();
  for (;;) {
    Result<bool> woke = loop.Step(sfd->fd(), std::chrono::milliseconds(500));
    if (!woke.ok()) {
      std::fprintf(stderr, "tierckpt sync: %s; flushing and stopping\n", woke.status().ToString().c_str());
      if (!deadline) deadline = Clock::now() + std::chrono::seconds(o.grace_s);
      break;
    }
    if (*woke) {
      while (std::optional<int> sig = sfd->ReadSignal()) {
        if (*sig == SIGCHLD) continue;
        std::fprintf(stderr, "sync: signal %d: flushing within %d s\n", *sig, o.grace_s);
        if (!deadline) deadline = Clock::now() + std::chrono::seconds(o.grace_s);
        if (child.running()) child.Signal(*sig).IgnoreError();  // the trainer saves and exits; gone is fine
      }
    }
    if (child.running()) {
      Result<std::optional<ExitStatus>> exited = child.Poll();
      if (exited.ok() && exited->has_value()) child_status = (*exited)->ShellCode();
    }
    const std::string line = StatusLine(loop.status());
    if (line != last_line && Clock::now() - last_print > std::chrono::seconds(2)) {
      std::fprintf(stderr, "%s\n", line.c_str());
      last_line = line;
      last_print = Clock::now();
    }
    if (has_child && child_status >= 0) break;                         // the trainer is done
    if (deadline && (!has_child || Clock::now() >= *deadline)) break;  // stopping
  }
  if (!deadline) deadline = Clock::now() + std::chrono::seconds(o.grace_s);
  Status flushed = loop.Flush(*deadline);
  std::fprintf(stderr, "%s\n", StatusLine(loop.status()).c_str());
  if (child.running()) {  // the grace ran out first
    child.Signal(SIGKILL).IgnoreError();
    child.Wait().status().IgnoreError();
    child_status = 128 + SIGKILL;
  }
  if (!flushed.ok()) {
    Fail(flushed);
    return child_status > 0 ? child_status : kExitFailure;
  }
  return child_status >= 0 ? child_status : kExitOk;
}

int RunSync(const GlobalOptions& g, SyncCommandOptions o) {
  if (o.once && !o.command.empty()) {
    return Fail(std::string("tierckpt sync: --once runs one pass and cannot wrap a command; drop --once to "
                            "sync while the command runs"));
  }
  if (o.instance_host) {
    char host[256] = {0};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') {
      return Fail(std::string("tierckpt sync: --instance-prefix-host: the host name is unavailable; give "
                              "--instance-prefix NAME"));
    }
    o.instance = host;
  }
  Result<std::unique_ptr<sync::BlobStore>> remote = sync::OpenBlobStore(o.remote);
  if (!remote.ok()) return Fail(remote.status().WithContext("--remote " + o.remote));
  sync::SyncOptions so;
  so.local = o.local;
  so.instance = o.instance;
  so.pull = !o.no_pull;
  so.concurrency = o.concurrency;
  if (!o.once) return RunWatch(g, o, **remote, so);
  const bool show = Progress::ShouldShow(g.progress);
  Result<sync::SyncReport> r = sync::SyncOnce(**remote, so, [&](std::string_view what, const std::string& path,
                                                                uint64_t bytes) {
    if (show) std::fprintf(stderr, "%s %s (%s)\n", std::string(what).c_str(), path.c_str(), HumanSize(bytes).c_str());
  });
  if (!r.ok()) return Fail(r.status().WithContext("sync of " + o.local + " with " + (*remote)->Describe()));
  for (const std::string& c : r->conflicts) {
    std::fprintf(stderr, "tierckpt sync: %s differs in size from the remote copy; the local file was uploaded\n",
                 c.c_str());
  }
  for (const std::string& w : r->warnings) std::fprintf(stderr, "tierckpt sync: warning: %s\n", w.c_str());
  for (const std::string& b : r->bad_names) {
    std::fprintf(stderr, "tierckpt sync: skipped %s: its name breaks the path rule (docs/sync.md)\n", b.c_str());
  }
  if (g.json) {
    PrintJson({{"local", o.local},
               {"remote", (*remote)->Describe()},
               {"instance", o.instance},
               {"pulled", r->pulled},
               {"pulled_bytes", r->pulled_bytes},
               {"pushed", r->pushed},
               {"pushed_bytes", r->pushed_bytes},
               {"unchanged", r->unchanged},
               {"conflicts", r->conflicts},
               {"skipped", r->bad_names},
               {"warnings", r->warnings}});
  } else {
    std::printf("synced %s with %s%s: pulled %zu file(s) (%s), pushed %zu (%s), %zu unchanged\n", o.local.c_str(),
                (*remote)->Describe().c_str(), o.instance.empty() ? "" : (o.instance + "/").c_str(), r->pulled,
                HumanSize(r->pulled_bytes).c_str(), r->pushed, HumanSize(r->pushed_bytes).c_str(), r->unchanged);
  }
  return r->bad_names.empty() ? kExitOk : kExitFailure;
}

}  // namespace

void AddSyncCommand(CLI::App& app, Cli& cli) {
  auto o = std::make_shared<SyncCommandOptions>();
  CLI::App* sub = app.add_subcommand(
      "sync", "mirror a checkpoint directory to S3 or a filesystem: pull what is missing, push what is new");
  sub->add_option("--local", o->local, "the local checkpoint directory (created if missing)")->required();
  sub->add_option("--remote", o->remote, "s3://bucket/prefix[?options] or a directory")->required();
  sub->add_option("--instance-prefix", o->instance,
                  "keep this instance's files under <remote>/<NAME>/ ([A-Za-z0-9_.-]); instances never overwrite "
                  "or pull each other's files");
  sub->add_flag("--instance-prefix-host", o->instance_host, "--instance-prefix with this host's name");
  sub->add_flag("--once", o->once, "one pass, then exit (0 when everything local is remote)");
  sub->add_flag("--no-pull", o->no_pull, "push only: do not download the remote's files first");
  sub->add_option("--grace", o->grace_s, "seconds to finish uploads after SIGTERM/SIGINT or the command's exit "
                                        "(default 60)")->check(CLI::Range(0, 86400));
  sub->add_option("--concurrency", o->concurrency, "files moved at once by a pass (default 8)")
      ->transform(DecimalOnly())
      ->check(CLI::Range(1, 256));
  sub->add_option("--settle-ms", o->settle_ms, "quiet time before a finished file is uploaded (default 1000)")
      ->transform(DecimalOnly())
      ->check(CLI::Range(0, 600000));
  sub->add_option("command", o->command, "after --: the training command to run while syncing; sync exits with "
                                         "its status after a final flush");
  sub->callback([&cli, o] { cli.exit_code = RunSync(cli.global, *o); });
}

}  // namespace tierckpt::cli
