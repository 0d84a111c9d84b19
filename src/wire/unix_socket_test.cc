#include "wire/unix_socket.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "os/files.h"

namespace tierckpt::wire {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tc_wire_test.XXXXXX";
    char* p = ::mkdtemp(tmpl);
    EXPECT_NE(p, nullptr);
    path_ = p != nullptr ? p : "/tmp";
  }
  ~TempDir() { RemoveTree(path_).IgnoreError(); }
  std::string File(const char* name) const { return JoinPath(path_, name); }

 private:
  std::string path_;
};

struct Pair {
  UniqueFd a;
  UniqueFd b;
};

Pair SocketPair() {
  int sv[2] = {-1, -1};
  EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

int CountOpenFds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (::readdir(d) != nullptr) ++n;
  ::closedir(d);
  return n;
}

// This process's resident memory in bytes, from /proc/self/statm.
long ResidentBytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages_total = 0, pages_resident = 0;
  if (std::fscanf(f, "%ld %ld", &pages_total, &pages_resident) != 2) pages_resident = 0;
  std::fclose(f);
  return pages_resident * ::sysconf(_SC_PAGESIZE);
}

void WriteRaw(int fd, const std::string& bytes) {
  ASSERT_EQ(::write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
}

std::string RawHeader(uint16_t type, uint32_t request_id, uint32_t payload_len) {
  FrameHeader h;
  h.type = type;
  h.request_id = request_id;
  h.payload_len = payload_len;
  uint8_t buf[kFrameHeaderSize];
  EncodeHeader(h, buf);
  return std::string(reinterpret_cast<char*>(buf), kFrameHeaderSize);
}

TEST(UnixSocketTest, FrameRoundTripOverSocketPair) {
  Pair p = SocketPair();
  std::string payload = StepRequest{"job1", 42}.Encode();
  ASSERT_TRUE(SendFrame(p.a.get(), static_cast<uint16_t>(MsgType::kBeginStep), 7, payload).ok());
  ASSERT_TRUE(SendFrame(p.a.get(), static_cast<uint16_t>(MsgType::kStats), 8, "").ok());
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->header.type, static_cast<uint16_t>(MsgType::kBeginStep));
  EXPECT_EQ(f->header.request_id, 7u);
  EXPECT_EQ(f->payload, payload);
  EXPECT_FALSE(f->fd.valid());
  auto g = RecvFrame(p.b.get(), 1000);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->header.request_id, 8u);
  EXPECT_TRUE(g->payload.empty());
}

TEST(UnixSocketTest, LargePayloadSurvivesPartialWrites) {
  Pair p = SocketPair();
  std::string payload(kMaxPayload, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 31);
  Status sent;
  std::thread writer([&] { sent = SendFrame(p.a.get(), kResponseBit | 7, 1, payload); });
  auto f = RecvFrame(p.b.get(), 10000);
  writer.join();
  ASSERT_TRUE(sent.ok()) << sent.ToString();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->payload, payload);
}

TEST(UnixSocketTest, OversizedPayloadIsNotSent) {
  Pair p = SocketPair();
  std::string payload(kMaxPayload + 1, 'x');
  Status s = SendFrame(p.a.get(), 1, 1, payload);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
}

TEST(UnixSocketTest, PassesAWritableFd) {
  TempDir dir;
  auto file = OpenFile(dir.File("obj"), O_RDWR | O_CREAT | O_CLOEXEC);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  Pair p = SocketPair();
  ASSERT_TRUE(SendFrame(p.a.get(), kResponseBit | 3, 1, "resp", file->get()).ok());
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_TRUE(f->fd.valid());
  EXPECT_NE(f->fd.get(), file->get());
  EXPECT_TRUE(::fcntl(f->fd.get(), F_GETFD) & FD_CLOEXEC);
  ASSERT_EQ(::pwrite(f->fd.get(), "hello", 5, 0), 5);
  char buf[8] = {};
  ASSERT_EQ(::pread(file->get(), buf, sizeof(buf), 0), 5);
  EXPECT_STREQ(buf, "hello");
  EXPECT_EQ(f->payload, "resp");
}

