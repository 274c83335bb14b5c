// Deadline (common/deadline.h): the exact and the coarse constructors agree
// on what "no deadline" and "already expired" mean, and a coarse deadline is
// never earlier than the exact one would be.
#include "common/deadline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace meshcomm {
namespace {

using namespace std::chrono_literals;

TEST(Deadline, CoarseIsNeverEarlyAndAtMostATickLate) {
  for (auto timeout : {1ms, 7ms, 250ms, 60000ms}) {
    for (int i = 0; i < 200; ++i) {
      const auto before = Deadline::Clock::now();
      const Deadline d = Deadline::afterCoarse(timeout);
      const auto after = Deadline::Clock::now();
      ASSERT_FALSE(d.infinite());
      // Not earlier than an exact deadline taken when the call began (the
      // thread may be preempted inside it, so not against `after`).
      EXPECT_GE(d.at(), before + timeout) << timeout.count() << " ms";
      // One tick of the coarse clock is a few milliseconds (HZ >= 100).
      EXPECT_LE(d.at(), after + timeout + 25ms) << timeout.count() << " ms";
    }
  }
}

TEST(Deadline, CoarseLimitsMatchTheExactOnes) {
  EXPECT_TRUE(Deadline::afterCoarse(0ms).expired());
  EXPECT_TRUE(Deadline::afterCoarse(-5ms).expired());
  EXPECT_TRUE(Deadline::afterCoarse(std::chrono::milliseconds::max()).infinite());
  EXPECT_TRUE(Deadline::after(std::chrono::milliseconds::max()).infinite());
  EXPECT_EQ(Deadline::afterCoarse(std::chrono::milliseconds::max()).pollTimeoutMs(), -1);
}

TEST(Deadline, CoarseExpiresAfterItsTimeout) {
  const Deadline d = Deadline::afterCoarse(20ms);
  EXPECT_FALSE(d.expired());
  std::this_thread::sleep_for(60ms);
  EXPECT_TRUE(d.expired());
}

}  // namespace
}  // namespace meshcomm
