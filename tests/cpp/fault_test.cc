// Faults on multi-process jobs, each with a time bound:
//   - a rank SIGKILLed before a collective, and during a long series of
//     collectives: every survivor's Work fails with PeerLost within 2 s of
//     the kill (also when the victim hosts the store);
//   - a rank SIGSTOPped mid-series: the others fail with Timeout at the
//     group's deadline;
//   - a rank that never calls the collective: Timeout on the others,
//     naming the missing rank;
//   - a rank whose interrupt check fires mid-call: Interrupted there,
//     Aborted naming it everywhere else;
//   - after World destruction (also after a fault) no file descriptor or
//     thread is left behind, and in-flight work ends with Aborted.
//
// Latency is measured on CLOCK_MONOTONIC, which all processes share: the
// parent takes a timestamp immediately before kill() and posts it to the
// survivors; each survivor compares it with the moment its error arrived.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "expect_world.h"
#include "meshcomm/interrupt.h"
#include "sanitizers.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

constexpr double kDetectMs = 2000;  // the bound on noticing a dead peer

// Checks that this rank's fd and thread counts are back at what they were
// before World::init (after the World has been destroyed). Thread exit and
// the store server's closing of accepted sockets are asynchronous, so the
// counts may settle for a moment.
// `goneSince`: descriptors of the baseline that legitimately closed since
// (rank 0's server side of a killed rank's store connection).
// ThreadSanitizer starts a background thread of its own the first time it
// needs one, which can be after the count taken before World::init.
constexpr int kSanitizerThreads = kThreadSanitizer ? 1 : 0;

void expectNoLeaks(RankEnv& e, const char* when, int goneSince = 0) {
  CHILD_CHECK(e.world == nullptr);
  const int want = e.fdsBeforeInit - goneSince;
  const int fds = test::settleTo(test::openFdCount, want, 3s);
  const int threads = test::settleTo(test::threadCount, e.threadsBeforeInit, 3s);
  CHILD_CHECK(fds == want, "" << when << ": rank " << e.rank << " has " << fds << " fds, expected " << want
                                << "\n  before: " << e.fdListingBeforeInit << "\n  after:  " << test::fdListing());
  CHILD_CHECK(threads >= e.threadsBeforeInit && threads <= e.threadsBeforeInit + kSanitizerThreads,
              "" << when << ": rank " << e.rank << " has " << threads << " threads, "
                                                    << e.threadsBeforeInit << " before World::init");
}

struct KillPlan {
  int p;
  int victim;
  bool warmUp;        // run collectives before the kill (connections exist)
  bool duringSeries;  // kill while the ranks loop over allReduces
  bool tcp = false;   // shared memory off: the ranks of this host use TCP
  bool pointToPoint = false;  // the series is ring exchanges (send/recv), not allReduces
};

// One step of the point-to-point series: send to the right, receive from
// the left, 1 MiB each (more than fits in flight, so the transfer spans
// many waits).
void ringExchange(ProcessGroup& pg, int rank, int size, std::vector<float>& out, std::vector<float>& in) {
  TensorRef send{out.data(), static_cast<int64_t>(out.size()), DType::kFloat32};
  TensorRef recv{in.data(), static_cast<int64_t>(in.size()), DType::kFloat32};
  std::vector<P2POp> ops = {{P2POp::Kind::kSend, send, (rank + 1) % size, 0},
                            {P2POp::Kind::kRecv, recv, (rank + size - 1) % size, 0}};
  pg.batchIsendIrecv(ops)->wait();
}

