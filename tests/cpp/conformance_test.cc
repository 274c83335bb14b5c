// The conformance suite: the same collective tests on every transport
// (transport_cases.h), each transport and layout a test case of its own.
//
// EveryCollective runs the whole matrix (collective_matrix.h) with the
// default algorithm choice on P in {1, 2, 3, 4, 5, 8} ranks over shared
// memory, {2, 3, 5, 8} over TCP (the odd and non-power-of-two sizes are
// where schedules fold ranks in) and three emulated-host layouts;
// InPlace checks the in-place forms on each transport. Ranks that
// disagree are in conformance_mismatch_test.cc, many operations in flight
// in conformance_async_test.cc.
#include <sched.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "collective_matrix.h"
#include "collectives/blocks.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

class EveryCollective : public ::testing::TestWithParam<TransportCase> {};

TEST_P(EveryCollective, DtypesOpsSizes) {
  const TransportCase& c = GetParam();
  JobOptions o;
  o.bound = 150s;
  // Small slots make the hierarchical algorithms' shared-memory phases run
  // many rounds even for the middle sizes; small pieces pipeline the
  // all_reduce between two hosts from 16 KiB (the 1 MiB size in 64 pieces).
  if (c.kind == TransportKind::kHierarchical) {
    o.env = {{"MESHCOMM_SHM_SLOT_BYTES", "8192"}, {"MESHCOMM_HIER_PIECE_BYTES", "16384"}};
  }
  runMatrixJob(c.p, MatrixSpec{c.name(), allFamilies()}, withTransport(c, o));
}

INSTANTIATE_TEST_SUITE_P(Conformance, EveryCollective,
                         ::testing::Values(shmCase(1), shmCase(2), shmCase(3), shmCase(4),
                                           shmCase(5), shmCase(8), tcpCase(2), tcpCase(3),
                                           tcpCase(5), tcpCase(8), kHierarchical3x2,
                                           kHierarchicalInterleaved, kHierarchicalLoneRank),
                         TransportCaseName{});

// The collectives that take a block per rank on more ranks than a call
// keeps blocks for inline (BlockList::kInline), and than the machine has
// cores: every list, split and exchange past that boundary.
class ManyRanks : public ::testing::TestWithParam<TransportCase> {};

TEST_P(ManyRanks, PerRankBlocks) {
  static_assert(BlockList::kInline < 10);
  JobOptions o;
  o.bound = 150s;
  MatrixSpec spec{GetParam().name(),
                  {Operation::kAllGather, Operation::kAllGatherIntoTensor, Operation::kGather,
                   Operation::kGatherIntoTensor, Operation::kScatter, Operation::kScatterTensor,
                   Operation::kAllToAll, Operation::kAllToAllSingle, kAllToAllSingleCounts,
                   Operation::kReduceScatter},
                  /*withLarge=*/false};
  runMatrixJob(GetParam().p, spec, withTransport(GetParam(), o));
}

INSTANTIATE_TEST_SUITE_P(Conformance, ManyRanks, ::testing::Values(shmCase(10), tcpCase(10)),
                         TransportCaseName{});

// reduceScatterTensor whose output is this rank's own block of the input,
// and allGatherIntoTensor whose input is its own block of the output (the
// in-place forms NCCL users rely on), on every rank including those whose
// block is not the first: small, and large enough for many rounds.
int inPlaceOnOwnBlock(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  for (int64_t block : {int64_t{5}, int64_t{300001}}) {
    std::vector<float> data(static_cast<size_t>(block * e.size));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>((i % 1000) + e.rank);
    float* own = data.data() + block * e.rank;
    CHILD_CHECK(pg.reduceScatterTensor(TensorRef{own, block, DType::kFloat32},
                                       TensorRef{data.data(), block * e.size, DType::kFloat32})
                    ->wait(30s));
    const int64_t ranksSum = e.size * (e.size - 1) / 2;
    for (int64_t i = 0; i < block; ++i) {
      const auto at = static_cast<size_t>(block * e.rank + i);
      const float want = static_cast<float>(e.size * static_cast<int64_t>(at % 1000) + ranksSum);
      CHILD_CHECK(own[i] == want, "block " << block << " element " << i << ": " << own[i]
                                           << ", want " << want);
    }
    // all_gather_into_tensor whose input is this rank's block of the output.
    for (size_t i = 0; i < data.size(); ++i) data[i] = -1.0f;
    for (int64_t i = 0; i < block; ++i) own[i] = static_cast<float>(e.rank * 1000 + i % 1000);
    CHILD_CHECK(pg.allGatherIntoTensor(TensorRef{data.data(), block * e.size, DType::kFloat32},
                                 TensorRef{own, block, DType::kFloat32})
                    ->wait(30s));
    for (int r = 0; r < e.size; ++r) {
      for (int64_t i = 0; i < block; ++i) {
        const float got = data[static_cast<size_t>(block * r + i)];
        CHILD_CHECK(got == static_cast<float>(r * 1000 + i % 1000),
                    "all_gather block " << block << " of rank " << r << " element " << i << ": " << got);
      }
    }
  }
  // Overlapping, but not this rank's block (or all_to_all on one
  // buffer): refused before any communication, on every rank alike.
  std::vector<float> data(12);
  Caught c = catchError([&] {
    pg.reduceScatterTensor(TensorRef{data.data() + 1, 12 / e.size, DType::kFloat32},
                           TensorRef{data.data(), 12, DType::kFloat32});
  });
  CHILD_CHECK(c == Caught::kInvalidArgument, "partial overlap: " << caughtName(c));
  c = catchError([&] {
    pg.allToAllSingle(TensorRef{data.data(), 12, DType::kFloat32}, TensorRef{data.data(), 12, DType::kFloat32},
                      {}, {});
  });
  CHILD_CHECK(c == Caught::kInvalidArgument, "all_to_all_single in place: " << caughtName(c));
  return kExitOk;
}

