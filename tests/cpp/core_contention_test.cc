// CoreContention: when a shared-memory wait stops yielding and sleeps.

#include "transport/shm/core_contention.h"

#include <gtest/gtest.h>

namespace meshcomm {
namespace {

using Clock = CoreContention::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// A yield of `took` that ends at `end`.
void yieldOf(CoreContention& c, Clock::time_point end, Clock::duration took) {
  c.noteYield(end - took, end);
}

// `count` yields of `took` back to back from `t`, which moves past them.
void yieldsOf(CoreContention& c, Clock::time_point& t, int count, Clock::duration took) {
  for (int i = 0; i < count; ++i) {
    t += took;
    yieldOf(c, t, took);
  }
}

TEST(CoreContention, ShortYieldsNeverStopYielding) {
  CoreContention c;
  auto t = Clock::now();
  yieldsOf(c, t, 100000, microseconds(900));
  EXPECT_TRUE(c.yieldAllowed(t));
}

TEST(CoreContention, OneLongYieldAmongShortOnesKeepsYielding) {
  CoreContention c;
  auto t = Clock::now();
  yieldsOf(c, t, 1, milliseconds(5));
  yieldsOf(c, t, 1000, microseconds(3));
  EXPECT_TRUE(c.yieldAllowed(t));
}

TEST(CoreContention, LongYieldsInAWindowSleepForASecond) {
  CoreContention c;
  auto t = Clock::now();
  for (int i = 0; i + 1 < CoreContention::kLongYieldsToSleep; ++i) {
    t += milliseconds(2);
    yieldOf(c, t, milliseconds(2));
    EXPECT_TRUE(c.yieldAllowed(t)) << "after long yield " << i + 1;
  }
  t += milliseconds(2);
  yieldOf(c, t, milliseconds(2));
  EXPECT_FALSE(c.yieldAllowed(t));
  EXPECT_FALSE(c.yieldAllowed(t + CoreContention::kSleepFor - milliseconds(1)));
  EXPECT_TRUE(c.yieldAllowed(t + CoreContention::kSleepFor));
}

TEST(CoreContention, LongYieldsFurtherApartThanTheWindowKeepYielding) {
  CoreContention c;
  auto t = Clock::now();
  for (int i = 0; i < 50; ++i) {
    t += CoreContention::kWindow / (CoreContention::kLongYieldsToSleep - 1) + milliseconds(1);
    yieldOf(c, t, CoreContention::kLongYield);
    ASSERT_TRUE(c.yieldAllowed(t)) << "after long yield " << i + 1;
  }
}

TEST(CoreContention, CountingStartsAfreshAfterASleep) {
  CoreContention c;
  auto t = Clock::now();
  yieldsOf(c, t, CoreContention::kLongYieldsToSleep, milliseconds(2));
  t += CoreContention::kSleepFor;
  ASSERT_TRUE(c.yieldAllowed(t));
  yieldsOf(c, t, 1, milliseconds(2));
  EXPECT_TRUE(c.yieldAllowed(t));
}

}  // namespace
}  // namespace meshcomm
