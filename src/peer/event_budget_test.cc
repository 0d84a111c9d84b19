#include "peer/event_budget.h"

#include <gtest/gtest.h>

namespace tierckpt::peer {
namespace {

using std::chrono::seconds;

TEST(EventBudgetTest, AdmitsABurstPerWindowAndCountsTheRest) {
  EventBudget budget(3, seconds(10));
  const auto t0 = EventBudget::Clock::time_point() + seconds(100);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(budget.Admit(t0 + seconds(i))) << i;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(budget.Admit(t0 + seconds(5))) << i;
  EXPECT_EQ(budget.suppressed(), 5u);
  EXPECT_EQ(budget.window_end(), t0 + seconds(10));
  EXPECT_FALSE(budget.Admit(t0 + seconds(9)));
  // The next window opens with the next event after this one ended.
  EXPECT_TRUE(budget.Admit(t0 + seconds(10)));
  EXPECT_EQ(budget.window_end(), t0 + seconds(20));
  EXPECT_EQ(budget.TakeSuppressed(), 6u);
  EXPECT_EQ(budget.suppressed(), 0u);
  EXPECT_EQ(budget.TakeSuppressed(), 0u);
  EXPECT_TRUE(budget.Admit(t0 + seconds(11)));
  EXPECT_TRUE(budget.Admit(t0 + seconds(12)));
  EXPECT_FALSE(budget.Admit(t0 + seconds(13)));
}

TEST(EventBudgetTest, AQuietPeriodStartsAFreshWindow) {
  EventBudget budget(1, seconds(10));
  const auto t0 = EventBudget::Clock::time_point() + seconds(100);
  EXPECT_TRUE(budget.Admit(t0));
  EXPECT_FALSE(budget.Admit(t0 + seconds(1)));
  EXPECT_TRUE(budget.Admit(t0 + seconds(3600)));
  EXPECT_EQ(budget.window_end(), t0 + seconds(3610));
  EXPECT_EQ(budget.suppressed(), 1u);  // kept until taken
}

}  // namespace
}  // namespace tierckpt::peer