// all_reduce of a buffer of several default pieces (4 MiB) and a partial
// last one, which two hosts pipeline: sum and max, float32 and int64, the
// values different on every rank and element.
int largeAllReduce(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  constexpr int64_t kCount = (int64_t{9} << 20) / 4 + 7;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    std::vector<float> f(static_cast<size_t>(kCount));
    std::vector<int64_t> n(static_cast<size_t>(kCount / 2));
    for (size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>((i * 7 + e.rank * 13) % 1000);
    for (size_t i = 0; i < n.size(); ++i) n[i] = static_cast<int64_t>(i) * (e.rank + 1);
    CHILD_CHECK(pg.allReduce(TensorRef{f.data(), kCount, DType::kFloat32}, OpOptions{.op = op})->wait(60s));
    CHILD_CHECK(pg.allReduce(TensorRef{n.data(), kCount / 2, DType::kInt64}, OpOptions{.op = op})->wait(60s));
    for (size_t i = 0; i < f.size(); ++i) {
      float want = op == ReduceOp::kSum ? 0.0f : -1.0f;
      for (int r = 0; r < e.size; ++r) {
        const auto v = static_cast<float>((i * 7 + r * 13) % 1000);
        want = op == ReduceOp::kSum ? want + v : std::max(want, v);
      }
      CHILD_CHECK(f[i] == want, "float32 element " << i << ": " << f[i] << ", want " << want);
    }
    const int64_t factor = op == ReduceOp::kSum ? e.size * (e.size + 1) / 2 : e.size;
    for (size_t i = 0; i < n.size(); ++i) {
      CHILD_CHECK(n[i] == static_cast<int64_t>(i) * factor,
                  "int64 element " << i << ": " << n[i] << ", want " << i * factor);
    }
  }
  return kExitOk;
}

class LargeAllReduce : public ::testing::TestWithParam<TransportCase> {};

TEST_P(LargeAllReduce, SeveralPiecesAndAPartialOne) {
  JobOptions o;
  o.bound = 120s;
  expectJobOk(GetParam(), o, largeAllReduce);
}

// Slots of 12 KiB and pieces of an odd size: the host's sum takes hundreds
// of shared-memory rounds per piece, with remainders at every boundary, on
// hosts of two ranks (the leader adds the other's slot to its own data) and
// of three (the slices) alike.
TEST_P(LargeAllReduce, OddSlotsAndPieces) {
  JobOptions o;
  o.bound = 120s;
  o.env = {{"MESHCOMM_SHM_SLOT_BYTES", "12288"}, {"MESHCOMM_HIER_PIECE_BYTES", "1048588"}};
  expectJobOk(GetParam(), o, largeAllReduce);
}

// Every rank on one core, so each host's ranks outnumber its cores: the
// slots are wider than the chunk there, and a host of two ranks sums and
// broadcasts each piece in rounds as wide as the slot.
TEST_P(LargeAllReduce, MoreRanksThanCores) {
  // This process on its first allowed core while the ranks start (they
  // inherit it), and back on all of them however the test ends.
  struct OnOneCore {
    cpu_set_t saved;
    bool pinned = false;
    OnOneCore() {
      if (sched_getaffinity(0, sizeof(saved), &saved) != 0) return;
      int first = 0;
      while (first < CPU_SETSIZE && !CPU_ISSET(first, &saved)) ++first;
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(first, &one);
      pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
    }
    ~OnOneCore() {
      if (pinned) sched_setaffinity(0, sizeof(saved), &saved);
    }
  } oneCore;
  ASSERT_TRUE(oneCore.pinned) << "sched_setaffinity failed";
  JobOptions o;
  o.bound = 120s;
  expectJobOk(GetParam(), o, largeAllReduce);
}

INSTANTIATE_TEST_SUITE_P(Conformance, LargeAllReduce,
                         ::testing::Values(kHierarchical2x2, kHierarchicalLoneRank),
                         TransportCaseName{});

class InPlace : public ::testing::TestWithParam<TransportCase> {};

TEST_P(InPlace, ReduceScatterAndAllGatherOnOwnBlock) {
  JobOptions o;
  o.bound = 60s;
  expectJobOk(GetParam(), o, inPlaceOnOwnBlock);
}

INSTANTIATE_TEST_SUITE_P(Conformance, InPlace,
                         ::testing::Values(shmCase(3), shmCase(4), tcpCase(3), tcpCase(4),
                                           kHierarchical2x2),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test
