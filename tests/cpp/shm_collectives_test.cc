// The shared-memory collectives under stress: each all_reduce algorithm
// forced, slots small enough that a 1 MiB message takes hundreds of
// rounds and leaves alignment remainders everywhere, outputs streamed past
// the caches, ranks that run ahead of a lagging reader, and all_to_all
// blocks of several rounds.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "caught_error.h"
#include "collective_matrix.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// 4 KiB slots turn a 1 MiB message into hundreds of double-buffered rounds,
// and leave alignment remainders in every slice and region.
class ShmAlgorithms : public ::testing::TestWithParam<TransportCase> {
 protected:
  void runMatrix(const MatrixSpec& spec, std::vector<std::pair<std::string, std::string>> env) {
    JobOptions o;
    o.bound = 150s;
    o.env = std::move(env);
    runMatrixJob(GetParam().p, spec, withTransport(GetParam(), o));
  }
  std::vector<ChildStatus> runJob(std::chrono::milliseconds bound, const RankBody& body,
                                  std::vector<std::pair<std::string, std::string>> env = {}) {
    JobOptions o;
    o.bound = bound;
    o.env = std::move(env);
    return runWorld(GetParam().p, withTransport(GetParam(), o), body);
  }
};

TEST_P(ShmAlgorithms, SliceParallelAllReduceWithTinySlots) {
  MatrixSpec spec{"shm_rsag slot=4096",
                  allFamilies(), true};
  runMatrix(spec, {{"MESHCOMM_ALGO_ALLREDUCE", "shm_rsag"}, {"MESHCOMM_SHM_SLOT_BYTES", "4096"}});
}

TEST_P(ShmAlgorithms, OneShotAllReduceWithOddSlots) {
  MatrixSpec spec{"shm_oneshot slot=12288", {Operation::kAllReduce, Operation::kReduce}, true};
  runMatrix(spec, {{"MESHCOMM_ALGO_ALLREDUCE", "shm_oneshot"}, {"MESHCOMM_SHM_SLOT_BYTES", "12288"}});
}

// Every output streamed past the caches (common/stream_copy.h), with slots
// small enough that the copies start and end at odd offsets.
TEST_P(ShmAlgorithms, StreamedOutputs) {
  MatrixSpec spec{"stream=1 slot=12288",
                  allFamilies(), true};
  runMatrix(spec, {{"MESHCOMM_SHM_STREAM_BYTES", "1"}, {"MESHCOMM_SHM_SLOT_BYTES", "12288"}});
}

// Every copy of 64 KiB or more into a slot with non-temporal stores, as
// SlotStores picks them while the readers' cores are far (on 2 cores only
// the 2-rank jobs have cores of their own and take that path).
TEST_P(ShmAlgorithms, StreamedSlots) {
  MatrixSpec spec{"slot stores=streaming", allFamilies(), true};
  runMatrix(spec, {{"MESHCOMM_SHM_SLOT_STORES", "streaming"}});
}

TEST_P(ShmAlgorithms, SingleCopyAllReduce) {
  MatrixSpec spec{"shm_single_copy", {Operation::kAllReduce}, true};
  runMatrix(spec, {{"MESHCOMM_ALGO_ALLREDUCE", "shm_single_copy"}});
}

