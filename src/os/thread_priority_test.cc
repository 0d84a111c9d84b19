#include "os/thread_priority.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

namespace tierckpt {
namespace {

// Each test lowers a thread of its own: a thread cannot raise itself back.
template <class F>
void InThread(F f) {
  std::thread t(f);
  t.join();
}

TEST(ThreadPriorityTest, ParsesTheThreeNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseThreadPriority("normal"), ThreadPriority::kNormal);
  EXPECT_EQ(*ParseThreadPriority("low"), ThreadPriority::kLow);
  EXPECT_EQ(*ParseThreadPriority("idle"), ThreadPriority::kIdle);
  Result<ThreadPriority> bad = ParseThreadPriority("lowest");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("use normal, low"), std::string::npos) << bad.status().ToString();
  for (ThreadPriority p : {ThreadPriority::kNormal, ThreadPriority::kLow, ThreadPriority::kIdle}) {
    EXPECT_EQ(*ParseThreadPriority(ThreadPriorityName(p)), p);
  }
}

TEST(ThreadPriorityTest, LowSetsNiceTenAndBestEffortSevenOnThisThreadOnly) {
  Result<ThreadPriorityState> before = ThisThreadPriority();
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  InThread([&] {
    ASSERT_TRUE(SetThisThreadPriority(ThreadPriority::kLow).ok());
    Result<ThreadPriorityState> s = ThisThreadPriority();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->nice, std::max(before->nice, 10));
    EXPECT_EQ(s->policy, SCHED_OTHER);
    EXPECT_EQ(s->io_class, 2);
    EXPECT_EQ(s->io_level, 7);
  });
  Result<ThreadPriorityState> after = ThisThreadPriority();  // the test's thread is untouched
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->nice, before->nice);
  EXPECT_EQ(after->io_class, before->io_class);
}

TEST(ThreadPriorityTest, IdleSetsSchedIdleAndIoIdle) {
  InThread([] {
    ASSERT_TRUE(SetThisThreadPriority(ThreadPriority::kIdle).ok());
    Result<ThreadPriorityState> s = ThisThreadPriority();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_EQ(s->policy, SCHED_IDLE);
    EXPECT_EQ(s->io_class, 3);
  });
  Result<ThreadPriorityState> mine = ThisThreadPriority();
  ASSERT_TRUE(mine.ok());
  EXPECT_NE(mine->policy, SCHED_IDLE);
}

TEST(ThreadPriorityTest, NormalChangesNothing) {
  InThread([] {
    Result<ThreadPriorityState> before = ThisThreadPriority();
    ASSERT_TRUE(before.ok());
    ASSERT_TRUE(SetThisThreadPriority(ThreadPriority::kNormal).ok());
    Result<ThreadPriorityState> s = ThisThreadPriority();
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->nice, before->nice);
    EXPECT_EQ(s->policy, before->policy);
    EXPECT_EQ(s->io_class, before->io_class);
  });
}

TEST(ThreadPriorityTest, LowNeverRaisesANicerThread) {
  InThread([] {
    ASSERT_TRUE(SetThisThreadPriority(ThreadPriority::kLow).ok());
    // Already at 10 or more: asking again keeps it (and does not fail).
    ASSERT_TRUE(SetThisThreadPriority(ThreadPriority::kLow).ok());
    EXPECT_GE(ThisThreadPriority()->nice, 10);
  });
}

}  // namespace
}  // namespace tierckpt
