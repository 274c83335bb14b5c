// Which algorithm runs a collective (src/collectives/tuning.h): the
// defaults per route and group size at the crossovers docs/tuning.md
// records, and the MESHCOMM_ALGO_* overrides, accepted or refused with an
// InvalidArgument that names the variable.
//
// chooseAlgorithm(), chooseStepAlgorithm() and pipelineChunkBytes() read
// their variables once per process and keep them (function-local statics),
// so every check runs in a forked child that calls them for the first
// time, defaults included. This process must never call them itself: every
// multi-process test forks its ranks from here, and a value cached here
// would reach them all, silently overriding the MESHCOMM_ALGO_* their jobs
// set.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ostream>
#include <string>

#include "caught_error.h"
#include "collectives/tuning.h"
#include "multiprocess.h"

namespace meshcomm {

namespace test {
namespace {

using namespace std::chrono_literals;

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

// Runs checks (CHILD_CHECKs) in a forked child whose environment has
// `variable`=`value` (unset when value is null) before anything reads it.
void inFreshProcess(const char* variable, const char* value, const std::function<void()>& checks) {
  auto statuses = runChildren(
      1,
      [&](int) {
        if (value != nullptr) {
          ::setenv(variable, value, 1);
        } else {
          ::unsetenv(variable);
        }
        checks();
        return kExitOk;
      },
      10s);
  EXPECT_TRUE(allOk(statuses)) << variable << "=" << (value ? value : "(unset)") << "\n"
                               << describeAll(statuses);
}

// The InvalidArgument f throws names the variable and says `says`.
void expectRefused(const std::function<void()>& f, const char* variable, const std::string& says) {
  std::string what;
  const Caught c = catchError(f, &what);
  CHILD_CHECK(c == Caught::kInvalidArgument, "got " << caughtName(c) << ": " << what);
  CHILD_CHECK(what.find(variable) != std::string::npos, "the message does not name " << variable << ": " << what);
  CHILD_CHECK(what.find(says) != std::string::npos, "the message does not say '" << says << "': " << what);
}

// The algorithm chooseAlgorithm picks for one family.
Algorithm allReduce(size_t bytes, int p, Route route) {
  return chooseAlgorithm(Opcode::kAllReduce, bytes, p, route);
}
Algorithm broadcast(size_t bytes, int p, Route route) {
  return chooseAlgorithm(Opcode::kBroadcast, bytes, p, route);
}
Algorithm reduce(size_t bytes, int p, Route route) {
  return chooseAlgorithm(Opcode::kReduce, bytes, p, route);
}
Algorithm allGather(size_t bytes, int p, Route route) {
  return chooseAlgorithm(Opcode::kAllGather, bytes, p, route);
}

// Defaults: nothing forced.
void withDefaults(const std::function<void()>& checks) {
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", nullptr, [&] {
    ::unsetenv("MESHCOMM_ALGO_BROADCAST");
    ::unsetenv("MESHCOMM_ALGO_REDUCE");
    ::unsetenv("MESHCOMM_ALGO_ALLGATHER");
    checks();
  });
}

// ---- defaults --------------------------------------------------------------------

// One host: one-shot up to 256 KiB at P=2, 64 KiB at P<=4, 16 KiB beyond;
// slice-parallel reduce-scatter above.
TEST(TuningDefaults, AllReduceOnSharedMemory) {
  withDefaults([] {
    const std::pair<int, size_t> crossovers[] = {{2, 256 * KiB}, {3, 64 * KiB}, {4, 64 * KiB},
                                                 {5, 16 * KiB},  {8, 16 * KiB}};
    for (auto [p, oneShotUpTo] : crossovers) {
      CHILD_CHECK(allReduce(8, p, Route::kOnHost) == Algorithm::kShmOneShot, "P=" << p);
      CHILD_CHECK(allReduce(oneShotUpTo, p, Route::kOnHost) == Algorithm::kShmOneShot, "P=" << p);
      CHILD_CHECK(allReduce(oneShotUpTo + 1, p, Route::kOnHost) == Algorithm::kShmReduceScatter, "P=" << p);
    }
  });
}

// TCP: recursive doubling up to 512 KiB on two ranks, 64 KiB on more;
// then halving-doubling on a power of two ranks (below 4 MiB up to four
// ranks, below 512 KiB on more), and the ring.
TEST(TuningDefaults, AllReduceOverTcp) {
  withDefaults([] {
    CHILD_CHECK(allReduce(512 * KiB, 2, Route::kFlat) == Algorithm::kRecursiveDoubling);
    CHILD_CHECK(allReduce(512 * KiB + 1, 2, Route::kFlat) == Algorithm::kHalvingDoubling);
    for (int p : {3, 4, 5, 8}) {
      CHILD_CHECK(allReduce(64 * KiB, p, Route::kFlat) == Algorithm::kRecursiveDoubling, "P=" << p);
    }
    for (int p : {2, 4}) {
      CHILD_CHECK(allReduce(4 * MiB - 1, p, Route::kFlat) == Algorithm::kHalvingDoubling, "P=" << p);
      CHILD_CHECK(allReduce(4 * MiB, p, Route::kFlat) == Algorithm::kRing, "P=" << p);
    }
    CHILD_CHECK(allReduce(64 * KiB + 1, 4, Route::kFlat) == Algorithm::kHalvingDoubling);
    CHILD_CHECK(allReduce(512 * KiB - 1, 8, Route::kFlat) == Algorithm::kHalvingDoubling);
    CHILD_CHECK(allReduce(512 * KiB, 8, Route::kFlat) == Algorithm::kRing);
    for (int p : {3, 5, 6}) {
      CHILD_CHECK(allReduce(64 * KiB + 1, p, Route::kFlat) == Algorithm::kRing, "P=" << p);
    }
  });
}

// Broadcast over TCP: a chain from 1 MiB when there are more than two
// ranks (with two, the tree is the chain); reduce: reduce-scatter + gather
// from 256 KiB on more than two ranks.
TEST(TuningDefaults, BroadcastAndReduceOverTcp) {
  withDefaults([] {
    for (int p : {3, 5, 8}) {
      CHILD_CHECK(broadcast(MiB - 1, p, Route::kFlat) == Algorithm::kBinomialTree, "P=" << p);
      CHILD_CHECK(broadcast(MiB, p, Route::kFlat) == Algorithm::kChain, "P=" << p);
      CHILD_CHECK(reduce(256 * KiB - 1, p, Route::kFlat) == Algorithm::kBinomialTree, "P=" << p);
      CHILD_CHECK(reduce(256 * KiB, p, Route::kFlat) == Algorithm::kReduceScatterGather, "P=" << p);
    }
    CHILD_CHECK(broadcast(64 * MiB, 2, Route::kFlat) == Algorithm::kBinomialTree);
    CHILD_CHECK(reduce(64 * MiB, 2, Route::kFlat) == Algorithm::kBinomialTree);
  });
}

// all_gather away from one host: Bruck's schedule up to an output of
// 1 MiB, the ring above, at every group size.
TEST(TuningDefaults, AllGatherAwayFromOneHost) {
  withDefaults([] {
    for (int p : {2, 3, 4, 5, 8}) {
      for (Route route : {Route::kFlat, Route::kHierarchical}) {
        CHILD_CHECK(allGather(0, p, route) == Algorithm::kBruck, "P=" << p);
        CHILD_CHECK(allGather(MiB, p, route) == Algorithm::kBruck, "P=" << p);
        CHILD_CHECK(allGather(MiB + 1, p, route) == Algorithm::kRing, "P=" << p);
      }
      CHILD_CHECK(allGather(8, p, Route::kOnHost) == Algorithm::kOnHost, "P=" << p);
    }
  });
}

// Shared memory and several hosts have one algorithm each, at every size;
// the families without a choice run their shared-memory algorithm on one
// host and their TCP one elsewhere (only the barrier has a hierarchical
// form).
TEST(TuningDefaults, OneAlgorithmPerRouteOtherwise) {
  withDefaults([] {
    for (size_t bytes : {size_t{0}, size_t{8}, 64 * MiB}) {
      CHILD_CHECK(broadcast(bytes, 4, Route::kOnHost) == Algorithm::kOnHost);
      CHILD_CHECK(reduce(bytes, 4, Route::kOnHost) == Algorithm::kOnHost);
      CHILD_CHECK(allReduce(bytes, 4, Route::kHierarchical) == Algorithm::kHierarchical);
      CHILD_CHECK(broadcast(bytes, 4, Route::kHierarchical) == Algorithm::kHierarchical);
      CHILD_CHECK(reduce(bytes, 4, Route::kHierarchical) == Algorithm::kHierarchical);
    }
    const std::pair<Opcode, Algorithm> overTcp[] = {
        {Opcode::kGather, Algorithm::kLinear},   {Opcode::kScatter, Algorithm::kLinear},
        {Opcode::kAllToAll, Algorithm::kPairwise}, {Opcode::kBarrier, Algorithm::kDissemination}};
    for (auto [family, tcp] : overTcp) {
      CHILD_CHECK(chooseAlgorithm(family, 0, 4, Route::kOnHost) == Algorithm::kOnHost, "family " << opcodeName(static_cast<uint8_t>(family)));
      CHILD_CHECK(chooseAlgorithm(family, 0, 4, Route::kFlat) == tcp, "family " << opcodeName(static_cast<uint8_t>(family)));
    }
    CHILD_CHECK(chooseAlgorithm(Opcode::kBarrier, 0, 4, Route::kHierarchical) == Algorithm::kHierarchical);
  });
}

// reduce_scatter over messages: recursive halving on a power of two ranks
// above two, below 4 MiB of input (P <= 4) or up to 1 MiB (more); the ring
// otherwise.
TEST(TuningDefaults, ReduceScatterHalvesOnPowersOfTwo) {
  withDefaults([] {
    auto rs = [](size_t bytes, int p, Route route) {
      return chooseAlgorithm(Opcode::kReduceScatter, bytes, p, route);
    };
    CHILD_CHECK(rs(MiB, 4, Route::kOnHost) == Algorithm::kOnHost);
    for (Route route : {Route::kFlat, Route::kHierarchical}) {
      CHILD_CHECK(rs(8, 4, route) == Algorithm::kRecursiveHalving);
      CHILD_CHECK(rs(4 * MiB - 1, 4, route) == Algorithm::kRecursiveHalving);
      CHILD_CHECK(rs(4 * MiB, 4, route) == Algorithm::kRing);
      CHILD_CHECK(rs(MiB, 8, route) == Algorithm::kRecursiveHalving);
      CHILD_CHECK(rs(MiB + 1, 8, route) == Algorithm::kRing);
      CHILD_CHECK(rs(8, 2, route) == Algorithm::kRing);
      CHILD_CHECK(rs(8, 3, route) == Algorithm::kRing);
      CHILD_CHECK(rs(8, 6, route) == Algorithm::kRing);
    }
  });
}

// ---- overrides --------------------------------------------------------------------

TEST(TuningForced, UnsetOrAutoLeavesTheDefault) {
  for (const char* value : {static_cast<const char*>(nullptr), "", "auto"}) {
    inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", value, [] {
      CHILD_CHECK(allReduce(8, 4, Route::kFlat) == Algorithm::kRecursiveDoubling);
      CHILD_CHECK(allReduce(MiB, 4, Route::kFlat) == Algorithm::kHalvingDoubling);
      CHILD_CHECK(allReduce(MiB, 3, Route::kFlat) == Algorithm::kRing);
      CHILD_CHECK(allReduce(MiB, 4, Route::kOnHost) == Algorithm::kShmReduceScatter);
    });
  }
}