TEST(UnixSocketTest, MoreThanOneFdIsRejectedAndNoneLeak) {
  Pair p = SocketPair();
  int before = CountOpenFds();
  {
    std::string header = RawHeader(1, 1, 0);
    iovec iov{header.data(), header.size()};
    int fds[2] = {p.a.get(), p.a.get()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(fds))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(fds));
    std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
    ASSERT_EQ(::sendmsg(p.a.get(), &msg, 0), static_cast<ssize_t>(header.size()));
  }
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_EQ(CountOpenFds(), before);
}

TEST(UnixSocketTest, FdWithBadFrameIsClosed) {
  Pair p = SocketPair();
  int before = CountOpenFds();
  std::string header = RawHeader(1, 1, kMaxPayload + 1);
  iovec iov{header.data(), header.size()};
  int fd = p.a.get();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ASSERT_EQ(::sendmsg(p.a.get(), &msg, 0), static_cast<ssize_t>(header.size()));
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_EQ(CountOpenFds(), before);
}

TEST(UnixSocketTest, TimeoutWhenNothingArrives) {
  Pair p = SocketPair();
  auto start = std::chrono::steady_clock::now();
  auto f = RecvFrame(p.b.get(), 50);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kTimeout);
  EXPECT_GE(elapsed, std::chrono::milliseconds(45));
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST(UnixSocketTest, TimeoutMidFrame) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(1, 1, 10) + "abc");
  auto f = RecvFrame(p.b.get(), 50);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kTimeout);
}

TEST(UnixSocketTest, PeerCloseBeforeFrameIsUnavailable) {
  Pair p = SocketPair();
  p.a.Reset();
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kUnavailable);
  EXPECT_NE(f.status().message().find("peer closed"), std::string::npos);
}

TEST(UnixSocketTest, TruncatedHeaderIsProtocolError) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(1, 1, 0).substr(0, 9));
  p.a.Reset();
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_NE(f.status().message().find("truncated frame"), std::string::npos);
}

TEST(UnixSocketTest, TruncatedPayloadIsProtocolError) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(1, 1, 100) + std::string(10, 'p'));
  p.a.Reset();
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_NE(f.status().message().find("truncated frame"), std::string::npos);
}

TEST(UnixSocketTest, OversizedHeaderIsRejectedWithoutReadingPayload) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(1, 1, kMaxPayload + 1) + "after");
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_NE(f.status().message().find("payload_len"), std::string::npos);
  // The bytes after the header are still unread.
  char buf[16] = {};
  ASSERT_EQ(::recv(p.b.get(), buf, sizeof(buf), MSG_DONTWAIT), 5);
  EXPECT_EQ(std::string(buf, 5), "after");
}

TEST(UnixSocketTest, BadMagicIsProtocolError) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), "GET / HTTP/1.1\r\n\r\n");
  auto f = RecvFrame(p.b.get(), 1000);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_NE(f.status().message().find("magic"), std::string::npos);
}

TEST(UnixSocketTest, SendToClosedPeerIsUnavailable) {
  Pair p = SocketPair();
  p.b.Reset();
  Status s = SendFrame(p.a.get(), 1, 1, "x");
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
}

TEST(UnixSocketTest, PeerCredIsOurs) {
  Pair p = SocketPair();
  auto cred = GetPeerCred(p.b.get());
  ASSERT_TRUE(cred.ok()) << cred.status().ToString();
  EXPECT_EQ(cred->pid, ::getpid());
  EXPECT_EQ(cred->uid, ::getuid());
  EXPECT_EQ(cred->gid, ::getgid());
}

