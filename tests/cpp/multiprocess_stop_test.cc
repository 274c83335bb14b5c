// The fork helper's stop after a failure (multiprocess.h): once one child
// fails its test, the others are killed after a grace instead of running
// until the bound, as the ranks of a job waiting for the failed one would.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>

#include "multiprocess.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(MultiProcessHelper, AFailedChildStopsTheOthersAfterTheGrace) {
  ChildGroup group(3, [](int rank) -> int {
    switch (rank) {
      case 0: return kExitOk;
      case 1: throw std::runtime_error("thrown in a child");
      default: ::pause(); return kExitOk;  // waits for rank 1 forever
    }
  });
  const auto t0 = Clock::now();
  auto st = group.waitAllStoppingAfterFailure(60s, 300ms);
  ASSERT_EQ(st.size(), 3u);
  EXPECT_TRUE(st[0].ok()) << st[0].describe();
  EXPECT_TRUE(st[1].failedItsTest()) << st[1].describe();
  EXPECT_TRUE(st[2].stoppedAfterFailure && !st[2].timedOut && st[2].signaled) << st[2].describe();
  EXPECT_FALSE(st[2].ok());
  EXPECT_LT(Clock::now() - t0, 30s);  // far from the 60 s bound
}

TEST(MultiProcessHelper, WithoutAFailureTheBoundStillApplies) {
  ChildGroup group(2, [](int rank) -> int {
    if (rank == 0) return 5;  // a code of the test's own, not a failed check
    ::pause();
    return kExitOk;
  });
  auto st = group.waitAllStoppingAfterFailure(300ms, 10ms);
  ASSERT_EQ(st.size(), 2u);
  EXPECT_TRUE(st[0].exited && st[0].exitCode == 5 && !st[0].failedItsTest()) << st[0].describe();
  EXPECT_TRUE(st[1].timedOut && !st[1].stoppedAfterFailure) << st[1].describe();
}

}  // namespace
}  // namespace meshcomm::test
