// process.h: a child's exit status, redirected stdio, an exec failure,
// waiting with a timeout, signals, a new session, and the destructor's kill.
#include "os/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "os/files.h"

namespace tierckpt {
namespace {

SpawnOptions Sh(const std::string& script) {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", script};
  return o;
}

TEST(ProcessTest, WaitReturnsTheExitStatus) {
  Result<Child> c = Child::Spawn(Sh("exit 3"));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_GT(c->pid(), 0);
  Result<ExitStatus> st = c->Wait();
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_FALSE(st->signaled);
  EXPECT_EQ(st->code, 3);
  EXPECT_EQ(st->Describe(), "with status 3");
  EXPECT_FALSE(c->running());
  EXPECT_EQ(c->Poll().status().code(), Code::kFailedPrecondition);  // reaped
}

TEST(ProcessTest, StdioIsRedirectedAndAnExecFailureIsReported) {
  char tmpl[] = "/tmp/tc_process_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string out = JoinPath(tmpl, "out");
  Result<UniqueFd> fd = OpenFile(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
  ASSERT_TRUE(fd.ok());
  SpawnOptions o = Sh("echo hello; echo oops >&2");
  o.stdout_fd = fd->get();
  o.stderr_fd = fd->get();
  Result<Child> c = Child::Spawn(o);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->Wait()->code, 0);
  EXPECT_EQ(*ReadFileToString(out, 1000), "hello\noops\n");

  SpawnOptions bad;
  bad.argv = {JoinPath(tmpl, "no-such-program")};
  bad.stderr_fd = fd->get();
  bad.exec_failure_prefix = "test: exec failed: ";
  Result<Child> b = Child::Spawn(bad);
  ASSERT_TRUE(b.ok());
  Result<ExitStatus> st = b->Wait();
  EXPECT_EQ(st->code, 127);
  EXPECT_NE(ReadFileToString(out, 1000)->find("test: exec failed: No such file or directory\n"),
            std::string::npos);
  ASSERT_TRUE(RemoveTree(tmpl).ok());
}

TEST(ProcessTest, WaitForTimesOutThenASignalEndsTheChild) {
  Result<Child> c = Child::Spawn(Sh("exec sleep 30"));
  ASSERT_TRUE(c.ok());
  Result<std::optional<ExitStatus>> early = c->WaitFor(std::chrono::milliseconds(50));
  ASSERT_TRUE(early.ok());
  EXPECT_FALSE(early->has_value());
  EXPECT_TRUE(c->running());
  ASSERT_TRUE(c->Signal(SIGTERM).ok());
  Result<std::optional<ExitStatus>> done = c->WaitFor(std::chrono::seconds(10));
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_TRUE((*done)->signaled);
  EXPECT_EQ((*done)->signal, SIGTERM);
  EXPECT_EQ((*done)->ShellCode(), 128 + SIGTERM);
  EXPECT_EQ(c->Signal(SIGTERM).code(), Code::kFailedPrecondition);
}

TEST(ProcessTest, SearchPathAndNewSession) {
  SpawnOptions o;
  o.argv = {"sleep", "30"};
  o.search_path = true;
  o.new_session = true;
  Result<Child> c = Child::Spawn(o);
  ASSERT_TRUE(c.ok());
  bool leads = false;
  for (int i = 0; i < 200 && !leads; ++i) {
    leads = ::getsid(c->pid()) == c->pid();
    if (!leads) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(leads);
  EXPECT_NE(::getsid(0), c->pid());
}

TEST(ProcessTest, DestroyingAChildKillsAndReapsItUnlessDetached) {
  pid_t pid = -1;
  {
    Result<Child> c = Child::Spawn(Sh("exec sleep 30"));
    ASSERT_TRUE(c.ok());
    pid = c->pid();
  }
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);  // gone, and reaped (a zombie would answer)
  EXPECT_EQ(errno, ESRCH);

  Result<Child> d = Child::Spawn(Sh("exec sleep 30"));
  ASSERT_TRUE(d.ok());
  const pid_t kept = d->Detach();
  d = Result<Child>(Child());
  EXPECT_EQ(::kill(kept, 0), 0);  // still running
  ::kill(kept, SIGKILL);
  int st = 0;
  EXPECT_EQ(::waitpid(kept, &st, 0), kept);
}

TEST(ProcessTest, SelfExecutableAndExecReplaceFailure) {
  Result<std::string> self = SelfExecutablePath();
  ASSERT_TRUE(self.ok());
  EXPECT_NE(self->find("tc_os_test"), std::string::npos);
  Status s = ExecReplace({"/nonexistent/program"});
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_NE(s.message().find("exec /nonexistent/program"), std::string::npos);
}

}  // namespace
}  // namespace tierckpt