TEST(UnixSocketTest, ListenConnectAndExchange) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  auto listener = ListenUnix(path);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(::fcntl(listener->get(), F_GETFD) & FD_CLOEXEC);

  auto client = ConnectUnix(path);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  UniqueFd server(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(server.valid());

  auto cred = GetPeerCred(server.get());
  ASSERT_TRUE(cred.ok()) << cred.status().ToString();
  EXPECT_EQ(cred->uid, ::getuid());
  EXPECT_EQ(cred->pid, ::getpid());

  std::string hello = HelloRequest{static_cast<uint32_t>(::getpid()), "test"}.Encode();
  ASSERT_TRUE(SendFrame(client->get(), static_cast<uint16_t>(MsgType::kHello), 1, hello).ok());
  auto req = RecvFrame(server.get(), 1000);
  ASSERT_TRUE(req.ok()) << req.status().ToString();
  EXPECT_EQ(req->payload, hello);
  std::string resp = EncodeResponse(Status::Ok(), HelloResponse{"n", "v", "/r", ""}.Encode());
  ASSERT_TRUE(SendFrame(server.get(), kResponseBit | req->header.type, 1, resp).ok());
  auto got = RecvFrame(client->get(), 1000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  auto body = DecodeResponse(got->payload);
  ASSERT_TRUE(body.ok()) << body.status().ToString();
  auto hr = HelloResponse::Decode(*body);
  ASSERT_TRUE(hr.ok()) << hr.status().ToString();
  EXPECT_EQ(hr->root, "/r");
}

TEST(UnixSocketTest, SecondListenerOnLiveSocketIsAlreadyExists) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  auto first = ListenUnix(path);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = ListenUnix(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kAlreadyExists);
  EXPECT_NE(second.status().message().find("an agent already listens on " + path),
            std::string::npos)
      << second.status().message();
  // The first listener still works.
  EXPECT_TRUE(ConnectUnix(path).ok());
}

TEST(UnixSocketTest, StaleSocketFileIsReplaced) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  {
    // A socket bound and closed without unlinking: what a killed agent leaves.
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size());
    ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  auto refused = ConnectUnix(path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kUnavailable);

  auto listener = ListenUnix(path);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  EXPECT_TRUE(ConnectUnix(path).ok());
}

TEST(UnixSocketTest, RegularFileAtSocketPathIsLeftAlone) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  ASSERT_TRUE(WriteFileAtomic(path, "precious", false).ok());
  auto listener = ListenUnix(path);
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), Code::kAlreadyExists);
  EXPECT_NE(listener.status().message().find(path + ": it is a regular file, not a socket"), std::string::npos)
      << listener.status().message();
  auto content = ReadFileToString(path, 100);
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content, "precious");
}

// Issue 42 item 6: a regular file at the socket path was reported as "no
// tierckptd answers on ...: start one", which no start can cure.
TEST(UnixSocketTest, ConnectToRegularFileSaysItIsNotASocket) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  ASSERT_TRUE(WriteFileAtomic(path, "precious", false).ok());
  auto c = ConnectUnix(path, 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find(path + ": it is a regular file, not a socket"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("TIERCKPT_SOCKET"), std::string::npos) << c.status().message();
  EXPECT_EQ(c.status().message().find("is tierckptd running"), std::string::npos) << c.status().message();
  auto content = ReadFileToString(path, 100);
  ASSERT_TRUE(content.ok());
  EXPECT_EQ(*content, "precious");
}

TEST(UnixSocketTest, ConnectToDirectorySaysItIsNotASocket) {
  TempDir dir;
  std::string path = dir.File("agent.sock");
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  auto c = ConnectUnix(path, 1000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find(path + ": it is a directory, not a socket"), std::string::npos)
      << c.status().message();
}

TEST(UnixSocketTest, ConnectToMissingAgentGivesHint) {
  TempDir dir;
  std::string path = dir.File("none.sock");
  auto c = ConnectUnix(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find(path), std::string::npos);
  EXPECT_NE(c.status().message().find("tierckpt agent start"), std::string::npos);
  EXPECT_NE(c.status().message().find("TIERCKPT_SOCKET"), std::string::npos);
}

TEST(UnixSocketTest, OverlongPathIsInvalidArgument) {
  std::string path = "/tmp/" + std::string(200, 'x');
  auto c = ConnectUnix(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kInvalidArgument);
  EXPECT_NE(c.status().message().find("107"), std::string::npos) << c.status().message();
  auto l = ListenUnix(path);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.status().code(), Code::kInvalidArgument);
}

TEST(UnixSocketTest, ListenInMissingDirectoryFails) {
  TempDir dir;
  auto l = ListenUnix(dir.File("no/such/dir.sock"));
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("no/such/dir.sock"), std::string::npos);
}

// ---- Limits and timeouts (issue 16, items 11 and 12) ----