TEST(TuningForced, AnAlgorithmOfTheCollectiveIsTakenAtEverySize) {
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", "ring", [] {
    CHILD_CHECK(allReduce(8, 4, Route::kFlat) == Algorithm::kRing);
    // The TCP algorithms run on any route.
    CHILD_CHECK(allReduce(8, 4, Route::kOnHost) == Algorithm::kRing);
  });
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", "shm_oneshot",
                 [] { CHILD_CHECK(allReduce(64 * MiB, 4, Route::kOnHost) == Algorithm::kShmOneShot); });
  inFreshProcess("MESHCOMM_ALGO_BROADCAST", "chain",
                 [] { CHILD_CHECK(broadcast(8, 2, Route::kFlat) == Algorithm::kChain); });
  inFreshProcess("MESHCOMM_ALGO_REDUCE", "reduce_scatter_gather",
                 [] { CHILD_CHECK(reduce(8, 3, Route::kFlat) == Algorithm::kReduceScatterGather); });
  inFreshProcess("MESHCOMM_ALGO_ALLGATHER", "ring",
                 [] { CHILD_CHECK(allGather(8, 5, Route::kFlat) == Algorithm::kRing); });
  inFreshProcess("MESHCOMM_ALGO_ALLGATHER", "bruck",
                 [] { CHILD_CHECK(allGather(64 * MiB, 5, Route::kHierarchical) == Algorithm::kBruck); });
}

