// inotify.h: a watch reports what happens in its directory, reading with
// nothing queued returns none, and watching a missing path is kNotFound.
#include "os/inotify.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include "os/files.h"

namespace tierckpt {
namespace {

TEST(InotifyTest, AWatchReportsAFileWrittenInItsDirectory) {
  char tmpl[] = "/tmp/tc_inotify_test.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  Result<Inotify> in = Inotify::Open();
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  Result<std::vector<Inotify::Event>> none = in->ReadEvents(dir);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  Result<int> wd = in->AddWatch(dir, IN_CLOSE_WRITE | IN_ONLYDIR);
  ASSERT_TRUE(wd.ok()) << wd.status().ToString();
  ASSERT_TRUE(WriteFileAtomic(JoinPath(dir, "f"), "x", false).ok());  // tmp closed, renamed
  ASSERT_TRUE(WriteFileVia(JoinPath(dir, "g.tmp"), JoinPath(dir, "g"), 0600, false, [](int) {
                return Status::Ok();
              }).ok());
  pollfd p{in->fd(), POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 1000), 1);
  Result<std::vector<Inotify::Event>> events = in->ReadEvents(dir);
  ASSERT_TRUE(events.ok());
  bool saw_tmp = false;
  for (const Inotify::Event& e : *events) {
    EXPECT_EQ(e.wd, *wd);
    EXPECT_TRUE(e.mask & IN_CLOSE_WRITE);
    if (e.name == "g.tmp") saw_tmp = true;
  }
  EXPECT_TRUE(saw_tmp);
  in->RemoveWatch(*wd);
  ASSERT_TRUE(RemoveTree(dir).ok());

  Result<int> gone = in->AddWatch(JoinPath(dir, "absent"), IN_CLOSE_WRITE | IN_ONLYDIR);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  EXPECT_NE(gone.status().message().find("watching " + dir + "/absent"), std::string::npos);
  Result<int> not_dir = in->AddWatch("/dev/null", IN_CLOSE_WRITE | IN_ONLYDIR);
  ASSERT_FALSE(not_dir.ok());
  EXPECT_EQ(not_dir.status().code(), Code::kNotFound);  // ENOTDIR
}

}  // namespace
}  // namespace tierckpt
