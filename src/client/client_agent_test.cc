// Client against a real tierckptd process: the save → commit → open →
// verify round trip, corruption detection, mapping reuse across saves, and
// what a client sees when the agent dies.
//
// The agent binary comes from $TIERCKPT_AGENT_BIN, else the path CMake
// passes in TIERCKPT_AGENT_BIN_DEFAULT (the tierckptd target). The tests skip
// only when neither names an existing file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/checksum.h"
#include "os/files.h"
#include "tierckpt/client.h"

#ifndef TIERCKPT_AGENT_BIN_DEFAULT
#define TIERCKPT_AGENT_BIN_DEFAULT ""
#endif

namespace tierckpt {
namespace {

std::string AgentBinary() {
  const char* env = std::getenv("TIERCKPT_AGENT_BIN");
  std::string bin = env != nullptr && *env != '\0' ? env : TIERCKPT_AGENT_BIN_DEFAULT;
  if (bin.empty() || ::access(bin.c_str(), X_OK) != 0) return "";
  return bin;
}

std::vector<uint8_t> Pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<uint8_t>(x);
  }
  return v;
}

class ClientAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bin_ = AgentBinary();
    if (bin_.empty()) {
      GTEST_SKIP() << "tierckptd is not built (set TIERCKPT_AGENT_BIN or build the tierckptd target)";
    }
    std::string tmpl = "/tmp/tc_client_agent_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::string shm =
        (::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + std::string("/tc_client_root_XXXXXX");
    ASSERT_NE(::mkdtemp(shm.data()), nullptr);
    root_ = shm;
    socket_ = dir_ + "/agent.sock";
    StartAgent();
  }

  void TearDown() override {
    StopAgent(SIGTERM);
    if (!root_.empty()) RemoveTree(root_).IgnoreError();
    if (!dir_.empty()) RemoveTree(dir_).IgnoreError();
  }

  void StartAgent() {
    std::vector<std::string> args = {
        bin_,     "--socket",  socket_,           "--root",      root_, "--memory-budget",
        "256MiB", "--durable", dir_ + "/durable", "--keep-last", "2"};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/agent.log";
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "tierckptd exited at start; its log:\n" << ReadFileToString(log, 1 << 20).value();
      }
      if (Client::Connect(Options()).ok()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "tierckptd did not answer on " << socket_;
  }

  void StopAgent(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    for (int i = 0; i < 400; ++i) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  ClientOptions Options() const {
    ClientOptions o;
    o.socket_path = socket_;
    o.client_name = "client_agent_test";
    return o;
  }

  std::unique_ptr<Client> ConnectOrDie() {
    auto c = Client::Connect(Options());
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  std::string bin_, dir_, root_, socket_;
  pid_t pid_ = -1;
};

// Issue 18: with protect_sealed, a write through the kept mapping of a
// sealed object faults (it would change the step's bytes behind its
// checksum); the step commits unchanged. Without it (the default) nothing
// changes for writers.
TEST_F(ClientAgentTest, ProtectSealedMakesAStrayWriteAfterSealFault) {
  ClientOptions o = Options();
  o.protect_sealed = true;
  auto c = Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE((*c)->BeginStep("job", 1).ok());
  auto obj = (*c)->CreateObject("job", 1, "a.bin", 1 << 20);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  std::memset(obj->data(), 7, obj->size());
  ASSERT_TRUE((*c)->Seal(*obj).ok());
  EXPECT_EQ(obj->data()[123], 7);  // still readable
  EXPECT_DEATH({ static_cast<volatile uint8_t*>(obj->data())[123] = 8; }, "");
  auto m = (*c)->Commit("job", 1, {.world_size = 1});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::vector<uint8_t> want(1 << 20, 7);
  const std::string sum = ComputeChecksum(want.data(), want.size()).ToString();
  // Sealed without a checksum: the commit may answer before the agent's hash
  // (--commit-before-hash); Show waits for it.
  EXPECT_TRUE(m->Find("a.bin")->checksum.empty() ? m->checksums_pending : m->Find("a.bin")->checksum == sum);
  auto shown = (*c)->Show("job", 1);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_FALSE(shown->checksums_pending);
  EXPECT_EQ(shown->Find("a.bin")->checksum, sum);

  auto plain = ConnectOrDie();
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(plain->BeginStep("job", 2).ok());
  auto w = plain->CreateObject("job", 2, "b.bin", 4096);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_TRUE(plain->Seal(*w).ok());
  w->data()[0] = 1;  // unprotected: no fault (and the contract says: never do this)
}

TEST_F(ClientAgentTest, SaveCommitOpenVerifyRoundTrip) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->node_id().empty());
  EXPECT_EQ(c->socket_path(), socket_);
  EXPECT_FALSE(c->durable_base().empty());

  const std::vector<uint8_t> a = Pattern(3 << 20, 1), b = Pattern(4096 + 7, 2), e;
  ASSERT_TRUE(c->BeginStep("job", 10).ok());
  std::vector<ObjectSource> src = {
      {"a.bin", a.data(), a.size()}, {"dir/b.bin", b.data(), b.size()}, {"empty", e.data(), 0}};
  Status w = c->WriteObjects("job", 10, src);
  ASSERT_TRUE(w.ok()) << w.ToString();
  auto m = c->Commit("job", 10, {.world_size = 1});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->objects.size(), 3u);
  const ObjectEntry* ea = m->Find("a.bin");
  ASSERT_NE(ea, nullptr);
  EXPECT_EQ(ea->size, a.size());
  EXPECT_EQ(ea->checksum, ComputeChecksum(a.data(), a.size()).ToString());
  EXPECT_EQ(m->world_size, 1u);

  auto list = c->List("job");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].step, 10u);
  EXPECT_EQ((*list)[0].memory, "committed");
  EXPECT_EQ((*list)[0].objects, 3u);
  EXPECT_EQ((*list)[0].bytes, a.size() + b.size());
  auto latest = c->LatestStep("job");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(*latest, 10u);
  EXPECT_EQ(c->LatestStep("nobody").status().code(), Code::kNotFound);

  auto shown = c->Show("job", 10);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->ToJson(), m->ToJson());

  auto view = c->Open("job", 10, "a.bin");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->size(), a.size());
  EXPECT_EQ(view->checksum(), ea->checksum);
  EXPECT_TRUE(view->Verify().ok());
  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(view->CopyTo(out.data(), out.size()).ok());
  EXPECT_EQ(out, a);
  EXPECT_EQ(view->CopyTo(out.data(), out.size() - 1).code(), Code::kInvalidArgument);

  std::vector<uint8_t> out_b(b.size());
  Status r = c->ReadObjects("job", 10, {{"dir/b.bin", out_b.data(), out_b.size()}, {"empty", nullptr, 0}});
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_EQ(out_b, b);
  Status wrong = c->ReadObjects("job", 10, {{"dir/b.bin", out_b.data(), 1}});
  EXPECT_EQ(wrong.code(), Code::kInvalidArgument);
  EXPECT_NE(wrong.message().find("dir/b.bin"), std::string::npos);

  EXPECT_EQ(c->Open("job", 10, "missing").status().code(), Code::kNotFound);
  auto verify = c->Verify("job", 10);
  ASSERT_TRUE(verify.ok()) << verify.status().ToString();
  auto stats = c->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
}