// The body every rank runs; the parent kills `victim` once every rank has
// reported ready and posts the kill time.
int killBody(RankEnv& e, const KillPlan& plan) {
  ProcessGroup& pg = e.pg();
  std::vector<float> data(plan.duringSeries ? (1 << 18) : 1000, 1.0f);
  TensorRef t{data.data(), static_cast<int64_t>(data.size()), DType::kFloat32};
  std::vector<float> received(data.size());
  if (plan.warmUp) {
    pg.allReduce(t)->wait();
    CHILD_CHECK(data[0] == static_cast<float>(plan.p));
  }
  std::string what;
  test::Caught got = test::Caught::kNone;
  uint64_t errorNs = 0;
  if (plan.duringSeries) {
    // Loop until the error; tell the parent once the series is under way.
    const uint64_t until = test::monoNowNs() + 30'000'000'000ull;
    for (int k = 0; got == test::Caught::kNone && test::monoNowNs() < until; ++k) {
      if (k == 3) CHILD_CHECK(e.fromChildren->post(1, 1));
      std::fill(data.begin(), data.end(), 1.0f);
      if (plan.pointToPoint) {
        got = test::catchError([&] { ringExchange(pg, e.rank, plan.p, data, received); }, &what);
        continue;
      }
      got = test::catchError([&] { pg.allReduce(t)->wait(); }, &what);
      if (got == test::Caught::kNone) CHILD_CHECK(data[12345] == static_cast<float>(plan.p));
    }
    errorNs = test::monoNowNs();
    CHILD_CHECK(e.rank != plan.victim, "the victim outlived its kill");
  } else {
    CHILD_CHECK(e.fromChildren->post(1, 1));
    if (e.rank == plan.victim) {
      std::this_thread::sleep_for(30s);  // killed long before this ends
      return test::kExitWrongError;
    }
    e.toChildren->receiveOrExit(20s);  // the kill has happened
    got = test::catchError([&] { pg.allReduce(t)->wait(); }, &what);
    errorNs = test::monoNowNs();
  }
  const uint64_t killNs = e.toChildren->receiveOrExit(20s);
  const double latency = test::msBetween(killNs, errorNs);
  CHILD_CHECK(got == test::Caught::kPeerLost,
              "rank " << e.rank << " got " << test::caughtName(got) << ": " << what);
  CHILD_CHECK(latency < kDetectMs, "rank " << e.rank << " noticed the kill after " << latency << " ms");
  CHILD_CHECK(what.find("world rank " + std::to_string(plan.victim)) != std::string::npos ||
                  (plan.victim == 0 && what.find("store") != std::string::npos),
              "rank " << e.rank << ": the error does not name the lost rank: " << what);
  std::fprintf(stderr, "[kill P=%d victim=%d] rank %d: PeerLost after %.0f ms\n", plan.p, plan.victim, e.rank,
               latency);
  // The group is broken: the next call fails at once with the same error.
  const uint64_t t1 = test::monoNowNs();
  CHILD_CHECK(test::catchError([&] { pg.barrier()->wait(); }) == test::Caught::kPeerLost);
  CHILD_CHECK(test::msBetween(t1, test::monoNowNs()) < 500);
  // Destroying the World after the fault leaves nothing behind.
  e.world.reset();
  if (plan.victim != 0) {
    test::storeBarrier(*e.store, "destroyed", plan.p - 1);
    expectNoLeaks(e, "after PeerLost", e.rank == 0 ? 1 : 0);
    // Nobody leaves (closing its store connection in rank 0) before rank 0 has counted.
    test::storeBarrier(*e.store, "counted", plan.p - 1);
  }
  return test::kExitOk;
}

void runKill(const KillPlan& plan) {
  SCOPED_TRACE("P=" + std::to_string(plan.p) + " victim=" + std::to_string(plan.victim) +
               (plan.duringSeries ? " during" : " before") + (plan.warmUp ? " warm" : " cold") +
               (plan.tcp ? " tcp" : " shm") + (plan.pointToPoint ? " send/recv" : ""));
  test::JobOptions o;
  if (plan.tcp) o.env = {{"MESHCOMM_SHM", "0"}};
  o.bound = 60s;
  o.timeout = 30s;  // far beyond the 2 s bound: a Timeout cannot pass for detection
  o.expectDone = plan.victim == 0 ? 0 : plan.p - 1;
  test::WorldJob job(plan.p, o, [plan](RankEnv& e) { return killBody(e, plan); });
  for (int i = 0; i < plan.p; ++i) {
    ASSERT_TRUE(job.fromChildren().receive(30s).has_value()) << "rank not ready\n" << test::describeAll(job.wait());
  }
  if (plan.duringSeries) std::this_thread::sleep_for(200ms);  // well inside the series
  const uint64_t killNs = test::monoNowNs();
  job.children().signal(plan.victim, SIGKILL);
  test::ChildStatus victim = job.children().waitOne(plan.victim, 5s);
  EXPECT_TRUE(victim.signaled && victim.termSignal == SIGKILL) << victim.describe();
  ASSERT_TRUE(job.toChildren().post(killNs, 2 * (plan.p - 1)));  // one for "go", one for the time
  auto statuses = job.wait();
  for (int r = 0; r < plan.p; ++r) {
    if (r == plan.victim) continue;
    EXPECT_TRUE(statuses[static_cast<size_t>(r)].ok()) << "survivor " << r << "\n" << test::describeAll(statuses);
  }
}