// A root of small broadcasts (and the leaves of small reduces) publish and
// return, so they run up to ShmDomain::kDepth rounds ahead of the ranks that
// read them. One lagging reader, sizes either side of the inline and cell
// limits, and slot-based collectives in between: every result must still be
// exact, so no round may overwrite a cell or flag line before it was read.
TEST_P(ShmAlgorithms, SmallBroadcastsAndReducesRunAheadOfALaggingReader) {
  auto statuses = runJob(120s, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const int laggard = e.size - 1;
    const size_t sizes[] = {0, 4, 32, 33, 1000, 4096, 8};
    std::vector<uint8_t> buf(5000);
    // Collectives that sync every rank come hundreds of rounds apart, far
    // more than any run-ahead depth.
    for (int k = 0; k < 900; ++k) {
      if (e.rank == laggard && k % 37 == 0) std::this_thread::sleep_for(2ms);
      const int root = (k / 100) % e.size;  // long runs from one root
      // Now and then a size that takes the slots, which allow no run-ahead.
      const size_t n = k % 300 == 150 ? 4097 : sizes[static_cast<size_t>(k) % std::size(sizes)];
      auto fill = [&](size_t i) { return static_cast<uint8_t>(k * 31 + static_cast<int>(i) * 7 + root); };
      if (e.rank == root) {
        for (size_t i = 0; i < n; ++i) buf[i] = fill(i);
      } else {
        std::fill(buf.begin(), buf.end(), 0xee);
      }
      OpOptions b;
      b.root = root;
      CHILD_CHECK(pg.broadcast(TensorRef{buf.data(), static_cast<int64_t>(n), DType::kUInt8}, b)->wait(30s));
      for (size_t i = 0; i < n; ++i) {
        CHILD_CHECK(buf[i] == fill(i), "broadcast #" << k << " of " << n << " bytes from rank " << root
                                                     << ": byte " << i << " is " << int(buf[i]));
      }
      if (k % 3 == 0) {
        int64_t v[4] = {e.rank + k, 1, -e.rank, k};
        OpOptions r;
        r.root = (root + 1) % e.size;
        CHILD_CHECK(pg.reduce(TensorRef{v, 4, DType::kInt64}, r)->wait(30s));
        const int64_t p = e.size;
        if (e.rank == r.root) {
          CHILD_CHECK(v[0] == p * (p - 1) / 2 + p * k && v[1] == p && v[2] == -p * (p - 1) / 2 && v[3] == p * k,
                      "reduce #" << k << " got " << v[0] << " " << v[1] << " " << v[2] << " " << v[3]);
        }
      }
      if (k % 300 == 299) {
        std::vector<int32_t> x(3000, e.rank + 1);
        CHILD_CHECK(pg.allReduce(TensorRef{x.data(), 3000, DType::kInt32})->wait(30s));
        CHILD_CHECK(x[0] == e.size * (e.size + 1) / 2 && x[2999] == x[0]);
      }
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << "\n" << describeAll(statuses);
}

// Default sizes, blocks of several rounds each. Where the host's ranks
// outnumber its cores (P >= 3 on two cores) the slot is wider than a chunk
// and all_to_all moves a chunk per peer and round: every round, and the
// short last one of each block, must land at the right offset. Block sizes
// differ per pair and values per position, so a misplaced round shows.
TEST_P(ShmAlgorithms, AllToAllOfSeveralRoundsPerBlock) {
  auto statuses = runJob(150s, [](RankEnv& e) {
    // Elements from rank `from` to rank `to`: 2.5 default chunks and more.
    auto count = [](int from, int to) {
      return static_cast<int64_t>((5 * 512 * 1024 / 2 + 4096 * (from + 2 * to) + 12) / 4);
    };
    auto value = [](int from, int to, int64_t i) {
      return static_cast<float>((from * 31 + to * 7 + static_cast<size_t>(i)) % 100003);
    };
    for (int call = 0; call < 2; ++call) {
      checkAllToAllSingle<float>(e.pg(), count, value, true, "call " + std::to_string(call), 60s);
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << "\n" << describeAll(statuses);
}

// Equal blocks on either side of one region (the default slot's 512 KiB at
// 2 ranks, where regions carry no size and a region-sized block takes one
// round; a chunk per peer beyond): every byte must land, whatever the
// number of rounds the two sides count.
TEST_P(ShmAlgorithms, AllToAllBlocksAroundTheRegionSize) {
  auto statuses = runJob(150s, [](RankEnv& e) {
    constexpr int64_t kRegion = 512 * 1024 / 4;  // float32 elements
    auto value = [](int from, int to, int64_t i) {
      return static_cast<float>((from * 131 + to * 17 + i) % 65521);
    };
    for (int64_t block : {kRegion - 18, kRegion - 16, kRegion - 2, kRegion, kRegion + 2,
                          2 * kRegion, 2 * kRegion + 16}) {
      checkAllToAllSingle<float>(e.pg(), [block](int, int) { return block; }, value, false,
                                 "blocks of " + std::to_string(block) + " elements", 60s);
    }
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << "\n" << describeAll(statuses);
}

// With the agreement step off (MESHCOMM_CHECK=0), split sizes that disagree
// reach the shared-memory all_to_all itself, whose regions (or, at 2 ranks,
// flag lines) carry the block sizes: the receiver that expects another size
// fails with Mismatch instead of reading the wrong bytes.
TEST_P(ShmAlgorithms, AllToAllSizesThatDisagreeFailWithoutTheAgreementStep) {
  auto statuses = runJob(60s, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const auto p = static_cast<size_t>(e.size);
    // Every rank sends 100 elements to each peer; the last rank expects 200
    // from rank 0.
    std::vector<int64_t> sends(p, 100), recvs(p, 100);
    if (e.rank == e.size - 1) recvs[0] = 200;
    const int64_t sendTotal = std::accumulate(sends.begin(), sends.end(), int64_t{0});
    const int64_t recvTotal = std::accumulate(recvs.begin(), recvs.end(), int64_t{0});
    std::vector<float> in(static_cast<size_t>(sendTotal), 1.0f), out(static_cast<size_t>(recvTotal));
    std::string what;
    const Caught got = catchError(
        [&] {
          pg.allToAllSingle(TensorRef{out.data(), recvTotal, DType::kFloat32},
                            TensorRef{in.data(), sendTotal, DType::kFloat32}, recvs, sends)
              ->wait(30s);
        },
        &what);
    if (e.rank == e.size - 1) {
      CHILD_CHECK(got == Caught::kMismatch, "got " << caughtName(got) << " (" << what << ")");
      CHILD_CHECK(what.find("sends 400 bytes to this rank, which expects 800") != std::string::npos,
                  "unclear message: " << what);
    } else {
      // The others may finish before the mismatch is found, or fail with it.
      CHILD_CHECK(got == Caught::kNone || got == Caught::kMismatch,
                  "got " << caughtName(got) << " (" << what << ")");
    }
    return kExitOk;
  }, {{"MESHCOMM_CHECK", "0"}});
  EXPECT_TRUE(allOk(statuses)) << "\n" << describeAll(statuses);
}


INSTANTIATE_TEST_SUITE_P(Shm, ShmAlgorithms,
                         ::testing::Values(shmCase(2), shmCase(3), shmCase(4), shmCase(5), shmCase(8)),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test
