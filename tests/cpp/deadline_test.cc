// Deadline (src/common/deadline.h): a deadline made with afterFirstUse
// starts its budget when it is first read or copied, and every copy shares
// that one budget; after() starts at once. A group's calls use the lazy
// form so that a small call whose waits end in their spin never reads the
// clock for its deadline.
#include "common/deadline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace meshcomm {
namespace {

using namespace std::chrono_literals;
using Clock = Deadline::Clock;

TEST(Deadline, AfterStartsAtOnce) {
  const auto before = Clock::now();
  const Deadline d = Deadline::after(200ms);
  EXPECT_GE(d.at(), before + 200ms);
  EXPECT_LE(d.at(), Clock::now() + 200ms);
}

TEST(Deadline, AfterFirstUseStartsWhenFirstRead) {
  const Deadline d = Deadline::afterFirstUse(200ms);
  std::this_thread::sleep_for(50ms);
  const auto read = Clock::now();
  const auto at = d.at();
  EXPECT_GE(at, read + 200ms) << "the budget started before the deadline was read";
  EXPECT_EQ(d.at(), at) << "a second read moved the deadline";
  EXPECT_FALSE(d.expired());
}

TEST(Deadline, CopiesShareOneBudget) {
  const Deadline d = Deadline::afterFirstUse(200ms);
  const Deadline copy = d;  // starts the budget
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(d.at(), copy.at());
  Deadline assigned;
  assigned = d;
  EXPECT_EQ(assigned.at(), d.at());
}

TEST(Deadline, MovePassesItOnUnread) {
  Deadline d = Deadline::afterFirstUse(200ms);
  std::this_thread::sleep_for(50ms);
  const auto read = Clock::now();
  const Deadline moved = std::move(d);
  EXPECT_GE(moved.at(), read + 200ms);
}

TEST(Deadline, ExpiredAtAGivenMoment) {
  const auto now = Clock::now();
  const Deadline lazy = Deadline::afterFirstUse(100ms);
  EXPECT_FALSE(lazy.expiredAt(now));  // starts the budget at `now`
  EXPECT_EQ(lazy.at(), now + 100ms);
  EXPECT_FALSE(lazy.expiredAt(now + 99ms));
  EXPECT_TRUE(lazy.expiredAt(now + 100ms));
  EXPECT_TRUE(Deadline::afterFirstUse(0ms).expiredAt(now));
  EXPECT_FALSE(Deadline::never().expiredAt(Clock::time_point::max()));
}

TEST(Deadline, LimitsHoldInBothForms) {
  for (const Deadline& d : {Deadline::after(0ms), Deadline::afterFirstUse(0ms),
                            Deadline::after(-5ms), Deadline::afterFirstUse(-5ms)}) {
    EXPECT_TRUE(d.expired());
    EXPECT_EQ(d.pollTimeoutMs(), 0);
  }
  for (const Deadline& d : {Deadline::never(), Deadline::after(std::chrono::milliseconds::max()),
                            Deadline::afterFirstUse(std::chrono::milliseconds::max())}) {
    EXPECT_TRUE(d.infinite());
    EXPECT_FALSE(d.expired());
    EXPECT_EQ(d.pollTimeoutMs(), -1);
  }
}

}  // namespace
}  // namespace meshcomm