TEST(FaultKill, BeforeCollectiveWithoutConnections) { runKill({4, 2, false, false}); }
TEST(FaultKill, BeforeCollectiveAfterWarmUp) { runKill({4, 2, true, false}); }
TEST(FaultKill, DuringSeriesOfAllReduces) { runKill({4, 2, true, true}); }
TEST(FaultKill, DuringSeriesOnEightRanks) { runKill({8, 5, true, true}); }
TEST(FaultKill, StoreHostDuringSeries) { runKill({4, 0, true, true}); }
TEST(FaultKill, BeforeCollectiveOverTcp) { runKill({4, 2, false, false, true}); }
TEST(FaultKill, DuringSeriesOverTcp) { runKill({5, 3, true, true, true}); }
TEST(FaultKill, DuringSendRecvSeries) { runKill({4, 2, true, true, false, true}); }
TEST(FaultKill, DuringSendRecvSeriesOverTcp) { runKill({3, 1, true, true, true, true}); }

// A SIGSTOPped rank is alive but silent: the others must give up at the
// group's deadline with Timeout, not hang and not claim it died.
TEST(FaultStop, StoppedPeerMakesOthersTimeOut) {
  constexpr int kP = 3;
  constexpr int kVictim = 1;
  test::JobOptions o;
  o.bound = 60s;
  o.expectDone = kP - 1;
  test::WorldJob job(kP, o, [](RankEnv& e) {
    std::vector<int> all = test::ranksUpTo(e.size);
    auto g = e.world->newGroup(all, {.timeout = 1500ms});
    std::vector<float> data(1 << 16, 1.0f);
    std::string what;
    test::Caught got = test::Caught::kNone;
    const uint64_t until = test::monoNowNs() + 30'000'000'000ull;
    for (int k = 0; got == test::Caught::kNone && test::monoNowNs() < until; ++k) {
      if (k == 3) CHILD_CHECK(e.fromChildren->post(1, 1));
      got = test::catchError([&] { g->allReduce(TensorRef{data.data(), 1 << 16, DType::kFloat32})->wait(); }, &what);
    }
    const uint64_t errorNs = test::monoNowNs();
    const uint64_t stopNs = e.toChildren->receiveOrExit(20s);
    const double latency = test::msBetween(stopNs, errorNs);
    CHILD_CHECK(got == test::Caught::kTimeout, "rank " << e.rank << " got " << test::caughtName(got) << ": " << what);
    CHILD_CHECK(latency < 1500 + 2500, "rank " << e.rank << " timed out " << latency << " ms after the stop");
    std::fprintf(stderr, "[stop] rank %d: Timeout %.0f ms after SIGSTOP\n", e.rank, latency);
    return test::kExitOk;
  });
  for (int i = 0; i < kP; ++i) ASSERT_TRUE(job.fromChildren().receive(30s).has_value());
  std::this_thread::sleep_for(100ms);
  const uint64_t stopNs = test::monoNowNs();
  job.children().signal(kVictim, SIGSTOP);
  ASSERT_TRUE(job.toChildren().post(stopNs, kP - 1));
  for (int r = 0; r < kP; ++r) {
    if (r == kVictim) continue;
    test::ChildStatus s = job.children().waitOne(r, 30s);
    EXPECT_TRUE(s.ok()) << "rank " << r << " " << s.describe();
  }
  job.children().signal(kVictim, SIGKILL);
  job.wait();
}

