// tierckpt agent start: find tierckptd, start it detached (or in the
// foreground), and wait until it answers on its socket.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent_common.h"
#include "cli.h"
#include "os/fd.h"
#include "os/files.h"
#include "os/fs_stat.h"
#include "os/process.h"
#include "output.h"
#include "wire/unix_socket.h"

namespace tierckpt::cli {
namespace {

constexpr auto kStartTimeout = std::chrono::seconds(15);
constexpr size_t kLogTailLines = 20;

struct StartOptions {
  bool foreground = false;
  std::string agent_bin;  // --agent-bin / TIERCKPT_AGENT_BIN
  std::string root, memory_budget, durable, keep_last, persist_every, durable_keep, log_file, config;
  std::vector<std::string> extra;  // after "--"
};

Result<std::string> FindAgentBinary(const std::string& explicit_bin) {
  if (!explicit_bin.empty()) {
    if (IsExecutableFile(explicit_bin)) return explicit_bin;
    return NotFound("--agent-bin/TIERCKPT_AGENT_BIN " + explicit_bin + " is not an executable file");
  }
  std::vector<std::string> tried;
  if (Result<std::string> exe = SelfExecutablePath(); exe.ok()) {
    const std::string dir = DirName(*exe);
    // Installed side by side, or the build tree (tools/cli and tools/tierckptd).
    for (const std::string& c : {JoinPath(dir, "tierckptd"), JoinPath(DirName(dir), "tierckptd/tierckptd")}) {
      if (IsExecutableFile(c)) return c;
      tried.push_back(c);
    }
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "";
  for (size_t start = 0; start <= path.size();) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    if (!dir.empty() && IsExecutableFile(JoinPath(dir, "tierckptd"))) return JoinPath(dir, "tierckptd");
    start = end + 1;
  }
  std::string where;
  for (const std::string& t : tried) where += t + ", ";
  return NotFound("cannot find tierckptd (looked at " + where +
                  "and on PATH); pass --agent-bin PATH or set TIERCKPT_AGENT_BIN");
}

std::string DefaultLogPath(const StartOptions& o) {
  if (!o.log_file.empty()) return o.log_file;
  if (!o.root.empty()) return JoinPath(o.root, "agent.log");
  return "/tmp/tierckpt-" + std::to_string(::getuid()) + "/agent.log";
}

std::vector<std::string> AgentArgs(const std::string& bin, const std::string& socket, const StartOptions& o) {
  std::vector<std::string> args = {bin, "--socket", socket};
  auto pass = [&](const char* flag, const std::string& v) {
    if (!v.empty()) {
      args.push_back(flag);
      args.push_back(v);
    }
  };
  pass("--root", o.root);
  pass("--memory-budget", o.memory_budget);
  pass("--durable", o.durable);
  pass("--keep-last", o.keep_last);
  pass("--persist-every", o.persist_every);
  pass("--durable-keep", o.durable_keep);
  pass("--log-file", o.log_file);
  pass("--config", o.config);
  args.insert(args.end(), o.extra.begin(), o.extra.end());
  return args;
}

// The last lines of path written after offset.
std::string LogTail(const std::string& path, uint64_t offset) {
  Result<std::string> text = ReadFileToString(path, 64u << 20);
  if (!text.ok()) return "  (cannot read the log: " + text.status().message() + ")\n";
  std::string t = text->size() > offset ? text->substr(offset) : std::string();
  std::vector<std::string> lines;
  for (size_t start = 0; start < t.size();) {
    size_t nl = t.find('\n', start);
    if (nl == std::string::npos) nl = t.size();
    if (nl > start) lines.push_back(t.substr(start, nl - start));
    start = nl + 1;
  }
  if (lines.empty()) return "  (the log is empty)\n";
  std::string out;
  for (size_t i = lines.size() > kLogTailLines ? lines.size() - kLogTailLines : 0; i < lines.size(); ++i) {
    out += "  | " + lines[i] + "\n";
  }
  return out;
}

int ReportStarted(const GlobalOptions& g, Client& client, pid_t pid, const std::string& socket,
                  const std::string& root_flag, const std::string& log) {
  AgentFacts facts = ReadAgentFacts(client);
  std::string root = facts.root.empty() ? root_flag : facts.root;
  if (g.json) {
    PrintJson({{"started", true}, {"pid", pid}, {"socket", socket}, {"root", root}, {"log", log},
               {"durable", client.durable_base()}});
    return kExitOk;
  }
  std::printf("tierckptd started (pid %d)\n", static_cast<int>(pid));
  std::printf("  socket   %s\n", socket.c_str());
  std::printf("  root     %s\n", OrDash(root).c_str());
  std::printf("  durable  %s\n", OrDash(client.durable_base()).c_str());
  std::printf("  log      %s\n", log.c_str());
  return kExitOk;
}

int RunStart(const GlobalOptions& g, const StartOptions& o) {
  const std::string socket = SocketPath(g);
  {
    ClientOptions co;
    co.socket_path = socket;
    co.client_name = ClientName();
    Result<std::unique_ptr<Client>> existing = Client::Connect(co);
    if (existing.ok()) {
      AgentFacts facts = ReadAgentFacts(**existing);
      if (g.json) {
        PrintJson({{"started", false}, {"already_running", true}, {"pid", facts.pid}, {"socket", socket}});
      } else {
        std::printf("agent already running (pid %lld) on %s\n", static_cast<long long>(facts.pid), socket.c_str());
      }
      return kExitOk;
    }
    if (existing.status().code() != Code::kUnavailable && existing.status().code() != Code::kNotFound) {
      return FailConnect(existing.status(), socket, "checking for a running agent on " + socket);
    }
  }
  Result<std::string> bin = FindAgentBinary(o.agent_bin);
  if (!bin.ok()) return Fail(bin.status());
  std::vector<std::string> args = AgentArgs(*bin, socket, o);
  if (o.foreground) return Fail(ExecReplace(args));  // returns only when exec failed

  const std::string log = DefaultLogPath(o);
  Status dirs = MakeDirs(DirName(log), 0700);
  if (!dirs.ok()) return Fail(dirs.WithContext("creating the log directory (choose another with --log-file)"));
  if (o.log_file.empty() && o.root.empty()) {
    // The default /tmp/tierckpt-<uid>: another user may have created it
    // first, with a link to a file of ours as agent.log.
    Status mine = wire::CheckSocketDir(DirName(log), ::geteuid());
    if (!mine.ok()) return Fail(mine.WithContext("the default agent log " + log + " (choose another with --log-file)"));
  }
  Result<UniqueFd> log_fd = OpenFile(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (!log_fd.ok()) return Fail(log_fd.status().WithContext("opening the agent log (choose another with --log-file)"));
  Result<UniqueFd> null_fd = OpenFile("/dev/null", O_RDONLY | O_CLOEXEC);
  if (!null_fd.ok()) return Fail(null_fd.status());
  Result<FileStat> log_stat = StatOpenFd(log_fd->get(), "stat " + log);
  uint64_t log_offset = log_stat.ok() ? log_stat->size : 0;
  std::fflush(nullptr);

  SpawnOptions spawn;
  spawn.argv = std::move(args);
  spawn.new_session = true;  // detached: the terminal's ^C and hang-up do not reach it
  spawn.stdin_fd = null_fd->get();
  spawn.stdout_fd = log_fd->get();
  spawn.stderr_fd = log_fd->get();
  spawn.exec_failure_prefix = "tierckpt: exec tierckptd failed: ";
  Result<Child> child = Child::Spawn(spawn);
  if (!child.ok()) return Fail(child.status());
  const pid_t pid = child->pid();

  const auto deadline = std::chrono::steady_clock::now() + kStartTimeout;
  ClientOptions co;
  co.socket_path = socket;
  co.client_name = ClientName();
  while (true) {
    Result<std::optional<ExitStatus>> exited = child->Poll();
    if (!exited.ok()) {
      child->Detach();  // it may still run: leave it be, as a timeout does
      return Fail(exited.status());
    }
    if (exited->has_value()) {
      const std::string how = (*exited)->Describe();
      std::fprintf(stderr,
                   "tierckpt: tierckptd exited %s before it answered on %s; the end of its log %s:\n%s",
                   how.c_str(), socket.c_str(), log.c_str(), LogTail(log, log_offset).c_str());
      return kExitFailure;
    }
    Result<std::unique_ptr<Client>> c = Client::Connect(co);
    if (c.ok()) {
      child->Detach();  // the agent outlives this command
      return ReportStarted(g, **c, pid, socket, o.root, log);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      child->Detach();  // left running, as the message says
      std::fprintf(
          stderr,
          "tierckpt: tierckptd (pid %d) did not answer on %s within %lld s (last error: %s); it is still "
          "running: see its log %s, or stop it with `kill %d`. The end of the log:\n%s",
          static_cast<int>(pid), socket.c_str(), static_cast<long long>(kStartTimeout.count()),
          c.status().message().c_str(), log.c_str(), static_cast<int>(pid), LogTail(log, log_offset).c_str());
      return kExitFailure;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void AddAgentStartCommand(CLI::App& agent, Cli& cli) {
  auto o = std::make_shared<StartOptions>();
  CLI::App* sub = agent.add_subcommand("start", "start tierckptd in the background (unless one already answers)");
  sub->add_flag("--foreground", o->foreground, "run the agent in this terminal instead (logs on stderr)");
  sub->add_option("--agent-bin", o->agent_bin, "the tierckptd executable (default: next to tierckpt, then PATH)")
      ->envname("TIERCKPT_AGENT_BIN");
  sub->add_option("--root", o->root, "tmpfs directory of the memory tier (agent default /dev/shm/tierckpt-<uid>)");
  sub->add_option("--memory-budget", o->memory_budget, "memory tier budget: bytes, 512MiB, 8GiB or 25%");
  sub->add_option("--durable", o->durable, "durable tier: a directory, file:///path or mem://name");
  sub->add_option("--keep-last", o->keep_last, "committed steps kept in memory per namespace")
      ->transform(DecimalOnly());
  sub->add_option("--persist-every", o->persist_every, "persist steps whose number is a multiple of N")
      ->transform(DecimalOnly());
  sub->add_option("--durable-keep", o->durable_keep, "durable steps kept per namespace (0 = all)")
      ->transform(DecimalOnly());
  sub->add_option("--log-file", o->log_file,
                  "agent log (default <root>/agent.log with --root, else /tmp/tierckpt-<uid>/agent.log)");
  sub->add_option("--config", o->config, "agent config file (INI/TOML keys named like the flags)");
  sub->add_option("extra", o->extra, "more tierckptd flags, after `--`");
  sub->callback([&cli, o] { cli.exit_code = RunStart(cli.global, *o); });
}

}  // namespace tierckpt::cli
