#include "agent/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "os/files.h"
#include "tier/tier_test_util.h"
#include "wire/socket_path.h"

namespace tierckpt::agent {
namespace {

using testing::TempDir;

Result<CommandLine> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tierckptd");
  return ParseAgentCommandLine(args);
}

TEST(ConfigTest, DefaultsAreDocumented) {
  Result<CommandLine> c = Parse({"--memory-budget", "64MiB"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const AgentConfig& cfg = c->config;
  EXPECT_FALSE(c->exit_now);
  EXPECT_EQ(cfg.root, "/dev/shm/tierckpt-" + std::to_string(::getuid()));
  EXPECT_EQ(cfg.socket_path, wire::DefaultSocketPath());
  EXPECT_EQ(cfg.budget_bytes, 64u << 20);
  EXPECT_EQ(cfg.keep_last, 3u);
  EXPECT_EQ(cfg.durable_url, "");
  EXPECT_EQ(cfg.persist_every, 0u);
  EXPECT_EQ(cfg.durable_keep, 0u);
  EXPECT_EQ(cfg.persist_threads, 2);
  EXPECT_EQ(cfg.verify_threads, DefaultVerifyThreads());
  EXPECT_FALSE(cfg.verify_on_seal);
  EXPECT_TRUE(cfg.commit_before_hash);  // decision 68
  EXPECT_FALSE(cfg.node_id.empty());
  EXPECT_EQ(cfg.log_level, "info");
  EXPECT_EQ(cfg.shutdown_grace_s, 30);
  EXPECT_EQ(cfg.persist_rate_bytes, 0u);    // unlimited
  EXPECT_EQ(cfg.replicate_rate_bytes, 0u);  // unlimited
  EXPECT_EQ(cfg.background_priority_value, ThreadPriority::kLow);
}

TEST(ConfigTest, DefaultVerifyThreadsIsAQuarterOfTheCoresWithin1To8) {
  EXPECT_EQ(DefaultVerifyThreads(1), 1);
  EXPECT_EQ(DefaultVerifyThreads(2), 1);  // the 2-core VM: hashing must not crowd the client's copy threads
  EXPECT_EQ(DefaultVerifyThreads(4), 1);
  EXPECT_EQ(DefaultVerifyThreads(8), 2);
  EXPECT_EQ(DefaultVerifyThreads(16), 4);
  EXPECT_EQ(DefaultVerifyThreads(64), 8);
  EXPECT_EQ(DefaultVerifyThreads(256), 8);
  EXPECT_GE(DefaultVerifyThreads(), 1);
}

TEST(ConfigTest, DefaultBudgetIsAQuarterOfRam) {
  AgentConfig cfg;
  ASSERT_TRUE(FinalizeAgentConfig(&cfg, 8ull << 30).ok());
  EXPECT_EQ(cfg.budget_bytes, 2ull << 30);
}

TEST(ConfigTest, FlagsAreParsed) {
  Result<CommandLine> c =
      Parse({"--socket", "/tmp/x.sock", "--root", "/tmp/r", "--memory-budget", "2GiB", "--keep-last", "5",
             "--durable", "file:///tmp/d", "--persist-every", "10", "--durable-keep", "4", "--persist-threads", "3",
             "--verify-on-seal", "--no-commit-before-hash", "--node-id", "n1", "--log-level", "debug",
             "--pid-file", "/tmp/p", "--shutdown-grace", "5", "--foreground"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const AgentConfig& cfg = c->config;
  EXPECT_EQ(cfg.socket_path, "/tmp/x.sock");
  EXPECT_EQ(cfg.root, "/tmp/r");
  EXPECT_EQ(cfg.budget_bytes, 2ull << 30);
  EXPECT_EQ(cfg.keep_last, 5u);
  EXPECT_EQ(cfg.durable_url, "file:///tmp/d");
  EXPECT_EQ(cfg.persist_every, 10u);
  EXPECT_EQ(cfg.durable_keep, 4u);
  EXPECT_EQ(cfg.persist_threads, 3);
  EXPECT_TRUE(cfg.verify_on_seal);
  EXPECT_FALSE(cfg.commit_before_hash);
  EXPECT_EQ(cfg.node_id, "n1");
  EXPECT_EQ(cfg.log_level, "debug");
  EXPECT_EQ(cfg.pid_file, "/tmp/p");
  EXPECT_EQ(cfg.shutdown_grace_s, 5);
}

// Decision 135: the erasure-coded tier's flag is accepted only with --peers
// (a group needs K + M agents); decision 142 lifted its --replicas >= 2
// requirement, since every lost part, of a step spanning nodes too, is
// rebuilt from parity (decisions 139, 141). Each refusal says what to use.
TEST(ConfigTest, RedundancyIsAcceptedOnlyWithPeersAndWithOrWithoutReplicas) {
  const std::vector<std::string> peers = {"--peers", "/tmp/hosts", "--peer-secret-file", "/tmp/secret"};
  auto with_peers = [&](std::vector<std::string> more) {
    more.insert(more.end(), peers.begin(), peers.end());
    return Parse(more);
  };
  Result<CommandLine> rs = with_peers({"--redundancy", "rs:4+2"});
  ASSERT_TRUE(rs.ok()) << rs.status().ToString();
  ASSERT_TRUE(rs->config.redundancy_value.has_value());
  EXPECT_EQ(rs->config.redundancy_value->ToString(), "rs:4+2");
  Result<CommandLine> x = with_peers({"--redundancy", "xor:3", "--replicas", "3"});
  ASSERT_TRUE(x.ok()) << x.status().ToString();
  EXPECT_EQ(x->config.redundancy_value->k, 3u);
  EXPECT_EQ(x->config.redundancy_value->m, 1u);
  // No default scheme: without the flag nothing folds parity.
  Result<CommandLine> none = with_peers({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->config.redundancy_value.has_value());

  // Alone (--replicas 1): parity is the only copy on peers (decision 142).
  Result<CommandLine> alone = with_peers({"--redundancy", "rs:4+2", "--replicas", "1"});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->config.replicas, 1u);
  EXPECT_EQ(alone->config.redundancy_value->ToString(), "rs:4+2");
  // Without peers there is no group.
  Result<CommandLine> single = Parse({"--redundancy", "rs:4+2"});
  ASSERT_FALSE(single.ok());
  EXPECT_NE(single.status().message().find("needs --peers"), std::string::npos) << single.status().ToString();
  EXPECT_NE(single.status().message().find("at least 6 agents"), std::string::npos)
      << single.status().ToString();

  Result<CommandLine> replicas = with_peers({"--redundancy", "replicas:3"});
  ASSERT_FALSE(replicas.ok());
  EXPECT_NE(replicas.status().message().find("--replicas 3"), std::string::npos) << replicas.status().ToString();
  Result<CommandLine> bad = with_peers({"--redundancy", "rs:4"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--redundancy"), std::string::npos) << bad.status().ToString();
}

// Decision 146: --parity-ack all|none, only with --redundancy; by default the commit waits for parity when
// parity is the only copy on peers (--replicas 1), not beside replicas.
TEST(ConfigTest, ParityAckIsRefusedWithoutRedundancyAndDefaultsToAllWhenParityIsAlone) {
  const std::vector<std::string> peers = {"--peers", "/tmp/hosts", "--peer-secret-file", "/tmp/secret"};
  auto with_peers = [&](std::vector<std::string> more) {
    more.insert(more.end(), peers.begin(), peers.end());
    return Parse(more);
  };
  Result<CommandLine> alone = with_peers({"--redundancy", "rs:4+2", "--replicas", "1"});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->config.parity_ack, "all");
  Result<CommandLine> beside = with_peers({"--redundancy", "rs:4+2"});
  ASSERT_TRUE(beside.ok()) << beside.status().ToString();
  EXPECT_EQ(beside->config.parity_ack, "none");
  Result<CommandLine> all = with_peers({"--redundancy", "rs:4+2", "--parity-ack", "all"});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->config.parity_ack, "all");
  Result<CommandLine> none =
      with_peers({"--redundancy", "rs:4+2", "--replicas", "1", "--parity-ack", "none"});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->config.parity_ack, "none");
  // Without --redundancy nothing is folded: nothing to wait for.
  EXPECT_EQ(with_peers({})->config.parity_ack, "");
  Result<CommandLine> without = with_peers({"--parity-ack", "all"});
  ASSERT_FALSE(without.ok());
  EXPECT_EQ(without.status().code(), Code::kInvalidArgument);
  EXPECT_NE(without.status().message().find("--parity-ack all needs --redundancy rs:K+M"), std::string::npos)
      << without.status().ToString();
  EXPECT_NE(without.status().message().find("--replica-ack"), std::string::npos)
      << without.status().ToString();
  Result<CommandLine> bad = with_peers({"--redundancy", "rs:4+2", "--parity-ack", "some"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--parity-ack some: use \"all\""), std::string::npos)
      << bad.status().ToString();
}

TEST(ConfigTest, TheHttpApiNeedsAnAllowListOffLoopback) {
  Result<CommandLine> off = Parse({});
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->config.http_listen.empty());
  EXPECT_TRUE(Parse({"--http-listen", "127.0.0.1:9200"}).ok());
  EXPECT_TRUE(Parse({"--http-listen", "[::1]:9200"}).ok());
  Result<CommandLine> open = Parse({"--http-listen", "0.0.0.0:9200"});
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("--http-allow"), std::string::npos) << open.status().ToString();
  Result<CommandLine> allowed = Parse({"--http-listen", "0.0.0.0:9200", "--http-allow", "10.0.0.0/8,::1"});
  ASSERT_TRUE(allowed.ok()) << allowed.status().ToString();
  EXPECT_EQ(allowed->config.http_allow, (std::vector<std::string>{"10.0.0.0/8", "::1"}));
  Result<CommandLine> bad = Parse({"--http-listen", "0.0.0.0:9200", "--http-allow", "10.0.0.0/40"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--http-allow"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE(Parse({"--http-allow", "10.0.0.0/8"}).ok());  // without --http-listen
  EXPECT_FALSE(Parse({"--http-listen", "nohostport"}).ok());
}

TEST(ConfigTest, DurableAllowListsPatternsBesideADefaultBase) {
  Result<CommandLine> ok = Parse({"--durable", "/tmp/d", "--durable-allow", "s3://team-bucket/*,/mnt/fsx/*"});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->config.durable_allow, (std::vector<std::string>{"s3://team-bucket/*", "/mnt/fsx/*"}));
  Result<CommandLine> alone = Parse({"--durable-allow", "s3://team-bucket/*"});
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.status().message().find("needs --durable"), std::string::npos) << alone.status().ToString();
  Result<CommandLine> relative = Parse({"--durable", "/tmp/d", "--durable-allow", "fsx/*"});
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("--durable-allow"), std::string::npos);
}

TEST(ConfigTest, PreallocateIsBytesOrAShareOfTheBudgetAndOffByDefault) {
  Result<CommandLine> off = Parse({"--memory-budget", "1GiB"});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(off->config.preallocate_bytes, 0u);
  EXPECT_EQ(off->config.preallocate_segment_bytes, 256u << 20);
  Result<CommandLine> share = Parse({"--memory-budget", "1GiB", "--preallocate", "50%"});
  ASSERT_TRUE(share.ok()) << share.status().ToString();
  EXPECT_EQ(share->config.preallocate_bytes, 512u << 20);
  Result<CommandLine> bytes =
      Parse({"--memory-budget", "1GiB", "--preallocate", "768MiB", "--preallocate-segment", "64MiB"});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->config.preallocate_bytes, 768u << 20);
  EXPECT_EQ(bytes->config.preallocate_segment_bytes, 64u << 20);
}