// A rank that never issues the collective: the others time out at the
// group deadline. In an all-to-all every survivor waits on the missing
// rank directly, so every message must name it; on two ranks the
// all-reduce's single peer is the missing one.
void runMissing(int p, int missing, bool allToAll) {
  SCOPED_TRACE("P=" + std::to_string(p) + (allToAll ? " allToAll" : " allReduce"));
  test::JobOptions o;
  o.bound = 60s;
  test::expectWorldOk(p, o, [=](RankEnv& e) {
    auto g = e.world->newGroup(test::ranksUpTo(e.size), {.timeout = 1500ms});
    if (e.rank == missing) {
      // Alive and connected, but never calls; leaves once the others are done.
      auto until = std::chrono::steady_clock::now() + 20s;
      while (e.store->add("survivors-done", 0) < p - 1 && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(5ms);
      }
      return test::kExitOk;
    }
    std::vector<int32_t> in(static_cast<size_t>(16 * p), 3), out(static_cast<size_t>(16 * p), 0);
    std::string what;
    const uint64_t t0 = test::monoNowNs();
    test::Caught got = test::catchError(
        [&] {
          if (allToAll) {
            g->allToAllSingle(TensorRef{out.data(), 16 * p, DType::kInt32}, TensorRef{in.data(), 16 * p, DType::kInt32},
                              {}, {})
                ->wait();
          } else {
            g->allReduce(TensorRef{in.data(), 16, DType::kInt32})->wait();
          }
        },
        &what);
    const double ms = test::msBetween(t0, test::monoNowNs());
    e.store->add("survivors-done", 1);
    CHILD_CHECK(got == test::Caught::kTimeout, "rank " << e.rank << " got " << test::caughtName(got) << ": " << what);
    CHILD_CHECK(ms >= 1400 && ms < 1500 + 2500, "rank " << e.rank << " timed out after " << ms << " ms");
    CHILD_CHECK(what.find("world rank " + std::to_string(missing)) != std::string::npos,
                "rank " << e.rank << ": the message does not name the missing rank: " << what);
    return test::kExitOk;
  });
}

TEST(FaultTimeout, MissingRankIsNamedByEveryone) {
  runMissing(2, 1, false);
  runMissing(4, 3, true);
  runMissing(5, 0, true);
}

// An interrupt check that fires once its deadline (a steady_clock time in
// nanoseconds) has passed.
bool pastDeadline(void* deadlineNs) {
  return test::monoNowNs() >= *static_cast<const uint64_t*>(deadlineNs);
}

// Rank 0 makes a blocking call the others join only much later, with an
// interrupt check that fires after 300 ms: the call must throw Interrupted
// soon after, and the others' calls on the group must fail with Aborted
// naming rank 0, not wait for their deadline.
void runInterrupt(int p, bool overShm, bool pointToPoint) {
  SCOPED_TRACE("P=" + std::to_string(p) + (overShm ? " shm" : " tcp") + (pointToPoint ? " recv" : " allReduce"));
  test::JobOptions o;
  o.bound = 60s;
  if (!overShm) o.env.push_back({"MESHCOMM_SHM", "0"});
  test::expectWorldOk(p, o, [=](RankEnv& e) {
    auto g = e.world->newGroup(test::ranksUpTo(e.size), {.timeout = 20s});
    std::vector<float> data(1024, 1.0f);
    TensorRef ref{data.data(), 1024, DType::kFloat32};
    std::string what;
    if (e.rank == 0) {
      OpOptions blocking;
      blocking.blocking = true;
      const uint64_t start = test::monoNowNs();
      uint64_t fireAt = start + 300'000'000ull;
      test::Caught got;
      {
        ScopedInterruptCheck check(&pastDeadline, &fireAt);
        got = test::catchError(
            [&] { (pointToPoint ? g->recv(ref, 1, blocking) : g->allReduce(ref, blocking))->wait(); }, &what);
      }
      const double ms = test::msBetween(start, test::monoNowNs());
      CHILD_CHECK(got == test::Caught::kInterrupted, "rank 0 got " << test::caughtName(got) << ": " << what);
      CHILD_CHECK(ms >= 300 && ms < 1500, "rank 0 was interrupted after " << ms << " ms");
      got = test::catchError([&] { g->barrier()->wait(); }, &what);
      CHILD_CHECK(got == test::Caught::kAborted || got == test::Caught::kInterrupted,
                  "the next call got " << test::caughtName(got) << ": " << what);
      e.store->set("interrupted", "1");
      return test::kExitOk;
    }
    e.store->wait({"interrupted"}, 20s);
    if (pointToPoint && e.rank != 1) return test::kExitOk;
    // A call whose data from rank 0 had already arrived may still succeed;
    // the next one cannot.
    const uint64_t start = test::monoNowNs();
    test::Caught got = test::Caught::kNone;
    for (int k = 0; k < 3 && got == test::Caught::kNone; ++k) {
      got = test::catchError([&] { (pointToPoint ? g->send(ref, 0) : g->allReduce(ref))->wait(); }, &what);
    }
    const double ms = test::msBetween(start, test::monoNowNs());
    CHILD_CHECK(got == test::Caught::kAborted, "rank " << e.rank << " got " << test::caughtName(got) << ": " << what);
    CHILD_CHECK(what.find("interrupted on rank 0") != std::string::npos,
                "rank " << e.rank << ": the message does not name rank 0: " << what);
    CHILD_CHECK(ms < kDetectMs, "rank " << e.rank << " failed after " << ms << " ms");
    return test::kExitOk;
  });
}