TEST_F(ClientAgentTest, CorruptedObjectIsCorruptionNamingIt) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const std::vector<uint8_t> a = Pattern(1 << 20, 3);
  ASSERT_TRUE(c->BeginStep("job", 1).ok());
  ASSERT_TRUE(c->WriteObject("job", 1, "a.bin", a.data(), a.size()).ok());
  ASSERT_TRUE(c->Commit("job", 1, {}).ok());

  // Flip one byte of the committed file behind the agent's back.
  const std::string path = root_ + "/ns/job/step_0000000001/a.bin";
  auto fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString() << " (has the memory-tier layout changed?)";
  uint8_t byte = static_cast<uint8_t>(a[12345] ^ 0xff);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, 12345, path).ok());

  Result<ObjectView> view = c->Open("job", 1, "a.bin");
  Status s = view.ok() ? view->Verify() : view.status();
  EXPECT_EQ(s.code(), Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("job/1/a.bin"), std::string::npos) << s.message();
  if (view.ok()) {
    std::vector<uint8_t> out(a.size());
    Status copy = view->CopyTo(out.data(), out.size());
    EXPECT_EQ(copy.code(), Code::kCorruption);
    EXPECT_NE(copy.message().find("in the memory tier is corrupt"), std::string::npos) << copy.message();
  }
  std::vector<uint8_t> out(a.size());
  EXPECT_EQ(c->ReadObjects("job", 1, {{"a.bin", out.data(), out.size()}}).code(), Code::kCorruption);
  // The agent re-hashes its copy, finds it corrupt, and has nothing to replace it with.
  Result<ObjectView> verified = c->OpenVerified("job", 1, "a.bin");
  ASSERT_EQ(verified.status().code(), Code::kCorruption) << verified.status().ToString();
  EXPECT_NE(verified.status().message().find("no other tier holds job/1"), std::string::npos)
      << verified.status().message();
}

