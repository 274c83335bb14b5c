// Ranks that disagree about a collective whose messages carry everything
// that must agree (count, dtype, op, or which collective at all), on every
// transport: every rank fails with Mismatch, promptly (far sooner than the
// group's timeout), and the group stays broken, so the next call fails at
// once too. On emulated hosts this includes schedules that share no
// message (a hierarchical all_reduce against an all_gather): shared-memory
// waits compare the calls their local peers entered. Rooted and split-size
// collectives check their arguments before any data moves and leave the
// group usable: conformance_agreement_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "collective_harness.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

constexpr char kNotSameOperation[] = "not running the same operation";

struct MismatchCase {
  const char* name;
  // The call each rank makes; `odd` marks the rank that disagrees.
  std::function<WorkPtr(ProcessGroup&, bool odd, std::vector<uint8_t>& storage)> call;
};

void runMismatch(const TransportCase& transport, int oddRank, const MismatchCase& c) {
  JobOptions o;
  o.bound = 40s;
  o.timeout = 30s;  // far above the bound checked below, so a Timeout cannot pass for a Mismatch
  auto statuses = runWorld(transport.p, withTransport(transport, o), [&](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    // A correct collective first, so connections exist for some pairs. A
    // rank that finishes it early may find the mismatch in the next call
    // and abort the group while a slower rank is still taking the warm-up's
    // last message off its socket: that rank then fails in the warm-up,
    // with the same Mismatch, which is as good.
    int32_t warm = 1;
    std::vector<uint8_t> storage;
    std::string what;
    const uint64_t t0 = monoNowNs();
    Caught got = catchError(
        [&] {
          pg.allReduce(TensorRef{&warm, 1, DType::kInt32})->wait();
          c.call(pg, e.rank == oddRank, storage)->wait();
        },
        &what);
    const double ms = msBetween(t0, monoNowNs());
    CHILD_CHECK(got == Caught::kMismatch, "" << c.name << ": rank " << e.rank << " got " << caughtName(got)
                                                       << " (" << what << ")");
    CHILD_CHECK(ms < 5000, "" << c.name << ": rank " << e.rank << " took " << ms << " ms to fail");
    CHILD_CHECK(what.find(kNotSameOperation) != std::string::npos,
                "" << c.name << ": unclear message on rank " << e.rank << ": " << what);
    // The group is broken now: the next call fails at once.
    const uint64_t t1 = monoNowNs();
    Caught again = catchError([&] { pg.barrier()->wait(); });
    CHILD_CHECK(again == Caught::kMismatch, "after the mismatch: " << caughtName(again));
    CHILD_CHECK(msBetween(t1, monoNowNs()) < 500);
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << c.name << " on " << transport.name() << "\n" << describeAll(statuses);
}

std::vector<MismatchCase> mismatchCases() {
  auto tensor = [](std::vector<uint8_t>& s, DType d, int64_t n) {
    s.assign(static_cast<size_t>(n) * dtypeSize(d), 1);
    return TensorRef{s.data(), n, d};
  };
  return {
      {"allReduce count", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         return pg.allReduce(tensor(s, DType::kFloat32, odd ? 1001 : 1000));
       }},
      {"allReduce large count", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         return pg.allReduce(tensor(s, DType::kFloat32, odd ? 300001 : 300000));
       }},
      {"allReduce dtype", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         return pg.allReduce(tensor(s, odd ? DType::kInt32 : DType::kFloat32, 64));
       }},
      {"allReduce op", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         OpOptions o;
         o.op = odd ? ReduceOp::kMax : ReduceOp::kSum;
         return pg.allReduce(tensor(s, DType::kFloat32, 64), o);
       }},
      {"allReduce counts that pick different algorithms", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         // Either side of recursive doubling's threshold (64 KiB, or 512 KiB
         // on two ranks): halving-doubling (two and four ranks) or the ring
         // (three and five) above it.
         const int64_t rd = pg.size() > 2 ? 16000 : 131000;
         const int64_t above = pg.size() > 2 ? 16500 : 131200;
         return pg.allReduce(tensor(s, DType::kFloat32, odd ? above : rd));
       }},
      {"allGather counts that pick different algorithms", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         // Either side of the Bruck/ring threshold (an output of 1 MiB):
         // the two schedules share only their first step.
         const int64_t perRank = ((int64_t{1} << 20) / 4) / pg.size();
         static std::vector<float> in;
         in.assign(static_cast<size_t>(perRank + 1), 1.0f);
         const int64_t n = odd ? perRank + 1 : perRank - 1;
         return pg.allGatherIntoTensor(tensor(s, DType::kFloat32, n * pg.size()),
                                       TensorRef{in.data(), n, DType::kFloat32});
       }},
      {"reduceScatter counts that pick different algorithms", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         // Either side of recursive halving's threshold (an input of 4 MiB
         // on four ranks; two ranks run the ring either way).
         const int64_t perRank = ((int64_t{4} << 20) / 4) / pg.size();
         const int64_t n = odd ? perRank + 1 : perRank;
         static std::vector<float> in;
         in.assign(static_cast<size_t>((perRank + 1) * pg.size()), 1.0f);
         return pg.reduceScatterTensor(tensor(s, DType::kFloat32, n),
                                       TensorRef{in.data(), n * pg.size(), DType::kFloat32});
       }},
      {"allReduce vs allGather", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         if (!odd) return pg.allReduce(tensor(s, DType::kInt64, 8));
         s.assign(8 * 8 * static_cast<size_t>(pg.size()), 0);
         static std::vector<int64_t> in(8, 1);
         return pg.allGatherIntoTensor(TensorRef{s.data(), 8 * pg.size(), DType::kInt64},
                                 TensorRef{in.data(), 8, DType::kInt64});
       }},
  };
}