// An on-host algorithm where the group's ranks use messages (or a
// hierarchical one on a single host) cannot run: refused where the call is
// issued, naming the variable and the route. A group of one runs nothing,
// so it takes any. Where only a part of a forced algorithm runs over
// another route (the leaders' step of a hierarchical one, over TCP), that
// part takes its route's default.
TEST(TuningForced, AnAlgorithmTheRouteCannotRunIsRefused) {
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", "shm_oneshot", [] {
    expectRefused([] { allReduce(8, 4, Route::kFlat); },
                  "MESHCOMM_ALGO_ALLREDUCE='shm_oneshot'",
                  "cannot run here: this group's ranks use messages between every rank");
    CHILD_CHECK(allReduce(8, 1, Route::kFlat) == Algorithm::kRecursiveDoubling);
    CHILD_CHECK(allReduce(8, 4, Route::kOnHost) == Algorithm::kShmOneShot);
    // The leaders' step of a hierarchical call, over TCP.
    CHILD_CHECK(chooseStepAlgorithm(Opcode::kAllReduce, 8, 2, Route::kFlat) ==
                Algorithm::kRecursiveDoubling);
  });
  inFreshProcess("MESHCOMM_ALGO_BROADCAST", "hierarchical", [] {
    expectRefused([] { broadcast(8, 4, Route::kOnHost); }, "MESHCOMM_ALGO_BROADCAST",
                  "the domain of the one host they share");
    CHILD_CHECK(broadcast(8, 4, Route::kHierarchical) == Algorithm::kHierarchical);
    CHILD_CHECK(chooseStepAlgorithm(Opcode::kBroadcast, 8, 2, Route::kFlat) ==
                Algorithm::kBinomialTree);
  });
}

