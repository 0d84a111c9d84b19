// descriptors.h: the eventfd wakes a poller once signalled, and
// AcceptConnection hands back the connection or the errno.
#include "os/descriptors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "os/files.h"

namespace tierckpt {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

TEST(DescriptorsTest, AnEventFdIsReadableOnceSignalledAndStaysNonBlocking) {
  Result<UniqueFd> fd = OpenEventFd("a test eventfd");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  EXPECT_FALSE(Readable(fd->get()));
  SignalEventFd(fd->get());
  SignalEventFd(fd->get());
  EXPECT_TRUE(Readable(fd->get()));
  EXPECT_NE(::fcntl(fd->get(), F_GETFL) & O_NONBLOCK, 0);
  EXPECT_NE(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, 0);
}

TEST(DescriptorsTest, AcceptConnectionReturnsTheConnectionOrTheErrno) {
  char tmpl[] = "/tmp/tc_descriptors_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = JoinPath(dir, "s");
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(listener.valid());
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);

  Accepted none = AcceptConnection(listener.get());  // nobody is connecting
  EXPECT_FALSE(none.fd.valid());
  EXPECT_EQ(none.err, EAGAIN);

  UniqueFd client(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  Accepted one = AcceptConnection(listener.get());
  ASSERT_TRUE(one.fd.valid()) << std::strerror(one.err);
  EXPECT_EQ(one.err, 0);
  EXPECT_NE(::fcntl(one.fd.get(), F_GETFD) & FD_CLOEXEC, 0);

  EXPECT_EQ(AcceptConnection(-1).err, EBADF);
  ASSERT_TRUE(RemoveTree(dir).ok());
}

}  // namespace
}  // namespace tierckpt