class Mismatch : public ::testing::TestWithParam<TransportCase> {};

TEST_P(Mismatch, EveryRankFailsPromptly) {
  for (const auto& c : mismatchCases()) {
    runMismatch(GetParam(), GetParam().p / 2, c);
  }
}

INSTANTIATE_TEST_SUITE_P(Conformance, Mismatch,
                         ::testing::Values(shmCase(2), shmCase(4), tcpCase(2), tcpCase(4),
                                           kHierarchical2x2),
                         TransportCaseName{});

// A different op, count or dtype in a call that skips the agreement step:
// every rank fails, and no rank's buffers changed (each holds a pattern of
// its own, compared after the failure). Small all_reduces over TCP use
// recursive doubling; 4 MiB ones the ring (P >= 3), whose reduce-scatter
// phase keeps partials in scratch; reduce_scatter's ring writes only its
// last step. Shared memory and the hierarchical variant are covered too.
enum class Disagree { kOp, kCount, kDtype };  // kDtype: float32 vs int32, the same bytes

struct UntouchedCase {
  const char* name;
  bool reduceScatter;
  int64_t count;  // elements per rank of the output
  Disagree what;
};

int32_t pattern(int rank, size_t i) { return static_cast<int32_t>(1000 * (rank + 1) + i % 977); }

void runUntouched(const TransportCase& transport, const UntouchedCase& c,
                  std::vector<std::pair<std::string, std::string>> env = {}) {
  JobOptions o;
  o.bound = 60s;
  o.timeout = 30s;
  o.env = std::move(env);
  auto statuses = runWorld(transport.p, withTransport(transport, o), [&](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const bool odd = e.rank == transport.p / 2;
    const int64_t n = c.count + (odd && c.what == Disagree::kCount ? 1 : 0);
    OpOptions op;
    op.op = odd && c.what == Disagree::kOp ? ReduceOp::kMax : ReduceOp::kSum;
    const DType dtype = odd && c.what == Disagree::kDtype ? DType::kFloat32 : DType::kInt32;
    std::vector<int32_t> out(static_cast<size_t>(n));
    for (size_t i = 0; i < out.size(); ++i) out[i] = pattern(e.rank, i);
    std::vector<int32_t> in(c.reduceScatter ? out.size() * static_cast<size_t>(pg.size()) : 0);
    for (size_t i = 0; i < in.size(); ++i) in[i] = pattern(e.rank + 100, i);
    std::string what;
    Caught got = catchError(
        [&] {
          if (c.reduceScatter) {
            pg.reduceScatterTensor(TensorRef{out.data(), n, dtype}, TensorRef{in.data(), n * pg.size(), dtype},
                                   op)
                ->wait();
          } else {
            pg.allReduce(TensorRef{out.data(), n, dtype}, op)->wait();
          }
        },
        &what);
    CHILD_CHECK(got == Caught::kMismatch,
                "" << c.name << ": rank " << e.rank << " got " << caughtName(got) << " (" << what << ")");
    for (size_t i = 0; i < out.size(); ++i) {
      CHILD_CHECK(out[i] == pattern(e.rank, i),
                  "" << c.name << ": rank " << e.rank << "'s output was written at element " << i);
    }
    for (size_t i = 0; i < in.size(); ++i) {
      CHILD_CHECK(in[i] == pattern(e.rank + 100, i),
                  "" << c.name << ": rank " << e.rank << "'s input was written at element " << i);
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << c.name << " on " << transport.name() << "\n" << describeAll(statuses);
}

constexpr int64_t k4MiBOfInt32 = int64_t{1} << 20;

TEST(MismatchAllReduceOp, OutputsUntouchedOverTcp) {
  for (int p : {3, 4, 5}) runUntouched(tcpCase(p), {"small allReduce op", false, 64, Disagree::kOp});
}

// Recursive halving and doubling writes `data` only after its
// reduce-scatter: every disagreement fails there, at 2 ranks, at powers of
// two and through the fold of the others.
TEST(MismatchAllReduceOp, HalvingDoublingLeavesOutputsOverTcp) {
  for (int p : {2, 3, 4, 5}) {
    for (Disagree d : {Disagree::kOp, Disagree::kCount, Disagree::kDtype}) {
      runUntouched(tcpCase(p), {"halving_doubling allReduce", false, 5000, d},
                   {{"MESHCOMM_ALGO_ALLREDUCE", "halving_doubling"}});
    }
  }
}

class MismatchLeavesOutputs : public ::testing::TestWithParam<TransportCase> {};

TEST_P(MismatchLeavesOutputs, LargeAllReduceAndReduceScatter) {
  for (const UntouchedCase& c : {UntouchedCase{"4 MiB allReduce op", false, k4MiBOfInt32, Disagree::kOp},
                                 UntouchedCase{"4 MiB allReduce count", false, k4MiBOfInt32, Disagree::kCount},
                                 UntouchedCase{"4 MiB allReduce dtype", false, k4MiBOfInt32, Disagree::kDtype},
                                 UntouchedCase{"4 MiB reduceScatter op", true, k4MiBOfInt32, Disagree::kOp},
                                 UntouchedCase{"4 MiB reduceScatter count", true, k4MiBOfInt32,
                                               Disagree::kCount},
                                 UntouchedCase{"4 MiB reduceScatter dtype", true, k4MiBOfInt32,
                                               Disagree::kDtype}}) {
    runUntouched(GetParam(), c);
  }
}

INSTANTIATE_TEST_SUITE_P(Conformance, MismatchLeavesOutputs,
                         ::testing::Values(tcpCase(3), tcpCase(4), shmCase(3), shmCase(4), kHierarchical2x2),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test