// Regression: a peer that sent half a frame header and waited held the
// reader forever; the frame timeout starts at the first byte.
TEST(UnixSocketTest, HalfAFrameHeaderTimesOutAfterTheFrameTimeout) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(1, 1, 0).substr(0, 8));
  RecvLimits limits;
  limits.idle_timeout_ms = -1;  // idle forever is fine, stalling mid-frame is not
  limits.frame_timeout_ms = 100;
  auto start = std::chrono::steady_clock::now();
  auto f = RecvFrame(p.b.get(), limits);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kTimeout) << f.status().ToString();
  EXPECT_NE(f.status().message().find("only 8 of"), std::string::npos) << f.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(UnixSocketTest, IdleTimeoutAppliesOnlyBeforeTheFirstByte) {
  Pair p = SocketPair();
  RecvLimits limits;
  limits.idle_timeout_ms = 50;
  limits.frame_timeout_ms = 5000;
  auto idle = RecvFrame(p.b.get(), limits);
  ASSERT_FALSE(idle.ok());
  EXPECT_EQ(idle.status().code(), Code::kTimeout);
  EXPECT_NE(idle.status().message().find("no frame arrived"), std::string::npos) << idle.status().message();
  // A frame that starts in time may take longer than the idle timeout.
  std::string payload(1000, 'x');
  std::string bytes = RawHeader(1, 1, static_cast<uint32_t>(payload.size())) + payload;
  WriteRaw(p.a.get(), bytes.substr(0, 10));
  std::thread rest([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    WriteRaw(p.a.get(), bytes.substr(10));
  });
  auto f = RecvFrame(p.b.get(), limits);
  rest.join();
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->payload, payload);
}

TEST(UnixSocketTest, AdmitRejectsFromTheHeaderAndReadsNoPayload) {
  Pair p = SocketPair();
  WriteRaw(p.a.get(), RawHeader(5, 9, 1u << 20) + "after");
  RecvLimits limits;
  limits.idle_timeout_ms = 1000;
  FrameHeader seen;
  limits.admit = [&](const FrameHeader& h) {
    seen = h;
    return InvalidArgument("too big for a CommitStep");
  };
  auto f = RecvFrame(p.b.get(), limits);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(seen.request_id, 9u);
  EXPECT_EQ(seen.payload_len, 1u << 20);
  char buf[16] = {};
  ASSERT_EQ(::recv(p.b.get(), buf, sizeof(buf), MSG_DONTWAIT), 5);
}

// Regression: a header announcing 80 MiB made the reader allocate (and
// zero) 80 MiB before a byte of payload arrived.
TEST(UnixSocketTest, AnnouncedPayloadIsNotAllocatedBeforeItArrives) {
  Pair p = SocketPair();
  const long before = ResidentBytes();
  WriteRaw(p.a.get(), RawHeader(5, 1, 64u << 20) + std::string(1000, 'x'));
  long during = 0;
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the reader waits for the rest
    during = ResidentBytes();
    p.a.Reset();  // truncated: the reader fails after what arrived
  });
  auto f = RecvFrame(p.b.get(), 5000);
  closer.join();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), Code::kProtocolError);
  EXPECT_NE(f.status().message().find("after 1000 of"), std::string::npos) << f.status().message();
  EXPECT_LT(during - before, 16l << 20) << "the reader holds memory for bytes that never came";
  // A complete large frame still arrives whole.
  Pair q = SocketPair();
  std::string big(5u << 20, 'b');
  big[12345] = 'c';
  std::thread sender([&] { EXPECT_TRUE(SendFrame(q.a.get(), 5, 2, big, -1, 5000).ok()); });
  auto g = RecvFrame(q.b.get(), 5000);
  sender.join();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->payload, big);
}

