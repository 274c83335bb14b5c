// MESHCOMM_TIMEOUT_MS is the deadline of every operation when the caller
// gives none: World::init with a zero timeout takes it for the world group,
// and a group made without a timeout inherits it. (Joining with it is
// tested in Python, tests/python/test_join_errors.py and test_groups.py,
// which start ranks that never arrive.)
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "collective_harness.h"
#include "expect_world.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// Rank 0 runs `call` on `group(e)` while rank 1 stays away: it must fail
// with Timeout after about 1.5 s, the variable's value.
void expectVariableBounds(const std::function<ProcessGroup&(RankEnv&)>& group) {
  JobOptions o;
  o.timeout = 0ms;  // take MESHCOMM_TIMEOUT_MS
  o.env.emplace_back("MESHCOMM_TIMEOUT_MS", "1500");
  o.bound = 60s;
  expectWorldOk(2, o, [&](RankEnv& e) {
    ProcessGroup& pg = group(e);
    CHILD_CHECK(pg.timeout() == 1500ms, "the group's timeout is " << pg.timeout().count() << " ms");
    if (e.rank == 1) {
      e.store->wait({"harness/timed-out"}, 30s);
      return kExitOk;
    }
    int32_t x = 1;
    std::string what;
    const uint64_t t0 = monoNowNs();
    Caught got = catchError([&] { pg.allReduce(TensorRef{&x, 1, DType::kInt32})->wait(); }, &what);
    const double ms = msBetween(t0, monoNowNs());
    e.store->set("harness/timed-out", std::string("1"));
    CHILD_CHECK(got == Caught::kTimeout, "got " << caughtName(got) << ": " << what);
    CHILD_CHECK(ms > 1200 && ms < 10000, "timed out after " << ms << " ms");
    return kExitOk;
  });
}

TEST(DeadlineVariables, TimeoutBoundsTheWorldGroup) {
  expectVariableBounds([](RankEnv& e) -> ProcessGroup& { return e.pg(); });
}

TEST(DeadlineVariables, TimeoutBoundsANewGroup) {
  std::shared_ptr<ProcessGroup> g;
  expectVariableBounds([&g](RankEnv& e) -> ProcessGroup& {
    g = e.world->newGroup({0, 1}, {.timeout = 0ms});
    return *g;
  });
}

}  // namespace
}  // namespace meshcomm::test