TEST(ConfigTest, BadValuesNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string flag;
  };
  const Case cases[] = {
      {{"--keep-last", "0"}, "--keep-last"},
      {{"--keep-last", "many"}, "--keep-last"},
      {{"--memory-budget", "lots"}, "--memory-budget"},
      {{"--memory-budget", "150%"}, "--memory-budget"},
      {{"--memory-budget", "12"}, "--memory-budget"},  // below the 1 MiB minimum
      {{"--persist-threads", "0"}, "--persist-threads"},
      {{"--log-level", "loud"}, "--log-level"},
      {{"--node-id", "has space"}, "--node-id"},
      {{"--node-id", "host:1"}, "--node-id"},  // ":" would break "node host:port" lists
      {{"--node-id", std::string(129, 'n')}, "--node-id"},
      {{"--bogus"}, "--bogus"},
      {{"--socket", "/tmp/" + std::string(120, 's')}, "--socket"},
      {{"--memory-budget", "1GiB", "--preallocate", "2GiB"}, "--preallocate"},  // past the budget
      {{"--preallocate", "some"}, "--preallocate"},
      {{"--preallocate", "120%"}, "--preallocate"},
      {{"--preallocate-segment", "4KiB"}, "--preallocate-segment"},
      {{"--persist-rate", "fast"}, "--persist-rate"},
      {{"--persist-rate", "10%"}, "--persist-rate"},
      {{"--persist-rate", "100K"}, "--persist-rate"},  // below 1 MiB/s
      {{"--replicate-rate", "-5M"}, "--replicate-rate"},
      {{"--background-priority", "lowest"}, "--background-priority"},
  };
  for (const Case& c : cases) {
    Result<CommandLine> r = Parse(c.args);
    ASSERT_FALSE(r.ok()) << c.args[0];
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.flag), std::string::npos) << r.status().ToString();
  }
}