// Regression: SendFrame waited forever for a peer that never reads.
TEST(UnixSocketTest, SendTimesOutWhenThePeerDoesNotRead) {
  Pair p = SocketPair();
  std::string big(16u << 20, 'x');
  auto start = std::chrono::steady_clock::now();
  Status s = SendFrame(p.a.get(), 5, 1, big, -1, 100);
  EXPECT_EQ(s.code(), Code::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("not reading"), std::string::npos) << s.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Regression: connect(2) to an agent whose accept queue is full blocked
// forever; it now fails with kTimeout naming the socket.
TEST(UnixSocketTest, ConnectTimesOutWhenTheAcceptQueueIsFull) {
  TempDir dir;
  const std::string path = dir.File("full.sock");
  auto listener = ListenUnix(path, /*backlog=*/1);
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  std::vector<UniqueFd> held;
  Status last;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 16 && last.ok(); ++i) {
    auto c = ConnectUnix(path, 100);
    if (c.ok()) {
      held.push_back(std::move(c).value());
    } else {
      last = c.status();
    }
  }
  EXPECT_EQ(last.code(), Code::kTimeout) << last.ToString();
  EXPECT_NE(last.message().find(path), std::string::npos) << last.message();
  EXPECT_NE(last.message().find("accepted"), std::string::npos) << last.message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// ---- Socket directories (issue 16, item 9) ----

TEST(UnixSocketTest, PrivateSocketDirIsTrusted) {
  TempDir dir;  // mkdtemp: 0700, ours, under the sticky /tmp
  EXPECT_TRUE(CheckSocketDir(dir.File(""), ::geteuid()).ok()) << CheckSocketDir(dir.File(""), ::geteuid()).ToString();
  ASSERT_EQ(::chmod(dir.File("").c_str(), 0755), 0);
  EXPECT_TRUE(CheckSocketDir(dir.File(""), ::geteuid()).ok());
  EXPECT_EQ(CheckSocketDir(dir.File("missing"), ::geteuid()).code(), Code::kNotFound);
}

TEST(UnixSocketTest, SocketDirOthersMayWriteIsRefused) {
  TempDir dir;
  ASSERT_EQ(::chmod(dir.File("").c_str(), 0777), 0);
  Status s = CheckSocketDir(dir.File(""), ::geteuid());
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("0777"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("chmod go-w"), std::string::npos) << s.message();
  // Even sticky, like /tmp itself: the socket's own directory must be private.
  ASSERT_EQ(::chmod(dir.File("").c_str(), 01777), 0);
  EXPECT_EQ(CheckSocketDir(dir.File(""), ::geteuid()).code(), Code::kPermissionDenied);
  ASSERT_EQ(::chmod(dir.File("").c_str(), 0700), 0);
}

TEST(UnixSocketTest, SocketDirUnderAnotherUsersDirectoryIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown a directory to another uid";
  TempDir dir;
  ASSERT_TRUE(MakeDirs(dir.File("foe/run"), 0700).ok());
  // Another user owns the socket directory itself.
  ASSERT_EQ(::chown(dir.File("foe/run").c_str(), 65534, 65534), 0);
  Status s = CheckSocketDir(dir.File("foe/run"), 0);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.ToString();
  EXPECT_NE(s.message().find("uid 65534"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("uid 0"), std::string::npos) << s.message();
  // ... or an ancestor: it could rename the directory away.
  ASSERT_EQ(::chown(dir.File("foe/run").c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(dir.File("foe").c_str(), 65534, 65534), 0);
  EXPECT_EQ(CheckSocketDir(dir.File("foe/run"), 0).code(), Code::kPermissionDenied);
  // ... or a symbolic link on the way.
  ASSERT_EQ(::chown(dir.File("foe").c_str(), 0, 0), 0);
  ASSERT_EQ(::symlink(dir.File("foe/run").c_str(), dir.File("link").c_str()), 0);
  EXPECT_TRUE(CheckSocketDir(dir.File("link"), 0).ok());  // our own link
  ASSERT_EQ(::lchown(dir.File("link").c_str(), 65534, 65534), 0);
  Status l = CheckSocketDir(dir.File("link"), 0);
  EXPECT_EQ(l.code(), Code::kPermissionDenied) << l.ToString();
  EXPECT_NE(l.message().find("symbolic link"), std::string::npos) << l.message();
  // A directory of the expected agent uid is fine for a client expecting it.
  ASSERT_EQ(::chown(dir.File("foe/run").c_str(), 65534, 65534), 0);
  EXPECT_TRUE(CheckSocketDir(dir.File("foe/run"), 65534).ok());
}

}  // namespace
}  // namespace tierckpt::wire
