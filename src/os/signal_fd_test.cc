// signal_fd.h: a blocked signal arrives through the fd, once, and reading
// with nothing pending does not block.
#include "os/signal_fd.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

namespace tierckpt {
namespace {

TEST(SignalFdTest, ABlockedSignalIsReadFromTheFd) {
  Result<SignalFd> sfd = SignalFd::Open({SIGUSR1, SIGUSR2}, "SIGUSR1/SIGUSR2");
  ASSERT_TRUE(sfd.ok()) << sfd.status().ToString();
  EXPECT_FALSE(sfd->ReadSignal().has_value());              // nothing pending: no block
  ASSERT_EQ(::pthread_kill(::pthread_self(), SIGUSR2), 0);  // would end the test if not blocked
  pollfd p{sfd->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  EXPECT_EQ(sfd->ReadSignal(), SIGUSR2);
  EXPECT_FALSE(sfd->ReadSignal().has_value());
  EXPECT_FALSE(SignalFd().ReadSignal().has_value());
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGUSR2);
  ASSERT_EQ(::pthread_sigmask(SIG_UNBLOCK, &set, nullptr), 0);
}

}  // namespace
}  // namespace tierckpt
