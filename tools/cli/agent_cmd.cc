// tierckpt agent stop|status (start is in agent_start.cc).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "agent_common.h"
#include "cli.h"
#include "output.h"
#include "wire/unix_socket.h"

namespace tierckpt::cli {
namespace {

using nlohmann::json;

constexpr auto kStopTimeout = std::chrono::seconds(40);

int RunStop(const GlobalOptions& g) {
  const std::string socket = SocketPath(g);
  ClientOptions co;
  co.socket_path = socket;
  co.client_name = ClientName();
  Result<std::unique_ptr<Client>> c = Client::Connect(co);
  if (!c.ok()) {
    if (c.status().code() != Code::kUnavailable && c.status().code() != Code::kNotFound) {
      return FailConnect(c.status(), socket, "connecting to tierckptd at " + socket);
    }
    if (g.json) {
      PrintJson({{"stopped", false}, {"running", false}, {"socket", socket}});
    } else {
      std::printf("no agent running on %s (nothing to stop)\n", socket.c_str());
    }
    return kExitOk;
  }
  AgentFacts facts = ReadAgentFacts(**c);
  Status s = (*c)->Shutdown();
  // The agent may close the connection as it goes; only an answer that
  // refuses the shutdown is a failure.
  if (!s.ok() && s.code() != Code::kUnavailable) return Fail(s.WithContext("asking tierckptd to shut down"));
  c->reset();
  const auto start = std::chrono::steady_clock::now();
  // Bounded connects: an agent whose accept queue is full still answers.
  auto still_answers = [&socket] {
    Result<UniqueFd> probe = wire::ConnectUnix(socket, 1000);
    return probe.ok() || probe.status().code() == Code::kTimeout;
  };
  while (still_answers()) {
    if (std::chrono::steady_clock::now() - start > kStopTimeout) {
      return Fail("tierckptd (pid " + std::to_string(facts.pid) + ") still answers on " + socket + " " +
                  std::to_string(kStopTimeout.count()) +
                  " s after the shutdown request (it may be finishing persists); check its log, or kill it");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (g.json) {
    PrintJson({{"stopped", true}, {"pid", facts.pid}, {"socket", socket}, {"seconds", secs}});
  } else {
    std::printf("tierckptd (pid %lld) stopped\n", static_cast<long long>(facts.pid));
  }
  return kExitOk;
}

// Field readers for the Stats document: absent or mistyped → "-".
std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? OrDash(it->get<std::string>()) : "-";
}
std::string Num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? std::to_string(it->get<uint64_t>()) : "-";
}
std::string Size(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? HumanSize(it->get<uint64_t>()) : "-";
}

// A rate cap: 0 = "unlimited".
std::string Rate(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return "-";
  return it->get<uint64_t>() == 0 ? "unlimited" : HumanSize(it->get<uint64_t>()) + "/s";
}
// A duration in milliseconds, in the unit --scrub-interval takes: "10m", "1s", "1500ms".
std::string Interval(uint64_t ms) {
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

// "every 1s; 3 pass(es), the last ended 2026-12-02T20:40:00Z; 12 object(s) hashed, 0 corrupt, 0 repaired"
std::string ScrubLine(const json& scrub) {
  auto interval = scrub.find("interval_ms");
  if (interval == scrub.end() || !interval->is_number_unsigned()) return "-";
  std::string line = interval->get<uint64_t>() == 0 ? "off" : "every " + Interval(interval->get<uint64_t>());
  line += "; " + Num(scrub, "passes") + " pass(es)";
  if (auto last = scrub.find("last_pass_unix_ms"); last != scrub.end() && last->is_number_unsigned()) {
    line += ", the last ended " + FormatUnixMs(last->get<uint64_t>());
  }
  return line + "; " + Num(scrub, "objects") + " object(s) hashed, " + Num(scrub, "corrupt") + " corrupt, " +
         Num(scrub, "repaired") + " repaired";
}

void PrintStatus(const json& j) {
  std::printf("tierckptd %s (pid %s) on node %s\n", Str(j, "version").c_str(), Num(j, "pid").c_str(),
              Str(j, "node_id").c_str());
  std::printf("  socket         %s\n", Str(j, "socket").c_str());
  std::printf("  root           %s\n", Str(j, "root").c_str());
  std::printf("  durable        %s\n", Str(j, "durable") == "-" ? "none" : Str(j, "durable").c_str());
  if (auto allow = j.find("durable_allow"); allow != j.end() && allow->is_array() && !allow->empty()) {
    std::string patterns;
    for (const json& p : *allow)
      patterns += (patterns.empty() ? "" : ", ") + (p.is_string() ? p.get<std::string>() : "?");
    std::printf("  jobs may use   %s (--durable-allow)\n", patterns.c_str());
  }
  std::string free = "-";
  auto budget = j.find("budget_bytes"), used = j.find("used_bytes");
  if (budget != j.end() && used != j.end() && budget->is_number_unsigned() && used->is_number_unsigned()) {
    uint64_t b = budget->get<uint64_t>(), u = used->get<uint64_t>();
    free = HumanSize(b > u ? b - u : 0);
  }
  std::printf("  budget         %s used of %s (%s free)\n", Size(j, "used_bytes").c_str(), Size(j, "budget_bytes").c_str(),
              free.c_str());
  std::printf("  pool           %s in %s recycled segment(s) (counted as used)\n", Size(j, "pool_bytes").c_str(),
              Num(j, "pool_segments").c_str());
  std::printf("  tmpfs free     %s of %s\n", Size(j, "tmpfs_free_bytes").c_str(), Size(j, "tmpfs_total_bytes").c_str());
  if (const std::string huge = Str(j, "tmpfs_huge_pages"); huge != "-" && !huge.empty()) {
    std::printf("  huge pages     %s%s\n", huge.c_str(),
                huge == "never" ? " (4 KiB pages: saves copy slower; docs/agent.md, \"Huge pages\")" : "");
  }
  // "keep_last" is what agents send; docs/protocol.md calls it "retention".
  const std::string keep = Num(j, "keep_last") != "-" ? Num(j, "keep_last") : Num(j, "retention");
  std::printf("  retention      newest %s committed steps per namespace in memory\n", keep.c_str());
  if (auto ev = j.find("budget_evictions"); ev != j.end() && ev->is_number_unsigned() && ev->get<uint64_t>() > 0) {
    std::printf("  evictions      %s committed step(s) dropped to make room since start: the budget, not retention, "
                "limits the steps kept (raise --memory-budget or lower --keep-last)\n",
                Num(j, "budget_evictions").c_str());
  }
  std::printf("  persist queue  %s step(s) queued, %s running\n", Num(j, "persist_queue").c_str(),
              Num(j, "persist_running").c_str());
  if (auto a = j.find("persist_awaiting_parts"); a != j.end() && a->is_number_unsigned() && a->get<uint64_t>() > 0) {
    std::printf("  awaiting parts %s step(s) spanning nodes: this node's part is durable, the others' are not yet\n",
                Num(j, "persist_awaiting_parts").c_str());
  }
  std::printf("  writing        %s step(s) in flight\n", Num(j, "in_flight_steps").c_str());
  std::printf("  connections    %s\n", Num(j, "connections").c_str());
  if (j.contains("background_priority")) {  // older agents do not send the caps
    std::printf("  background     persist %s, replicate %s, priority %s\n",
                Rate(j, "persist_rate_bytes").c_str(), Rate(j, "replicate_rate_bytes").c_str(),
                Str(j, "background_priority").c_str());
  }
  if (auto scrub = j.find("scrub"); scrub != j.end() && scrub->is_object()) {
    std::printf("  scrub          %s\n", ScrubLine(*scrub).c_str());
  }
  if (auto peers = j.find("peers"); peers != j.end() && peers->is_object()) {
    std::string holders;
    if (auto h = peers->find("holders"); h != peers->end() && h->is_array()) {
      for (const json& id : *h) holders += (holders.empty() ? "" : ", ") + (id.is_string() ? id.get<std::string>() : "?");
    }
    std::printf("  peers          listening on %s; %s copies, commit waits for %s; replicas of this node on %s\n",
                Str(*peers, "listen").c_str(), Num(*peers, "replicas").c_str(), Str(*peers, "replica_ack").c_str(),
                holders.empty() ? "no other node" : holders.c_str());
    if (auto held = peers->find("holding"); held != peers->end() && held->is_array()) {
      for (const json& h : *held) {
        if (!h.is_object()) continue;
        std::printf("  holding        %s step(s), %s, of node %s\n", Num(h, "steps").c_str(), Size(h, "bytes").c_str(),
                    Str(h, "origin").c_str());
      }
    }
    if (auto parity = peers->find("parity"); parity != peers->end() && parity->is_object()) {
      std::string on;
      if (auto h = parity->find("holders"); h != parity->end() && h->is_array()) {
        for (const json& id : *h) on += (on.empty() ? "" : ", ") + (id.is_string() ? id.get<std::string>() : "?");
      }
      // Decisions 139, 141 and 142: a lost part of any step is rebuilt from parity once the step
      // is redundant; decision 146: the commit waits for that with --parity-ack all.
      std::printf(
          "  parity         %s (experimental: rebuilds lost parts of redundant steps), group %s, "
          "parity on %s; holding %s of other groups' parity; commit waits for %s\n",
          Str(*parity, "scheme").c_str(), Num(*parity, "group").c_str(), on.c_str(),
          Size(*parity, "held_bytes").c_str(), Str(*parity, "ack").c_str());
      if (auto steps = parity->find("steps"); steps != parity->end() && steps->is_array()) {
        for (const json& st : *steps) {
          if (!st.is_object()) continue;
          std::printf("  parity step    %s/%s: %s\n", Str(st, "ns").c_str(), Num(st, "step").c_str(),
                      Str(st, "state").c_str());
        }
      }
    }
  }

  auto namespaces = j.find("namespaces");
  if (namespaces != j.end() && namespaces->is_array() && !namespaces->empty()) {
    std::printf("\n");
    Table t({"NAMESPACE", "MEMORY STEPS", "MEMORY SIZE", "NEWEST MEMORY", "NEWEST DURABLE", "WRITING",
             "DURABLE BASE"},
            {false, true, true, true, true, true, false});
    for (const json& n : *namespaces) {
      if (!n.is_object()) continue;
      // Agents of 0.1 send memory_steps as a count and memory_newest /
      // durable_newest; docs/protocol.md lists the steps and newest_*.
      std::string steps = Num(n, "memory_steps");
      if (auto m = n.find("memory_steps"); m != n.end() && m->is_array()) steps = std::to_string(m->size());
      auto either = [&](const char* a, const char* b) { return Num(n, a) != "-" ? Num(n, a) : Num(n, b); };
      // "durable": the namespace's own base (decision 72), the agent's default otherwise.
      const std::string base = Str(n, "durable") == Str(j, "durable") ? "(default)" : Str(n, "durable");
      t.AddRow({Str(n, "namespace"), steps, Size(n, "memory_bytes"), either("memory_newest", "newest_memory"),
                either("durable_newest", "newest_durable"), Num(n, "writing_steps"), base});
    }
    t.Print();
  }
  auto failed = j.find("not_persisted");
  if (failed != j.end() && failed->is_array() && !failed->empty()) {
    std::printf("\nnot persisted (kept in memory; the agent tries again every few seconds and at its next start):\n");
    for (const json& f : *failed) {
      std::printf("  %s step %s: %s\n", Str(f, "namespace").c_str(), Num(f, "step").c_str(), Str(f, "error").c_str());
    }
  }
  auto errors = j.find("last_errors");
  if (errors != j.end() && errors->is_array() && !errors->empty()) {
    std::printf("\nlast errors:\n");
    for (const json& e : *errors) {
      std::printf("  %s\n", e.is_string() ? e.get<std::string>().c_str() : e.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
    }
  }
}

int RunStatus(const GlobalOptions& g) {
  int rc = kExitOk;
  std::unique_ptr<Client> client = ConnectOrReport(g, &rc);
  if (!client) return rc;
  Result<std::string> stats = client->Stats();
  if (!stats.ok()) return Fail(stats.status().WithContext("reading the agent's stats"));
  json j = ParseJson(*stats);
  if (j.is_discarded() || !j.is_object()) {
    return Fail("tierckptd at " + client->socket_path() + " sent stats that are not a JSON object");
  }
  if (!j.contains("socket")) j["socket"] = client->socket_path();
  if (g.json) {
    PrintJson(j);
  } else {
    PrintStatus(j);
  }
  return kExitOk;
}

}  // namespace

AgentFacts ReadAgentFacts(Client& client) {
  AgentFacts f;
  Result<std::string> stats = client.Stats();
  if (!stats.ok()) return f;
  json j = ParseJson(*stats);
  if (!j.is_object()) return f;
  if (auto it = j.find("pid"); it != j.end() && it->is_number_integer()) f.pid = it->get<int64_t>();
  if (auto it = j.find("version"); it != j.end() && it->is_string()) f.version = it->get<std::string>();
  if (auto it = j.find("root"); it != j.end() && it->is_string()) f.root = it->get<std::string>();
  return f;
}

void AddAgentCommands(CLI::App& app, Cli& cli) {
  CLI::App* agent = app.add_subcommand("agent", "start, stop or inspect the node agent tierckptd");
  agent->require_subcommand(1);
  AddAgentStartCommand(*agent, cli);
  agent->add_subcommand("stop", "ask the agent to shut down and wait until it has")->callback([&cli] {
    cli.exit_code = RunStop(cli.global);
  });
  agent->add_subcommand("status", "the agent's version, tiers, budget, namespaces, queues and recent errors")
      ->callback([&cli] { cli.exit_code = RunStatus(cli.global); });
}

}  // namespace tierckpt::cli