TEST(FaultInterrupt, AllReduceOverShm) { runInterrupt(3, true, false); }
TEST(FaultInterrupt, AllReduceOverTcp) { runInterrupt(3, false, false); }
TEST(FaultInterrupt, ReceiveOverShmHost) { runInterrupt(2, true, true); }
TEST(FaultInterrupt, ReceiveOverTcp) { runInterrupt(2, false, true); }

// Resources: the fd and thread counts after destroying the World equal
// those before World::init, after collectives, a sub-group, point to point
// and an unfinished receive (which must end with Aborted).
TEST(FaultResources, NoLeakedFdsOrThreadsAfterWorldDestruction) {
  test::JobOptions o;
  o.bound = 60s;
  test::expectWorldOk(3, o, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    CHILD_CHECK(e.fdsBeforeInit > 0 && e.threadsBeforeInit > 0);
    std::vector<double> big(300000, 1.0);
    pg.allReduce(TensorRef{big.data(), 300000, DType::kFloat64})->wait();
    CHILD_CHECK(big[299999] == 3.0);
    pg.barrier()->wait();
    WorkPtr orphan;
    std::vector<int64_t> x(100, e.rank);
    if (e.rank <= 1) {
      auto g = e.world->newGroup({0, 1});
      g->allReduce(TensorRef{x.data(), 100, DType::kInt64})->wait();
      CHILD_CHECK(x[0] == 1);
      const int peer = 1 - g->rank();
      std::vector<int64_t> y(1000);
      WorkPtr s = g->send(TensorRef{x.data(), 100, DType::kInt64}, peer);
      g->recv(TensorRef{y.data(), 100, DType::kInt64}, peer)->wait();
      s->wait();
      // A receive nobody will ever match, left in flight on purpose.
      if (e.rank == 1) orphan = g->recv(TensorRef{y.data(), 1000, DType::kInt64}, 0, OpOptions{ReduceOp::kSum, 0, 99});
    }
    pg.barrier()->wait();
    CHILD_CHECK(test::openFdCount() > e.fdsBeforeInit);  // the World does hold sockets
    // Rank 1 goes first, so its orphan ends through its own World's
    // destruction (Aborted), not through rank 0 closing the connection.
    if (e.rank == 1) {
      e.world.reset();
      CHILD_CHECK(orphan->isCompleted() && orphan->failed(), "an unfinished receive outlived its World");
      std::string what;
      test::Caught c = test::catchError([&] { orphan->wait(); }, &what);
      CHILD_CHECK(c == test::Caught::kAborted, "" << test::caughtName(c) << ": " << what);
      e.store->set("rank1-gone", std::string("1"));
    } else {
      e.store->wait({"rank1-gone"}, 20s);
      e.world.reset();
    }
    // Rank 0's store server holds the other ranks' runtime connections
    // until they close them: wait until every World is gone.
    test::storeBarrier(*e.store, "destroyed", 3);
    expectNoLeaks(e, "after World destruction");
    // Nobody leaves (closing its store connection in rank 0) before rank 0 has counted.
    test::storeBarrier(*e.store, "counted", 3);
    return test::kExitOk;
  });
}

}  // namespace
}  // namespace meshcomm::test