// OpenToCopy leaves the hash to the copy (decision 156): a sound object is
// copied and verified in one pass; a corrupt one is copied, then refused, and
// OpenVerified has the agent repair it.
TEST_F(ClientAgentTest, OpenToCopyVerifiesInTheCopysPassAndRefusesACorruptCopy) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const std::vector<uint8_t> a = Pattern((3 << 20) + 5, 9);
  ASSERT_TRUE(c->BeginStep("job", 3).ok());
  ASSERT_TRUE(c->WriteObject("job", 3, "a.bin", a.data(), a.size()).ok());
  CommitOptions options;
  options.persist = true;
  ASSERT_TRUE(c->Commit("job", 3, options).ok());
  ASSERT_TRUE(c->WaitDurable("job", 3, std::chrono::seconds(60)).ok());

  std::vector<uint8_t> head(1000), tail(2000);
  const std::vector<CopyRun> runs = {{a.size() - 2000, reinterpret_cast<uintptr_t>(tail.data()), 2000},
                                     {0, reinterpret_cast<uintptr_t>(head.data()), 1000}};
  Result<ObjectView> view = c->OpenToCopy("job", 3, "a.bin");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_TRUE(view->hash_due());
  EXPECT_EQ(c->read_counters().hashed, 1u);
  ASSERT_TRUE(CopyOut(*view, runs.data(), runs.size()).ok());
  EXPECT_FALSE(view->hash_due());
  EXPECT_TRUE(std::equal(head.begin(), head.end(), a.begin()));
  EXPECT_TRUE(std::equal(tail.begin(), tail.end(), a.end() - 2000));
  EXPECT_TRUE(view->Unchanged().ok());
  *view = ObjectView();

  // A byte flipped at rest where no run reads: the hash of the whole object finds it.
  const std::string path = root_ + "/ns/job/step_0000000003/a.bin";
  auto fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  const uint8_t byte = static_cast<uint8_t>(a[(1 << 20) + 3] ^ 0xff);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, (1 << 20) + 3, path).ok());
  view = c->OpenToCopy("job", 3, "a.bin");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const Status copied = CopyOut(*view, runs.data(), runs.size());
  EXPECT_EQ(copied.code(), Code::kCorruption) << copied.ToString();
  EXPECT_NE(copied.message().find("job/3/a.bin in the memory tier is corrupt"), std::string::npos)
      << copied.message();
  EXPECT_TRUE(view->hash_due()) << "a view that failed its hash must not read as verified";
  *view = ObjectView();
  view = c->OpenVerified("job", 3, "a.bin");  // the agent repairs its copy from the durable tier
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->repaired().empty());
  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(view->CopyTo(out.data(), out.size()).ok());
  EXPECT_EQ(out, a);

  // Not due under kNever: CopyOut copies as opened.
  view = c->OpenToCopy("job", 3, "a.bin", ReadVerify::Never());
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->hash_due());
  EXPECT_EQ(c->read_counters().unverified, 1u);
}