TEST(ConfigTest, RatesTakeSizesPerSecondAndPriorityItsThreeNames) {
  Result<CommandLine> c = Parse({"--memory-budget", "64MiB", "--persist-rate", "200M", "--replicate-rate",
                                 "500MB/s", "--background-priority", "idle"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->config.persist_rate_bytes, 200u << 20);
  EXPECT_EQ(c->config.replicate_rate_bytes, 500000000u);
  EXPECT_EQ(c->config.background_priority_value, ThreadPriority::kIdle);
  c = Parse({"--memory-budget", "64MiB", "--persist-rate", "0", "--background-priority", "normal"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->config.persist_rate_bytes, 0u);
  EXPECT_EQ(c->config.background_priority_value, ThreadPriority::kNormal);
}

TEST(ConfigTest, ScrubIntervalIsADurationTenMinutesByDefaultAndZeroIsOff) {
  Result<CommandLine> c = Parse({"--memory-budget", "64MiB"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->config.scrub_interval_ms, 600'000u);
  for (const auto& [text, ms] : std::vector<std::pair<std::string, uint64_t>>{{"0", 0},
                                                                              {"600", 600'000},
                                                                              {"90s", 90'000},
                                                                              {"10m", 600'000},
                                                                              {"1.5h", 5'400'000},
                                                                              {"250ms", 250}}) {
    c = Parse({"--memory-budget", "64MiB", "--scrub-interval", text});
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().ToString();
    EXPECT_EQ(c->config.scrub_interval_ms, ms) << text;
  }
  for (const std::string bad : {"ten", "10x", "-5", "50ms", "8d", ""}) {
    c = Parse({"--memory-budget", "64MiB", "--scrub-interval", bad});
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(c.status().message().find("--scrub-interval"), std::string::npos) << c.status().message();
  }
}

TEST(ConfigTest, HelpAndVersionExitEarly) {
  Result<CommandLine> h = Parse({"--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->exit_now);
  EXPECT_NE(h->text.find("--memory-budget"), std::string::npos);
  Result<CommandLine> v = Parse({"--version"});
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->exit_now);
  EXPECT_NE(v->text.find("0.1.0"), std::string::npos);
}

TEST(ConfigTest, ConfigFileSetsKeysAndFlagsWin) {
  TempDir dir;
  const std::string file = dir.Sub("agent.toml");
  ASSERT_TRUE(WriteFileAtomic(file,
                              "# tierckptd config\n"
                              "memory-budget = \"256MiB\"\n"
                              "keep-last = 7\n"
                              "durable = \"/tmp/durable\"\n"
                              "verify-on-seal = true\n"
                              "node-id = \"from-file\"\n",
                              false)
                  .ok());
  Result<CommandLine> c = Parse({"--config", file, "--node-id", "from-flag"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->config.config_file, file);
  EXPECT_EQ(c->config.budget_bytes, 256u << 20);
  EXPECT_EQ(c->config.keep_last, 7u);
  EXPECT_EQ(c->config.durable_url, "/tmp/durable");
  EXPECT_TRUE(c->config.verify_on_seal);
  EXPECT_EQ(c->config.node_id, "from-flag");
}

TEST(ConfigTest, BadConfigFileIsAnError) {
  TempDir dir;
  const std::string file = dir.Sub("agent.ini");
  ASSERT_TRUE(WriteFileAtomic(file, "keep-last = zero\n", false).ok());
  Result<CommandLine> c = Parse({"--config", file});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("keep-last"), std::string::npos) << c.status().ToString();
  Result<CommandLine> missing = Parse({"--config", dir.Sub("absent.ini")});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("absent.ini"), std::string::npos) << missing.status().ToString();
}

TEST(ConfigTest, DefaultSocketFollowsTheEnvironment) {
  const char* old_sock = std::getenv("TIERCKPT_SOCKET");
  const char* old_xdg = std::getenv("XDG_RUNTIME_DIR");
  std::string saved_sock = old_sock ? old_sock : "";
  std::string saved_xdg = old_xdg ? old_xdg : "";
  ::setenv("TIERCKPT_SOCKET", "/tmp/explicit.sock", 1);
  EXPECT_EQ(wire::DefaultSocketPath(), "/tmp/explicit.sock");
  ::unsetenv("TIERCKPT_SOCKET");
  ::setenv("XDG_RUNTIME_DIR", "/run/user/42", 1);
  EXPECT_EQ(wire::DefaultSocketPath(), "/run/user/42/tierckpt/agent.sock");
  ::unsetenv("XDG_RUNTIME_DIR");
  // Root's default is under /run, which no other user can claim first.
  EXPECT_EQ(wire::DefaultSocketPath(), ::geteuid() == 0
                                           ? std::string("/run/tierckpt/agent.sock")
                                           : "/tmp/tierckpt-" + std::to_string(::geteuid()) + "/agent.sock");
  if (old_sock) ::setenv("TIERCKPT_SOCKET", saved_sock.c_str(), 1);
  if (old_xdg) ::setenv("XDG_RUNTIME_DIR", saved_xdg.c_str(), 1);
}

TEST(ConfigTest, PrepareSocketDirCreatesAPrivateDirectory) {
  TempDir dir;
  const std::string sock = dir.Sub("a/b/agent.sock");
  ASSERT_TRUE(PrepareSocketDir(sock).ok());
  struct stat st;
  ASSERT_EQ(::stat(dir.Sub("a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Regression (issue 16, item 9): the agent listened in a socket directory
// that others could write, where another user can plant an impostor.
TEST(ConfigTest, PrepareSocketDirRefusesADirectoryOthersMayWrite) {
  TempDir dir;
  ASSERT_TRUE(MakeDirs(dir.Sub("open"), 0700).ok());
  ASSERT_EQ(::chmod(dir.Sub("open").c_str(), 0777), 0);
  Status s = PrepareSocketDir(dir.Sub("open/agent.sock"));
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("open/agent.sock"), std::string::npos) << s.message();
  if (::geteuid() != 0) return;
  ASSERT_EQ(::chmod(dir.Sub("open").c_str(), 0700), 0);
  ASSERT_EQ(::chown(dir.Sub("open").c_str(), 65534, 65534), 0);  // another user's directory
  Status foreign = PrepareSocketDir(dir.Sub("open/agent.sock"));
  EXPECT_EQ(foreign.code(), Code::kPermissionDenied) << foreign.ToString();
  EXPECT_NE(foreign.message().find("uid 65534"), std::string::npos) << foreign.message();
}

}  // namespace
}  // namespace tierckpt::agent