// A name no algorithm has, or one of another collective's algorithms, is
// refused with the list of the collective's own.
TEST(TuningForced, AnUnknownOrForeignNameIsRefusedWithTheChoices) {
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", "rign", [] {
    expectRefused([] { allReduce(8, 4, Route::kFlat); }, "MESHCOMM_ALGO_ALLREDUCE",
                  "'rign' is not one of: auto, ring, recursive_doubling, halving_doubling, shm_oneshot, "
                  "shm_rsag, shm_single_copy, hierarchical");
  });
  inFreshProcess("MESHCOMM_ALGO_BROADCAST", "ring", [] {
    expectRefused([] { broadcast(8, 4, Route::kFlat); }, "MESHCOMM_ALGO_BROADCAST",
                  "is not one of: auto, binomial_tree, chain, shm, hierarchical");
  });
  inFreshProcess("MESHCOMM_ALGO_REDUCE", "chain", [] {
    expectRefused([] { reduce(8, 4, Route::kFlat); }, "MESHCOMM_ALGO_REDUCE",
                  "is not one of: auto, binomial_tree, reduce_scatter_gather, shm, hierarchical");
  });
}

// The variable is read at the first call and kept: a later change of the
// environment has no effect in that process (so a job's ranks cannot
// change algorithm midway).
TEST(TuningForced, TheValueIsReadOncePerProcess) {
  inFreshProcess("MESHCOMM_ALGO_ALLREDUCE", "ring", [] {
    CHILD_CHECK(allReduce(8, 4, Route::kFlat) == Algorithm::kRing);
    ::setenv("MESHCOMM_ALGO_ALLREDUCE", "recursive_doubling", 1);
    CHILD_CHECK(allReduce(8, 4, Route::kFlat) == Algorithm::kRing);
  });
}

// Pipelined chunks: 1 MiB by default, MESHCOMM_CHUNK_BYTES with a floor of
// 4 KiB, never more than the message (nor less than a byte).
TEST(TuningForced, PipelineChunks) {
  inFreshProcess("MESHCOMM_CHUNK_BYTES", nullptr, [] {
    CHILD_CHECK(pipelineChunkBytes(64 * MiB) == MiB);
    CHILD_CHECK(pipelineChunkBytes(1000) == 1000);
    CHILD_CHECK(pipelineChunkBytes(0) == 1);
  });
  inFreshProcess("MESHCOMM_CHUNK_BYTES", "6000", [] { CHILD_CHECK(pipelineChunkBytes(MiB) == 6000); });
  inFreshProcess("MESHCOMM_CHUNK_BYTES", "100", [] { CHILD_CHECK(pipelineChunkBytes(MiB) == 4096); });
}

}  // namespace
}  // namespace test
}  // namespace meshcomm