TEST_F(ClientAgentTest, OpenVerifiedHasTheAgentReplaceACorruptCopyFromTheDurableTier) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const std::vector<uint8_t> a = Pattern(1 << 20, 5);
  ASSERT_TRUE(c->BeginStep("job", 2).ok());
  ASSERT_TRUE(c->WriteObject("job", 2, "a.bin", a.data(), a.size()).ok());
  CommitOptions options;
  options.persist = true;
  ASSERT_TRUE(c->Commit("job", 2, options).ok());
  ASSERT_TRUE(c->WaitDurable("job", 2, std::chrono::seconds(60)).ok());
  const std::string path = root_ + "/ns/job/step_0000000002/a.bin";
  auto fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  uint8_t byte = static_cast<uint8_t>(a[777] ^ 0xff);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, 777, path).ok());

  Result<ObjectView> view = c->OpenVerified("job", 2, "a.bin");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_NE(view->repaired().find("memory copy of object job/2/a.bin is corrupt"), std::string::npos)
      << view->repaired();
  EXPECT_NE(view->repaired().find("durable tier"), std::string::npos) << view->repaired();
  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(view->CopyTo(out.data(), out.size()).ok());
  EXPECT_EQ(out, a);
  view = c->OpenVerified("job", 2, "a.bin");  // sound now: nothing replaced
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_TRUE(view->repaired().empty()) << view->repaired();
}

TEST_F(ClientAgentTest, SteadyStateSavesReuseMappedSegments) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const size_t size = 4 << 20;
  const std::vector<uint8_t> data = Pattern(size, 4);
  std::vector<const uint8_t*> addresses;
  for (uint64_t step = 1; step <= 6; ++step) {
    ASSERT_TRUE(c->BeginStep("steady", step).ok());
    auto obj = c->CreateObject("steady", step, "shard", size);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    addresses.push_back(obj->data());
    std::memcpy(obj->data(), data.data(), size);
    ASSERT_TRUE(c->Seal(*obj).ok());
    EXPECT_EQ(obj->data(), addresses.back());  // reserved until the object is destroyed
    EXPECT_EQ(c->Seal(*obj).code(), Code::kFailedPrecondition);
    auto m = c->Commit("steady", step, {});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
  }
  // keep-last 2: from the third save on, the agent recycles the segments of
  // evicted steps, and the client must write through its existing mappings.
  size_t reused = 0;
  for (size_t i = 3; i < addresses.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (addresses[i] == addresses[j]) {
        ++reused;
        break;
      }
    }
  }
  EXPECT_GE(reused, 2u) << "steady-state saves did not reuse mappings of recycled segments";
  auto view = c->Open("steady", 6, "shard");
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->Verify().ok());
}

