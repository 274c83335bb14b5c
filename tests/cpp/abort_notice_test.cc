// One failure rule on every transport: an operation issued after a group's
// abort notice has reached a rank fails there with Aborted, on shared
// memory, over TCP and on hierarchical groups alike.
//
// The scenario: rank 0 aborts the group while it and the other ranks but
// rank 2 are inside an all_reduce of 4 floats; rank 2, which has not joined
// that call, waits until the notice has observably reached it (its group
// reports an error) and then issues the same all_reduce. Every rank must
// see that call fail with Aborted naming rank 0. Rank 2 must wait: a call
// issued before the notice arrives may find every byte it needs already
// delivered (over TCP its partners' data can sit in its socket ahead of
// the abort), and then either outcome is correct.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

constexpr int kLateRank = 2;
// How long the aborting rank lets the others settle into the call first.
constexpr auto kAbortAfter = 300ms;
// A bound on the notice reaching the late rank: generous, since the rule
// is about what happens once it has arrived, not how fast it travels.
constexpr auto kNoticeBound = 20s;

// Waits (bounded) until `group` reports an error on this rank.
std::exception_ptr awaitGroupError(ProcessGroup& group) {
  const auto until = std::chrono::steady_clock::now() + kNoticeBound;
  while (std::chrono::steady_clock::now() < until) {
    if (auto error = group.error()) return error;
    std::this_thread::sleep_for(5ms);
  }
  return nullptr;
}

int abortWhileOthersAreInside(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  std::vector<float> data(4, 1.0f);
  TensorRef ref{data.data(), 4, DType::kFloat32};
  OpOptions blocking;
  blocking.blocking = true;
  // Every connection the call needs is up, as in a job that has run a while.
  pg.allReduce(ref, blocking)->wait();
  CHILD_CHECK(data[0] == static_cast<float>(e.size), "warm-up sum " << data[0]);
  storeBarrier(*e.store, "warm", e.size);

  std::string what;
  if (e.rank == kLateRank) {
    std::exception_ptr notice = awaitGroupError(pg);
    CHILD_CHECK(notice != nullptr, "the abort never reached rank " << kLateRank);
    Caught kept = catchError([&] { std::rethrow_exception(notice); }, &what);
    CHILD_CHECK(kept == Caught::kAborted, "group error: " << caughtName(kept) << " " << what);
    Caught got = catchError([&] { pg.allReduce(ref, blocking)->wait(); }, &what);
    CHILD_CHECK(got == Caught::kAborted, "the late call: " << caughtName(got) << " " << what);
    CHILD_CHECK(what.find("world rank 0 aborted group") != std::string::npos,
                "the late call does not name rank 0: " << what);
    return kExitOk;
  }
  std::thread aborter;
  if (e.rank == 0) {
    aborter = std::thread([&pg] {
      std::this_thread::sleep_for(kAbortAfter);
      pg.abort();
    });
  }
  Caught got = catchError([&] { pg.allReduce(ref, blocking)->wait(); }, &what);
  if (aborter.joinable()) aborter.join();
  CHILD_CHECK(got == Caught::kAborted, "rank " << e.rank << ": " << caughtName(got) << " " << what);
  CHILD_CHECK(what.find("world rank 0 aborted group") != std::string::npos,
              "rank " << e.rank << " does not name rank 0: " << what);
  return kExitOk;
}

class AbortNotice : public ::testing::TestWithParam<TransportCase> {};

TEST_P(AbortNotice, ACallIssuedAfterTheNoticeFailsWithAborted) {
  JobOptions o;
  o.bound = 90s;
  o.timeout = 30s;
  expectJobOk(GetParam(), o, abortWhileOthersAreInside);
}

INSTANTIATE_TEST_SUITE_P(Transports, AbortNotice,
                         ::testing::Values(shmCase(3), tcpCase(3), kHierarchical2x2),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test