// A view held across its step's eviction: the agent recycles the file for a
// later save's object, and Unchanged() reports it before its bytes are trusted.
TEST_F(ClientAgentTest, UnchangedReportsAViewWhoseFileWasRecycled) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const size_t size = 1 << 20;
  auto save = [&](uint64_t step, uint8_t seed) {
    ASSERT_TRUE(c->BeginStep("recycled", step).ok());
    auto obj = c->CreateObject("recycled", step, "shard", size);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    const std::vector<uint8_t> data = Pattern(size, seed);
    std::memcpy(obj->data(), data.data(), size);
    ASSERT_TRUE(c->Seal(*obj).ok());
    ASSERT_TRUE(c->Commit("recycled", step, {}).ok());
  };
  save(1, 1);
  auto view = c->Open("recycled", 1, "shard");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->Verify().ok());
  EXPECT_TRUE(view->Unchanged().ok());
  // keep-last 2: step 3's save evicts step 1, whose segment a later save reuses.
  for (uint64_t step = 2; step <= 5; ++step) save(step, static_cast<uint8_t>(step));
  Status st = view->Unchanged();
  EXPECT_EQ(st.code(), Code::kCorruption) << st.ToString();
  EXPECT_NE(st.message().find("recycled/1/shard"), std::string::npos) << st.message();
  // A fresh view of a live step is unchanged.
  auto live = c->Open("recycled", 5, "shard");
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->Unchanged().ok());
}

TEST_F(ClientAgentTest, AbortDropsTheStep) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->BeginStep("job", 5).ok());
  auto obj = c->CreateObject("job", 5, "x", 100);
  ASSERT_TRUE(obj.ok());
  ASSERT_TRUE(c->Abort("job", 5).ok());
  auto list = c->List("job");
  ASSERT_TRUE(list.ok());
  for (const StepSummary& s : *list) EXPECT_NE(s.memory, "committed") << s.step;
  EXPECT_FALSE(c->Commit("job", 5, {}).ok());
}

TEST_F(ClientAgentTest, CreateNextObjectSkipsTheNamesAnEarlierAttemptSealed) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const ObjectNamePattern from0{"__0_", 0, ".distcp"};
  for (uint64_t want = 0; want < 2; ++want) {  // an attempt that sealed __0_0 and __0_1
    uint64_t index = 99;
    auto obj = c->CreateNextObject("job", 7, {"__0_", want, ".distcp"}, 10, &index);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    EXPECT_EQ(index, want);
    EXPECT_EQ(obj->name(), "__0_" + std::to_string(want) + ".distcp");
    ASSERT_TRUE(c->Seal(*obj).ok());
  }
  // The next attempt counts from 0 again: the agent skips the sealed names.
  uint64_t index = 99;
  auto next = c->CreateNextObject("job", 7, from0, 10, &index);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(index, 2u);
  EXPECT_EQ(next->name(), "__0_2.distcp");
  // An unsealed object is no obstacle: it is replaced, as CreateObject does.
  auto again = c->CreateNextObject("job", 7, {"__0_", 2, ".distcp"}, 10, &index);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(index, 2u);
  ASSERT_TRUE(c->Seal(*again).ok());
  auto m = c->Commit("job", 7, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->objects.size(), 3u);

  // A committed step is refused at once, not as "every name is sealed".
  auto committed = c->CreateNextObject("job", 7, from0, 10);
  ASSERT_EQ(committed.status().code(), Code::kAlreadyExists);
  EXPECT_NE(committed.status().message().find("already committed"), std::string::npos)
      << committed.status().ToString();
  // So is a step another writer owns.
  ClientOptions other = Options();
  other.writer_id = "job-b";
  auto b = Client::Connect(other);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ASSERT_TRUE(c->BeginStep("job", 8).ok());
  auto owned = (*b)->CreateNextObject("job", 8, from0, 10);
  ASSERT_EQ(owned.status().code(), Code::kAlreadyExists);
  EXPECT_NE(owned.status().message().find("being written by"), std::string::npos)
      << owned.status().ToString();
  // 64 sealed names are the end of the search.
  for (uint64_t n = 0; n < 64; ++n) {
    auto obj = c->CreateObject("job", 8, "__0_" + std::to_string(n) + ".distcp", 1);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    ASSERT_TRUE(c->Seal(*obj).ok());
  }
  auto full = c->CreateNextObject("job", 8, from0, 1);
  ASSERT_EQ(full.status().code(), Code::kAlreadyExists);
  EXPECT_NE(full.status().message().find("are sealed in step"), std::string::npos)
      << full.status().ToString();
  auto past = c->CreateNextObject("job", 8, {"__0_", 1, ".distcp"}, 1, &index);
  ASSERT_TRUE(past.ok()) << past.status().ToString();
  EXPECT_EQ(index, 64u);
}

TEST_F(ClientAgentTest, BeginSaveAbortsOnlyTheStepsAnEarlierFailedSaveOfThisConnectionLeft) {
  auto c = ConnectOrDie();
  auto other = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  ASSERT_NE(other, nullptr);
  auto memory_state = [&](uint64_t step) -> std::string {
    auto list = c->List("job");
    EXPECT_TRUE(list.ok()) << list.status().ToString();
    if (list.ok()) {
      for (const StepSummary& s : *list) {
        if (s.step == step) return s.memory;
      }
    }
    return "absent";
  };
  auto seal_one = [](Client& client, uint64_t step) {
    auto obj = client.CreateNextObject("job", step, {"__0_", 0, ".distcp"}, 16);
    ASSERT_TRUE(obj.ok()) << obj.status().ToString();
    ASSERT_TRUE(client.Seal(*obj).ok());
  };
  // Step 1: this connection sealed an object, the save failed elsewhere.
  ASSERT_TRUE(c->BeginSave("job", 1).ok());
  seal_one(*c, 1);
  // Step 2: committed. Step 3: another connection's half-written step.
  ASSERT_TRUE(c->BeginSave("job", 2).ok());
  EXPECT_EQ(memory_state(1), "absent");
  seal_one(*c, 2);
  ASSERT_TRUE(c->Commit("job", 2, {}).ok());
  ASSERT_TRUE(other->BeginStep("job", 3).ok());
  seal_one(*other, 3);
  // Beginning step 4 twice keeps step 4's own objects.
  ASSERT_TRUE(c->BeginSave("job", 4).ok());
  seal_one(*c, 4);
  ASSERT_TRUE(c->BeginSave("job", 4).ok());
  EXPECT_EQ(memory_state(2), "committed");
  EXPECT_EQ(memory_state(3), "writing");
  EXPECT_EQ(memory_state(4), "writing");
  ASSERT_TRUE(c->Commit("job", 4, {}).ok());
  // A plain BeginStep aborts nothing.
  ASSERT_TRUE(c->BeginStep("job", 5).ok());
  seal_one(*c, 5);
  ASSERT_TRUE(c->BeginStep("job", 6).ok());
  EXPECT_EQ(memory_state(5), "writing");
  // Nor do objects created by name (CreateObject): only CreateNextObject records the step.
  auto named = c->CreateObject("job", 9, "by-name", 16);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  ASSERT_TRUE(c->Seal(*named).ok());
  ASSERT_TRUE(c->BeginSave("job", 10).ok());
  EXPECT_EQ(memory_state(9), "writing");
  EXPECT_EQ(memory_state(5), "absent");  // recorded by CreateNextObject: aborted now
}

TEST_F(ClientAgentTest, BeginSaveCreateNextBeginsTheSaveAndCreatesItsObjectInOneRequest) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  // Step 1 is left half-written by this connection (a failed save).
  auto left = c->CreateNextObject("job", 1, {"__0_", 0, ".distcp"}, 16);
  ASSERT_TRUE(left.ok()) << left.status().ToString();
  ASSERT_TRUE(c->Seal(*left).ok());
  uint64_t index = 99;
  auto obj = c->BeginSaveCreateNext("job", 2, {"__0_", 0, ".distcp"}, 16, &index);
  ASSERT_TRUE(obj.ok()) << obj.status().ToString();
  EXPECT_EQ(obj->name(), "__0_0.distcp");
  EXPECT_EQ(index, 0u);
  ASSERT_TRUE(c->Seal(*obj).ok());
  auto m = c->Commit("job", 2, {});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto list = c->List("job");
  ASSERT_TRUE(list.ok());
  for (const StepSummary& s : *list) EXPECT_NE(s.step, 1u) << "the leftover step 1 was not aborted";
  // A committed step is refused as BeginSave refuses it.
  auto again = c->BeginSaveCreateNext("job", 2, {"__0_", 0, ".distcp"}, 16);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), Code::kAlreadyExists) << again.status().ToString();
}

TEST_F(ClientAgentTest, PersistAndWaitDurable) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  const std::vector<uint8_t> a = Pattern(1 << 20, 5);
  ASSERT_TRUE(c->BeginStep("dur", 7).ok());
  ASSERT_TRUE(c->WriteObject("dur", 7, "a.bin", a.data(), a.size()).ok());
  ASSERT_TRUE(c->Commit("dur", 7, {.persist = true}).ok());
  Status w = c->WaitDurable("dur", 7, std::chrono::seconds(60));
  ASSERT_TRUE(w.ok()) << w.ToString();
  auto list = c->List("dur");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].durable, "committed");

  // Drop the memory copy: Open restores the step from durable.
  ASSERT_TRUE(c->DeleteStep("dur", 7, /*durable_too=*/false).ok());
  auto view = c->Open("dur", 7, "a.bin");
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(view->CopyTo(out.data(), out.size()).ok());
  EXPECT_EQ(out, a);
}

TEST_F(ClientAgentTest, DeadAgentMakesTheConnectionUnavailable) {
  auto c = ConnectOrDie();
  ASSERT_NE(c, nullptr);
  StopAgent(SIGKILL);
  Status first = c->BeginStep("job", 1);
  EXPECT_EQ(first.code(), Code::kUnavailable) << first.ToString();
  Status later = c->List("").status();
  EXPECT_EQ(later.code(), Code::kUnavailable) << later.ToString();
  EXPECT_NE(later.message().find(socket_), std::string::npos) << later.message();
  auto again = Client::Connect(Options());
  EXPECT_EQ(again.status().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace tierckpt

namespace tierckpt {
namespace {

// Issue 18, attested reads: the agent reports how long ago it verified an
// object; ReadVerify::Attested skips the client's hash only when that is
// within its limit, and hashes objects the agent never verified (a client
// checksum it trusted) or verified too long ago. read_counters() shows which.
TEST_F(ClientAgentTest, AttestedReadsSkipTheHashOnlyWhenTheAgentVerifiedRecently) {
  ClientOptions o = Options();
  o.client_checksum = false;  // the agent hashes after seal: verified at commit
  auto agent_hashed = Client::Connect(o);
  ASSERT_TRUE(agent_hashed.ok()) << agent_hashed.status().ToString();
  Client& c = **agent_hashed;
  const std::vector<uint8_t> a = Pattern(1 << 20, 7);
  ASSERT_TRUE(c.BeginStep("att", 1).ok());
  ASSERT_TRUE(c.WriteObject("att", 1, "a.bin", a.data(), a.size()).ok());
  ASSERT_TRUE(c.Commit("att", 1, {}).ok());

  const ReadVerify fresh = ReadVerify::Attested(std::chrono::minutes(15));
  Result<ObjectView> view = c.OpenVerified("att", 1, "a.bin", fresh);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_TRUE(view->verified_age().has_value());
  EXPECT_LT(view->verified_age()->count(), 60'000);
  EXPECT_EQ(c.read_counters().attested, 1u);
  EXPECT_EQ(c.read_counters().hashed, 0u);
  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(c.ReadObjects("att", 1, {{"a.bin", out.data(), out.size()}}, fresh).ok());
  EXPECT_EQ(out, a);
  EXPECT_EQ(c.read_counters().attested, 2u);
  EXPECT_EQ(c.read_counters().hashed, 0u);

  // Stale: verified longer ago than the limit allows.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const ReadVerify strict = ReadVerify::Attested(std::chrono::milliseconds(5));
  ASSERT_TRUE(c.OpenVerified("att", 1, "a.bin", strict).ok());
  std::fill(out.begin(), out.end(), 0);
  ASSERT_TRUE(c.ReadObjects("att", 1, {{"a.bin", out.data(), out.size()}}, strict).ok());
  EXPECT_EQ(out, a);
  EXPECT_EQ(c.read_counters().hashed, 2u);
  // The default stays kAlways: it hashes a fresh object too.
  ASSERT_TRUE(c.OpenVerified("att", 1, "a.bin").ok());
  EXPECT_EQ(c.read_counters().hashed, 3u);
  EXPECT_EQ(c.read_counters().attested, 2u);

  // Never verified by the agent: a client checksum it trusted.
  auto trusted = ConnectOrDie();
  ASSERT_NE(trusted, nullptr);
  ASSERT_TRUE(trusted->BeginStep("att", 2).ok());
  ASSERT_TRUE(trusted->WriteObject("att", 2, "a.bin", a.data(), a.size()).ok());
  ASSERT_TRUE(trusted->Commit("att", 2, {}).ok());
  view = trusted->OpenVerified("att", 2, "a.bin", fresh);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_FALSE(view->verified_age().has_value());
  EXPECT_EQ(trusted->read_counters().hashed, 1u);
  EXPECT_EQ(trusted->read_counters().attested, 0u);
  // A Verify request re-hashes it: verified now, attested from then on.
  ASSERT_TRUE(trusted->Verify("att", 2).ok());
  view = trusted->OpenVerified("att", 2, "a.bin", fresh);
  ASSERT_TRUE(view.ok());
  EXPECT_TRUE(view->verified_age().has_value());
  EXPECT_EQ(trusted->read_counters().attested, 1u);
  // kNever hashes nothing.
  ASSERT_TRUE(trusted->OpenVerified("att", 2, "a.bin", ReadVerify::Never()).ok());
  EXPECT_EQ(trusted->read_counters().unverified, 1u);
  EXPECT_EQ(trusted->read_counters().hashed, 1u);
}

// A stale attestation is re-hashed, so a flip at rest after the agent's
// verification is still found (and repaired from the durable tier).
TEST_F(ClientAgentTest, AStaleAttestationIsHashedAndFindsAFlipAtRest) {
  ClientOptions o = Options();
  o.client_checksum = false;
  auto client = Client::Connect(o);
  ASSERT_TRUE(client.ok());
  Client& c = **client;
  const std::vector<uint8_t> a = Pattern(1 << 20, 9);
  ASSERT_TRUE(c.BeginStep("att", 3).ok());
  ASSERT_TRUE(c.WriteObject("att", 3, "a.bin", a.data(), a.size()).ok());
  CommitOptions persist;
  persist.persist = true;
  ASSERT_TRUE(c.Commit("att", 3, persist).ok());
  ASSERT_TRUE(c.WaitDurable("att", 3, std::chrono::seconds(60)).ok());
  const std::string path = root_ + "/ns/att/step_0000000003/a.bin";
  auto fd = OpenFile(path, O_RDWR);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  uint8_t byte = static_cast<uint8_t>(a[4242] ^ 0xff);
  ASSERT_TRUE(PwriteAll(fd->get(), &byte, 1, 4242, path).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  std::vector<uint8_t> out(a.size());
  ASSERT_TRUE(c.ReadObjects("att", 3, {{"a.bin", out.data(), out.size()}},
                            ReadVerify::Attested(std::chrono::milliseconds(5)))
                  .ok());
  EXPECT_EQ(out, a);
  EXPECT_EQ(c.read_counters().hashed, 1u);
}

}  // namespace
}  // namespace tierckpt
