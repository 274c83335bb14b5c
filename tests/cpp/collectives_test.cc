// Every collective on real multi-process jobs: each family x every dtype x
// every op it supports x sizes {0, 1, 7, 1024, 1 MiB + a few elements} x
// P in {1, 2, 3, 4, 5, 8}, with roots rotating over all ranks; the same
// for the algorithms forced one by one (ring, recursive doubling, binomial
// tree, chain, reduce-scatter + gather) with small pipeline chunks; many
// operations in flight at once; and ranks that disagree about a
// collective (Mismatch on every rank, promptly).
//
// One job per P runs the whole matrix inside its children (forking 8
// ranks costs ~100 ms, so one job per combination would be far too slow).
// Every check is bitwise against collective_harness.h's serial reference
// (complex products: +0 == -0, see canonicalizeComplexZeros). Outputs start
// poisoned and carry a guard byte, so unwritten elements and writes past
// the end are caught; inputs that must stay untouched are re-checked.
// Half of the calls are blocking (run on the caller's thread), half go
// through the executor; roots rotate over every rank.
//
// Sizes: for allReduce, broadcast and reduce, n is the tensor's element
// count. For the gather/scatter/all-to-all/reduce-scatter families it is
// the per-rank block, except that the large size is split over the ranks
// (block = n / P, made odd) so every rank moves about 1 MiB.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "collective_harness.h"
#include "scoped_env.h"

namespace meshcomm {
namespace {

using namespace std::chrono_literals;
using test::Buffer;
using test::Domain;
using test::RankEnv;

enum class Family {
  kAllReduce,
  kBroadcast,
  kReduce,
  kAllGather,
  kAllGatherIntoTensor,
  kAllGatherIntoTensorUneven,
  kReduceScatter,
  kReduceScatterTensor,
  kReduceScatterTensorUneven,
  kGather,
  kGatherIntoTensor,
  kScatter,
  kScatterTensor,
  kAllToAll,
  kAllToAllSingle,
  kAllToAllSingleCounts,
};

constexpr Family kAllFamilies[] = {
    Family::kAllReduce,           Family::kBroadcast,
    Family::kReduce,              Family::kAllGather,
    Family::kAllGatherIntoTensor, Family::kAllGatherIntoTensorUneven,
    Family::kReduceScatter,       Family::kReduceScatterTensor,
    Family::kReduceScatterTensorUneven,
    Family::kGather,              Family::kGatherIntoTensor,
    Family::kScatter,             Family::kScatterTensor,
    Family::kAllToAll,            Family::kAllToAllSingle,
    Family::kAllToAllSingleCounts};

const char* familyName(Family f) {
  switch (f) {
    case Family::kAllReduce: return "allReduce";
    case Family::kBroadcast: return "broadcast";
    case Family::kReduce: return "reduce";
    case Family::kAllGather: return "allGather";
    case Family::kAllGatherIntoTensor: return "allGatherIntoTensor";
    case Family::kAllGatherIntoTensorUneven: return "allGatherIntoTensorUneven";
    case Family::kReduceScatter: return "reduceScatter";
    case Family::kReduceScatterTensor: return "reduceScatterTensor";
    case Family::kReduceScatterTensorUneven: return "reduceScatterTensorUneven";
    case Family::kGather: return "gather";
    case Family::kGatherIntoTensor: return "gatherIntoTensor";
    case Family::kScatter: return "scatter";
    case Family::kScatterTensor: return "scatterTensor";
    case Family::kAllToAll: return "allToAll";
    case Family::kAllToAllSingle: return "allToAllSingle";
    case Family::kAllToAllSingleCounts: return "allToAllSingle(counts)";
  }
  return "?";
}

bool takesOp(Family f) {
  return f == Family::kAllReduce || f == Family::kReduce || f == Family::kReduceScatter ||
         f == Family::kReduceScatterTensor || f == Family::kReduceScatterTensorUneven;
}

// 1 MiB of elements plus three (an odd count for every element size).
int64_t largeCount(DType d) { return static_cast<int64_t>((size_t{1} << 20) / dtypeSize(d)) + 3; }

// Per-rank block for the block-structured families.
int64_t blockCount(int64_t n, bool large, int p) { return large ? (std::max<int64_t>(1, n / p) | 1) : n; }

// Uneven split sizes: different per rank, one rank contributing nothing
// when P > 2.
std::vector<int64_t> unevenCounts(int64_t m, int p) {
  std::vector<int64_t> c(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    c[static_cast<size_t>(r)] = (p > 2 && r == p - 1) ? 0 : std::max<int64_t>(0, m + (r % 3) - 1);
  }
  return c;
}

// Elements rank i sends rank j in the uneven all-to-alls: differs per pair.
int64_t pairCount(int64_t m, int i, int j) {
  if (m == 0) return 0;
  return std::max<int64_t>(0, m + ((i * 3 + j * 5) % 7) - 3);
}

std::vector<int64_t> prefix(const std::vector<int64_t>& c) {
  std::vector<int64_t> o(c.size() + 1, 0);
  for (size_t i = 0; i < c.size(); ++i) o[i + 1] = o[i] + c[i];
  return o;
}

struct MatrixSpec {
  std::string label;
  std::vector<Family> families;
  bool withLarge = true;
};

// Runs the matrix inside one rank. Every rank runs the same loops, so the
// sequence of collectives (and the salts) agree.
class MatrixRunner {
 public:
  explicit MatrixRunner(RankEnv& env)
      : env_(env), pg_(env.pg()), rank_(env.rank), p_(env.size), all_(test::ranksUpTo(env.size)) {}

  void runAll(const MatrixSpec& spec) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> smallSizes = {0, 1, 7, 1024};
    for (int pass = 0; pass < (spec.withLarge ? 5 : 4); ++pass) {
      const bool large = pass == 4;
      for (DType d : test::kAllDTypes) {
        const int64_t n = large ? largeCount(d) : smallSizes[static_cast<size_t>(pass)];
        for (Family f : spec.families) {
          if (takesOp(f)) {
            for (ReduceOp op : test::kAllOps) {
              if (!reduceOpSupports(op, d)) continue;
              runOne(f, d, op, n, large);
            }
          } else {
            runOne(f, d, ReduceOp::kSum, n, large);
          }
        }
      }
      checkBarrier();
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rank_ == 0) {
      std::fprintf(stderr, "[%s P=%d] %d checks in %.2f s\n", spec.label.c_str(), p_, checks_, secs);
    }
  }

  // A barrier is checked through the store: every rank counts itself in
  // before entering, so after it every rank must see all P.
  void checkBarrier() {
    std::string key = "barrier/" + std::to_string(barriers_++);
    env_.store->add(key, 1);
    pg_.barrier(options())->wait();
    const int64_t seen = env_.store->add(key, 0);
    CHILD_CHECK(seen == p_, "barrier returned when only " << seen << " of " << p_ << " ranks had entered");
    ++checks_;
  }

 private:
  OpOptions options(ReduceOp op = ReduceOp::kSum, int root = 0) {
    OpOptions o;
    o.op = op;
    o.root = root;
    // Half the calls run synchronously on the calling thread, half go
    // through the executor thread and Work::wait().
    o.blocking = (checks_ % 2) == 0;
    return o;
  }

  void finish(const WorkPtr& w) {
    CHILD_CHECK(w != nullptr);
    w->wait();
    CHILD_CHECK(w->isCompleted() && !w->failed());
  }

  void expectSame(const char* what, DType d, const void* got, const void* want, size_t n) {
    if (complexProd_) {
      // The one documented exception to bitwise comparison (see
      // canonicalizeComplexZeros). Both sides are scratch copies here.
      test::canonicalizeComplexZeros(d, const_cast<void*>(got), n);
      test::canonicalizeComplexZeros(d, const_cast<void*>(want), n);
    }
    std::string diff = test::firstDifference(d, got, want, n);
    CHILD_CHECK(diff.empty(), "rank " << rank_ << "/" << p_ << " " << ctx_ << " " << what << ": " << diff);
  }

  void expectGuard(const Buffer& b) {
    CHILD_CHECK(b.bytes.back() == 0xA5, "rank " << rank_ << " " << ctx_ << ": wrote past the end");
  }

  Buffer input(DType d, Domain dom, int who, int64_t first, int64_t n) {
    Buffer b(d, n);
    test::fillInput(d, dom, salt_, who, static_cast<size_t>(first), static_cast<size_t>(n), b.data());
    return b;
  }

  void expectInput(const char* what, const Buffer& got, size_t gotOffset, Domain dom, int who,
                   int64_t first, int64_t n) {
    Buffer want = input(got.dtype, dom, who, first, n);
    expectSame(what, got.dtype, got.bytes.data() + gotOffset * dtypeSize(got.dtype), want.data(),
               static_cast<size_t>(n));
  }

  void expectReduced(const char* what, const Buffer& got, size_t gotOffset, ReduceOp op,
                     int64_t first, int64_t n) {
    Buffer want(got.dtype, n);
    test::fillReduced(got.dtype, op, salt_, all_, static_cast<size_t>(first), static_cast<size_t>(n),
                      want.data());
    expectSame(what, got.dtype, got.bytes.data() + gotOffset * dtypeSize(got.dtype), want.data(),
               static_cast<size_t>(n));
  }

  void runOne(Family f, DType d, ReduceOp op, int64_t n, bool large) {
    ++salt_;
    const int root = static_cast<int>(salt_ % static_cast<uint64_t>(p_));
    const Domain dom = takesOp(f) ? test::domainOf(op) : Domain::kRaw;
    const int64_t m = blockCount(n, large, p_);
    complexProd_ = takesOp(f) && op == ReduceOp::kProd && (d == DType::kComplex64 || d == DType::kComplex128);
    ctx_ = std::string(familyName(f)) + " " + dtypeName(d) + (takesOp(f) ? std::string(" ") + reduceOpName(op) : "") +
           " n=" + std::to_string(n) + " root=" + std::to_string(root);
    switch (f) {
      case Family::kAllReduce: {
        Buffer b = input(d, dom, rank_, 0, n);
        finish(pg_.allReduce(b.ref(), options(op)));
        expectReduced("result", b, 0, op, 0, n);
        expectGuard(b);
        break;
      }
      case Family::kBroadcast: {
        Buffer b = rank_ == root ? input(d, dom, root, 0, n) : Buffer(d, n);
        finish(pg_.broadcast(b.ref(), options(op, root)));
        expectInput("result", b, 0, dom, root, 0, n);
        expectGuard(b);
        break;
      }
      case Family::kReduce: {
        Buffer b = input(d, dom, rank_, 0, n);
        finish(pg_.reduce(b.ref(), options(op, root)));
        if (rank_ == root) {
          expectReduced("root result", b, 0, op, 0, n);
        } else {
          expectInput("non-root buffer (must be untouched)", b, 0, dom, rank_, 0, n);
        }
        expectGuard(b);
        break;
      }
      case Family::kAllGather: {
        Buffer in = input(d, dom, rank_, 0, m);
        std::vector<Buffer> outs;
        std::vector<TensorRef> refs;
        for (int r = 0; r < p_; ++r) outs.emplace_back(d, m);
        for (auto& o : outs) refs.push_back(o.ref());
        finish(pg_.allGather(refs, in.ref(), options()));
        for (int r = 0; r < p_; ++r) {
          expectInput("outputs[r]", outs[static_cast<size_t>(r)], 0, dom, r, 0, m);
          expectGuard(outs[static_cast<size_t>(r)]);
        }
        break;
      }
      case Family::kAllGatherIntoTensor: {
        Buffer in = input(d, dom, rank_, 0, m);
        Buffer out(d, m * p_);
        finish(pg_.allGatherIntoTensor(out.ref(), in.ref(), options()));
        for (int r = 0; r < p_; ++r) expectInput("block r", out, static_cast<size_t>(r * m), dom, r, 0, m);
        expectGuard(out);
        break;
      }
      case Family::kAllGatherIntoTensorUneven: {
        auto counts = unevenCounts(m, p_);
        auto offs = prefix(counts);
        Buffer in = input(d, dom, rank_, 0, counts[static_cast<size_t>(rank_)]);
        Buffer out(d, offs.back());
        finish(pg_.allGatherIntoTensorUneven(out.ref(), in.ref(), counts, options()));
        for (int r = 0; r < p_; ++r) {
          expectInput("block r", out, static_cast<size_t>(offs[static_cast<size_t>(r)]), dom, r, 0,
                      counts[static_cast<size_t>(r)]);
        }
        expectGuard(out);
        break;
      }
      case Family::kReduceScatter: {
        std::vector<Buffer> ins;
        std::vector<TensorRef> refs;
        for (int j = 0; j < p_; ++j) ins.push_back(input(d, dom, rank_, j * m, m));
        for (auto& b : ins) refs.push_back(b.ref());
        Buffer out(d, m);
        finish(pg_.reduceScatter(out.ref(), refs, options(op)));
        expectReduced("result", out, 0, op, rank_ * m, m);
        expectGuard(out);
        for (int j = 0; j < p_; ++j) {
          expectInput("input (must be untouched)", ins[static_cast<size_t>(j)], 0, dom, rank_, j * m, m);
        }
        break;
      }
      case Family::kReduceScatterTensor: {
        Buffer in = input(d, dom, rank_, 0, m * p_);
        Buffer out(d, m);
        finish(pg_.reduceScatterTensor(out.ref(), in.ref(), options(op)));
        expectReduced("result", out, 0, op, rank_ * m, m);
        expectGuard(out);
        expectInput("input (must be untouched)", in, 0, dom, rank_, 0, m * p_);
        break;
      }
      case Family::kReduceScatterTensorUneven: {
        auto counts = unevenCounts(m, p_);
        auto offs = prefix(counts);
        Buffer in = input(d, dom, rank_, 0, offs.back());
        Buffer out(d, counts[static_cast<size_t>(rank_)]);
        finish(pg_.reduceScatterTensorUneven(out.ref(), in.ref(), counts, options(op)));
        expectReduced("result", out, 0, op, offs[static_cast<size_t>(rank_)], counts[static_cast<size_t>(rank_)]);
        expectGuard(out);
        break;
      }
      case Family::kGather: {
        Buffer in = input(d, dom, rank_, 0, m);
        std::vector<Buffer> outs;
        std::vector<TensorRef> refs;
        if (rank_ == root) {
          for (int r = 0; r < p_; ++r) outs.emplace_back(d, m);
          for (auto& o : outs) refs.push_back(o.ref());
        }
        finish(pg_.gather(refs, in.ref(), options(op, root)));
        if (rank_ == root) {
          for (int r = 0; r < p_; ++r) {
            expectInput("outputs[r]", outs[static_cast<size_t>(r)], 0, dom, r, 0, m);
            expectGuard(outs[static_cast<size_t>(r)]);
          }
        }
        break;
      }
      case Family::kGatherIntoTensor: {
        Buffer in = input(d, dom, rank_, 0, m);
        Buffer out = rank_ == root ? Buffer(d, m * p_) : Buffer();
        finish(pg_.gatherIntoTensor(rank_ == root ? out.ref() : TensorRef{}, in.ref(), options(op, root)));
        if (rank_ == root) {
          for (int r = 0; r < p_; ++r) expectInput("block r", out, static_cast<size_t>(r * m), dom, r, 0, m);
          expectGuard(out);
        }
        break;
      }
      case Family::kScatter: {
        std::vector<Buffer> ins;
        std::vector<TensorRef> refs;
        if (rank_ == root) {
          for (int j = 0; j < p_; ++j) ins.push_back(input(d, dom, root, j * m, m));
          for (auto& b : ins) refs.push_back(b.ref());
        }
        Buffer out(d, m);
        finish(pg_.scatter(out.ref(), refs, options(op, root)));
        expectInput("result", out, 0, dom, root, rank_ * m, m);
        expectGuard(out);
        break;
      }
      case Family::kScatterTensor: {
        Buffer in = rank_ == root ? input(d, dom, root, 0, m * p_) : Buffer();
        Buffer out(d, m);
        finish(pg_.scatterTensor(out.ref(), rank_ == root ? in.ref() : TensorRef{}, options(op, root)));
        expectInput("result", out, 0, dom, root, rank_ * m, m);
        expectGuard(out);
        break;
      }
      case Family::kAllToAll: {
        // Rank i's conceptual input is the concatenation of its messages
        // to ranks 0..P-1 (pairCount(m, i, j) elements each).
        auto sendOffsets = [&](int i) {
          std::vector<int64_t> c;
          for (int j = 0; j < p_; ++j) c.push_back(pairCount(m, i, j));
          return prefix(c);
        };
        auto mine = sendOffsets(rank_);
        std::vector<Buffer> ins, outs;
        std::vector<TensorRef> inRefs, outRefs;
        for (int j = 0; j < p_; ++j) {
          ins.push_back(input(d, dom, rank_, mine[static_cast<size_t>(j)], pairCount(m, rank_, j)));
          outs.emplace_back(d, pairCount(m, j, rank_));
        }
        for (auto& b : ins) inRefs.push_back(b.ref());
        for (auto& b : outs) outRefs.push_back(b.ref());
        finish(pg_.allToAll(outRefs, inRefs, options()));
        for (int i = 0; i < p_; ++i) {
          auto theirs = sendOffsets(i);
          expectInput("outputs[i]", outs[static_cast<size_t>(i)], 0, dom, i, theirs[static_cast<size_t>(rank_)],
                      pairCount(m, i, rank_));
          expectGuard(outs[static_cast<size_t>(i)]);
        }
        break;
      }
      case Family::kAllToAllSingle: {
        Buffer in = input(d, dom, rank_, 0, m * p_);
        Buffer out(d, m * p_);
        finish(pg_.allToAllSingle(out.ref(), in.ref(), {}, {}, options()));
        for (int i = 0; i < p_; ++i) {
          expectInput("block i", out, static_cast<size_t>(i * m), dom, i, rank_ * m, m);
        }
        expectGuard(out);
        break;
      }
      case Family::kAllToAllSingleCounts: {
        std::vector<int64_t> sendCounts, recvCounts;
        for (int j = 0; j < p_; ++j) {
          sendCounts.push_back(pairCount(m, rank_, j));
          recvCounts.push_back(pairCount(m, j, rank_));
        }
        auto sendOffs = prefix(sendCounts);
        auto recvOffs = prefix(recvCounts);
        Buffer in = input(d, dom, rank_, 0, sendOffs.back());
        Buffer out(d, recvOffs.back());
        finish(pg_.allToAllSingle(out.ref(), in.ref(), recvCounts, sendCounts, options()));
        for (int i = 0; i < p_; ++i) {
          std::vector<int64_t> theirCounts;
          for (int j = 0; j < p_; ++j) theirCounts.push_back(pairCount(m, i, j));
          auto theirOffs = prefix(theirCounts);
          expectInput("block i", out, static_cast<size_t>(recvOffs[static_cast<size_t>(i)]), dom, i,
                      theirOffs[static_cast<size_t>(rank_)], recvCounts[static_cast<size_t>(i)]);
        }
        expectGuard(out);
        break;
      }
    }
    ++checks_;
  }

  RankEnv& env_;
  ProcessGroup& pg_;
  const int rank_;
  const int p_;
  const std::vector<int> all_;
  uint64_t salt_ = 0x5EED0000;
  int checks_ = 0;
  int barriers_ = 0;
  std::string ctx_;
  bool complexProd_ = false;
};

void runMatrixJob(int p, const MatrixSpec& spec, std::vector<std::pair<std::string, std::string>> env,
                  std::chrono::milliseconds bound,
                  std::function<std::vector<std::pair<std::string, std::string>>(int)> rankEnv = {}) {
  test::JobOptions o;
  o.env = std::move(env);
  o.rankEnv = std::move(rankEnv);
  o.bound = bound;
  auto statuses = test::runWorld(p, o, [&spec](RankEnv& e) {
    MatrixRunner runner(e);
    runner.runAll(spec);
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << spec.label << " P=" << p << "\n" << test::describeAll(statuses);
}

// ---- the full matrix, default algorithm choice -----------------------------------

class CollMatrix : public ::testing::TestWithParam<int> {};

TEST_P(CollMatrix, EveryCollectiveDtypeOpAndSize) {
  MatrixSpec spec{"auto", std::vector<Family>(std::begin(kAllFamilies), std::end(kAllFamilies)), true};
  runMatrixJob(GetParam(), spec, {}, 150s);
}

INSTANTIATE_TEST_SUITE_P(Coll, CollMatrix, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// The same over TCP between the ranks of this host (shared memory off).
class CollMatrixTcp : public ::testing::TestWithParam<int> {};

TEST_P(CollMatrixTcp, EveryCollectiveDtypeOpAndSize) {
  MatrixSpec spec{"auto, MESHCOMM_SHM=0",
                  std::vector<Family>(std::begin(kAllFamilies), std::end(kAllFamilies)), true};
  runMatrixJob(GetParam(), spec, {{"MESHCOMM_SHM", "0"}}, 150s);
}

INSTANTIATE_TEST_SUITE_P(Coll, CollMatrixTcp, ::testing::Values(2, 3, 5, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// ---- shared memory: tiny slots, each all_reduce algorithm --------------------------

// 4 KiB slots turn a 1 MiB message into hundreds of double-buffered rounds,
// and leave alignment remainders in every slice and region.
class CollShm : public ::testing::TestWithParam<int> {};

TEST_P(CollShm, SliceParallelAllReduceWithTinySlots) {
  MatrixSpec spec{"shm_rsag slot=4096",
                  std::vector<Family>(std::begin(kAllFamilies), std::end(kAllFamilies)), true};
  runMatrixJob(GetParam(), spec,
               {{"MESHCOMM_ALGO_ALLREDUCE", "shm_rsag"}, {"MESHCOMM_SHM_SLOT_BYTES", "4096"}}, 150s);
}

TEST_P(CollShm, OneShotAllReduceWithOddSlots) {
  MatrixSpec spec{"shm_oneshot slot=12288", {Family::kAllReduce, Family::kReduce}, true};
  runMatrixJob(GetParam(), spec,
               {{"MESHCOMM_ALGO_ALLREDUCE", "shm_oneshot"}, {"MESHCOMM_SHM_SLOT_BYTES", "12288"}},
               150s);
}

// Every output streamed past the caches (common/stream_copy.h), with slots
// small enough that the copies start and end at odd offsets.
TEST_P(CollShm, StreamedOutputs) {
  MatrixSpec spec{"stream=1 slot=12288",
                  std::vector<Family>(std::begin(kAllFamilies), std::end(kAllFamilies)), true};
  runMatrixJob(GetParam(), spec,
               {{"MESHCOMM_SHM_STREAM_BYTES", "1"}, {"MESHCOMM_SHM_SLOT_BYTES", "12288"}}, 150s);
}

TEST_P(CollShm, SingleCopyAllReduce) {
  MatrixSpec spec{"shm_single_copy", {Family::kAllReduce}, true};
  runMatrixJob(GetParam(), spec, {{"MESHCOMM_ALGO_ALLREDUCE", "shm_single_copy"}}, 150s);
}

// A root of small broadcasts (and the leaves of small reduces) publish and
// return, so they run up to ShmDomain::kDepth rounds ahead of the ranks that
// read them. One lagging reader, sizes either side of the inline and cell
// limits, and slot-based collectives in between: every result must still be
// exact, so no round may overwrite a cell or flag line before it was read.
TEST_P(CollShm, SmallBroadcastsAndReducesRunAheadOfALaggingReader) {
  test::JobOptions o;
  o.bound = 120s;
  auto statuses = test::runWorld(GetParam(), o, [](RankEnv& e) {
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
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << "P=" << GetParam() << "\n" << test::describeAll(statuses);
}

// Default sizes, blocks of several rounds each. Where the host's ranks
// outnumber its cores (P >= 3 on two cores) the slot is wider than a chunk
// and all_to_all moves a chunk per peer and round: every round, and the
// short last one of each block, must land at the right offset. Block sizes
// differ per pair and values per position, so a misplaced round shows.
TEST_P(CollShm, AllToAllOfSeveralRoundsPerBlock) {
  test::JobOptions o;
  o.bound = 150s;
  auto statuses = test::runWorld(GetParam(), o, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    const auto p = static_cast<size_t>(e.size);
    const auto me = static_cast<size_t>(e.rank);
    // Elements from rank `from` to rank `to`: 2.5 default chunks and more.
    auto count = [](size_t from, size_t to) {
      return static_cast<int64_t>((5 * 512 * 1024 / 2 + 4096 * (from + 2 * to) + 12) / 4);
    };
    auto value = [](size_t from, size_t to, int64_t i) {
      return static_cast<float>((from * 31 + to * 7 + static_cast<size_t>(i)) % 100003);
    };
    std::vector<int64_t> sendCounts(p), recvCounts(p);
    int64_t sendTotal = 0, recvTotal = 0;
    for (size_t j = 0; j < p; ++j) {
      sendCounts[j] = count(me, j);
      recvCounts[j] = count(j, me);
      sendTotal += sendCounts[j];
      recvTotal += recvCounts[j];
    }
    std::vector<float> in(static_cast<size_t>(sendTotal));
    std::vector<float> out(static_cast<size_t>(recvTotal));
    for (size_t j = 0, at = 0; j < p; ++j) {
      for (int64_t i = 0; i < sendCounts[j]; ++i) in[at++] = value(me, j, i);
    }
    for (int call = 0; call < 2; ++call) {
      std::fill(out.begin(), out.end(), -1.0f);
      CHILD_CHECK(pg.allToAllSingle(TensorRef{out.data(), recvTotal, DType::kFloat32},
                                    TensorRef{in.data(), sendTotal, DType::kFloat32}, recvCounts,
                                    sendCounts)
                      ->wait(60s));
      for (size_t j = 0, at = 0; j < p; ++j) {
        for (int64_t i = 0; i < recvCounts[j]; ++i, ++at) {
          CHILD_CHECK(out[at] == value(j, me, i), "call " << call << ", block from rank " << j
                                                          << ", element " << i << ": " << out[at]);
        }
      }
    }
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << "P=" << GetParam() << "\n" << test::describeAll(statuses);
}

INSTANTIATE_TEST_SUITE_P(Coll, CollShm, ::testing::Values(2, 3, 4, 5, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// ---- in place ------------------------------------------------------------------------

// reduceScatterTensor whose output is this rank's own block of the input,
// and allGatherIntoTensor whose input is its own block of the output (the
// in-place forms NCCL users rely on), on every rank including those whose
// block is not the first: small, and large enough for many rounds.
TEST(CollInPlace, ReduceScatterAndAllGatherOnOwnBlock) {
  for (const char* shm : {"1", "0"}) {
    ScopedEnv env("MESHCOMM_SHM", shm);
    for (int p : {3, 4}) {
      test::JobOptions o;
      o.bound = 60s;
      auto statuses = test::runWorld(p, o, [](RankEnv& e) {
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
        test::Caught c = test::catchError([&] {
          pg.reduceScatterTensor(TensorRef{data.data() + 1, 12 / e.size, DType::kFloat32},
                                 TensorRef{data.data(), 12, DType::kFloat32});
        });
        CHILD_CHECK(c == test::Caught::kInvalidArgument, "partial overlap: " << test::caughtName(c));
        c = test::catchError([&] {
          pg.allToAllSingle(TensorRef{data.data(), 12, DType::kFloat32}, TensorRef{data.data(), 12, DType::kFloat32},
                            {}, {});
        });
        CHILD_CHECK(c == test::Caught::kInvalidArgument, "all_to_all_single in place: " << test::caughtName(c));
        return test::kExitOk;
      });
      EXPECT_TRUE(test::allOk(statuses)) << "MESHCOMM_SHM=" << shm << " P=" << p << "\n"
                                         << test::describeAll(statuses);
    }
  }
}

// ---- emulated hosts: hierarchical algorithms -----------------------------------------

// MESHCOMM_HOST_ID spreads the ranks of this machine over emulated hosts:
// shared memory within each, TCP between their leaders. Placements: blocks
// of two (P=6: three hosts), interleaved (P=5: ranks 0,2,4 and 1,3), and
// one lone rank on a host of its own (P=4: {0,1,2} and {3}).
struct HostLayout {
  int p;
  const char* name;
  int (*hostOf)(int rank);
};

const HostLayout kHostLayouts[] = {
    {6, "Blocks", [](int r) { return r / 2; }},
    {5, "Interleaved", [](int r) { return r % 2; }},
    {4, "LoneRank", [](int r) { return r == 3 ? 1 : 0; }},
};

class CollHierarchical : public ::testing::TestWithParam<HostLayout> {};

TEST_P(CollHierarchical, EveryCollectiveOnEmulatedHosts) {
  const HostLayout layout = GetParam();
  MatrixSpec spec{std::string("hierarchical ") + layout.name,
                  std::vector<Family>(std::begin(kAllFamilies), std::end(kAllFamilies)), true};
  runMatrixJob(layout.p, spec, {{"MESHCOMM_SHM_SLOT_BYTES", "8192"}}, 150s, [layout](int rank) {
    return std::vector<std::pair<std::string, std::string>>{
        {"MESHCOMM_HOST_ID", "emulated-host-" + std::to_string(layout.hostOf(rank))}};
  });
}

INSTANTIATE_TEST_SUITE_P(Coll, CollHierarchical, ::testing::ValuesIn(kHostLayouts),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- forced algorithms, small pipeline chunks --------------------------------------

// Ring all-reduce, chain broadcast and reduce-scatter+gather reduce, with
// 4 KiB chunks so a 1 MiB message is hundreds of pipelined chunks; the
// reduce-scatter ring shares the chunking.
class CollAlgoRingChain : public ::testing::TestWithParam<int> {};

TEST_P(CollAlgoRingChain, ForcedWithSmallChunks) {
  MatrixSpec spec{"ring/chain/reduce_scatter_gather chunk=4096",
                  {Family::kAllReduce, Family::kBroadcast, Family::kReduce, Family::kReduceScatterTensor,
                   Family::kReduceScatterTensorUneven},
                  true};
  runMatrixJob(GetParam(), spec,
               {{"MESHCOMM_ALGO_ALLREDUCE", "ring"},
                {"MESHCOMM_ALGO_BROADCAST", "chain"},
                {"MESHCOMM_ALGO_REDUCE", "reduce_scatter_gather"},
                {"MESHCOMM_CHUNK_BYTES", "4096"},
                {"MESHCOMM_SHM", "0"}},
               150s);
}

INSTANTIATE_TEST_SUITE_P(Coll, CollAlgoRingChain, ::testing::Values(2, 3, 4, 5, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// Recursive doubling all-reduce (including the non-power-of-two fold-in),
// binomial-tree broadcast and reduce, with a chunk size (6000 bytes) that is
// not a multiple of every element size.
class CollAlgoTree : public ::testing::TestWithParam<int> {};

TEST_P(CollAlgoTree, ForcedRecursiveDoublingAndBinomial) {
  MatrixSpec spec{"recursive_doubling/binomial_tree chunk=6000",
                  {Family::kAllReduce, Family::kBroadcast, Family::kReduce}, true};
  runMatrixJob(GetParam(), spec,
               {{"MESHCOMM_ALGO_ALLREDUCE", "recursive_doubling"},
                {"MESHCOMM_ALGO_BROADCAST", "binomial_tree"},
                {"MESHCOMM_ALGO_REDUCE", "binomial_tree"},
                {"MESHCOMM_CHUNK_BYTES", "6000"},
                {"MESHCOMM_SHM", "0"}},
               150s);
}

INSTANTIATE_TEST_SUITE_P(Coll, CollAlgoTree, ::testing::Values(2, 3, 5, 6, 8),
                         [](const auto& info) { return "P" + std::to_string(info.param); });

// The MESHCOMM_ALGO_* variables are read in the children at the first call
// and checked against the algorithms of their collective: a name that exists
// but belongs to another collective is refused, so a typo in the forced
// runs above cannot silently fall back to the default choice.
TEST(CollAlgoEnv, AlgorithmOfAnotherCollectiveIsRefused) {
  test::JobOptions o;
  o.bound = 30s;
  o.env = {{"MESHCOMM_ALGO_ALLREDUCE", "chain"}, {"MESHCOMM_ALGO_BROADCAST", "ring"},
           {"MESHCOMM_ALGO_REDUCE", "recursive_doubling"}};
  auto statuses = test::runWorld(2, o, [](RankEnv& e) {
    std::vector<float> x(8, 1.0f);
    TensorRef t{x.data(), 8, DType::kFloat32};
    std::string what;
    CHILD_CHECK(test::catchError([&] { e.pg().allReduce(t); }, &what) == test::Caught::kInvalidArgument);
    CHILD_CHECK(what.find("MESHCOMM_ALGO_ALLREDUCE") != std::string::npos, "" << what);
    CHILD_CHECK(test::catchError([&] { e.pg().broadcast(t); }) == test::Caught::kInvalidArgument);
    CHILD_CHECK(test::catchError([&] { e.pg().reduce(t); }) == test::Caught::kInvalidArgument);
    // Nothing was queued, so the group still works.
    std::vector<float> gathered(16, 0.0f);
    TensorRef all{gathered.data(), 16, DType::kFloat32};
    e.pg().allGatherIntoTensor(all, t)->wait();
    CHILD_CHECK(gathered[15] == 1.0f);
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << test::describeAll(statuses);
}

// ---- many operations in flight -----------------------------------------------------

// 16 all-reduces (different dtypes, ops and sizes) issued without waiting,
// plus a broadcast and an all-gather among them, then waited for in a
// scrambled order; every result must be right.
TEST(CollAsync, SixteenAllReducesInFlightWaitedOutOfOrder) {
  for (int p : {4, 8}) {
    test::JobOptions o;
    o.bound = 60s;
    auto statuses = test::runWorld(p, o, [](RankEnv& e) {
      ProcessGroup& pg = e.pg();
      const auto all = test::ranksUpTo(e.size);
      for (int round = 0; round < 3; ++round) {
        struct Item {
          DType d;
          ReduceOp op;
          int64_t n;
          uint64_t salt;
          Buffer buf;
          WorkPtr work;
        };
        std::vector<Item> items;
        for (int k = 0; k < 16; ++k) {
          DType d = test::kAllDTypes[static_cast<size_t>(k * 7 + round) % 13];
          ReduceOp op = test::kAllOps[static_cast<size_t>(k + round) % 4];
          int64_t n = (k % 4 == 3) ? 70001 : 1 + k * 37;  // some large enough for the ring
          uint64_t salt = 1000 + static_cast<uint64_t>(round * 100 + k);
          items.push_back(Item{d, op, n, salt, Buffer(d, n), nullptr});
          test::fillInput(d, test::domainOf(op), salt, e.rank, 0, static_cast<size_t>(n), items.back().buf.data());
        }
        // A broadcast and an all-gather queued in the middle of them.
        Buffer bc(DType::kFloat64, 5000);
        if (e.rank == 1) test::fillInput(DType::kFloat64, Domain::kRaw, 77, 1, 0, 5000, bc.data());
        Buffer agIn(DType::kInt32, 333);
        test::fillInput(DType::kInt32, Domain::kRaw, 78, e.rank, 0, 333, agIn.data());
        Buffer agOut(DType::kInt32, 333 * e.size);
        WorkPtr bcWork, agWork;
        for (size_t k = 0; k < items.size(); ++k) {
          OpOptions opt;
          opt.op = items[k].op;
          items[k].work = pg.allReduce(items[k].buf.ref(), opt);
          if (k == 5) {
            OpOptions b;
            b.root = 1;
            bcWork = pg.broadcast(bc.ref(), b);
          }
          if (k == 9) agWork = pg.allGatherIntoTensor(agOut.ref(), agIn.ref());
        }
        // Wait in a scrambled order: last first, then odd, then even.
        std::vector<size_t> order;
        order.push_back(15);
        for (size_t k = 1; k < 15; k += 2) order.push_back(k);
        for (size_t k = 0; k < 15; k += 2) order.push_back(k);
        agWork->wait();
        for (size_t k : order) {
          Item& it = items[k];
          CHILD_CHECK(it.work->wait(30s), "allReduce #" << k << " did not finish");
          CHILD_CHECK(!it.work->failed());
          Buffer want(it.d, it.n);
          test::fillReduced(it.d, it.op, it.salt, all, 0, static_cast<size_t>(it.n), want.data());
          std::string diff = test::firstDifference(it.d, it.buf.data(), want.data(), static_cast<size_t>(it.n));
          CHILD_CHECK(diff.empty(), "in-flight allReduce #" << k << " " << dtypeName(it.d) << " "
                                                            << reduceOpName(it.op) << ": " << diff);
        }
        bcWork->wait();
        Buffer bcWant(DType::kFloat64, 5000);
        test::fillInput(DType::kFloat64, Domain::kRaw, 77, 1, 0, 5000, bcWant.data());
        CHILD_CHECK(test::firstDifference(DType::kFloat64, bc.data(), bcWant.data(), 5000).empty());
        for (int r = 0; r < e.size; ++r) {
          Buffer w(DType::kInt32, 333);
          test::fillInput(DType::kInt32, Domain::kRaw, 78, r, 0, 333, w.data());
          CHILD_CHECK(test::firstDifference(DType::kInt32, agOut.data() + r * 333 * 4, w.data(), 333).empty());
        }
        // Every Work stays completed and can be waited on again.
        for (auto& it : items) CHILD_CHECK(it.work->isCompleted() && it.work->wait(0ms));
      }
      return test::kExitOk;
    });
    EXPECT_TRUE(test::allOk(statuses)) << "P=" << p << "\n" << test::describeAll(statuses);
  }
}

// Consecutive asynchronous operations on one buffer: a group runs its
// operations in issue order, so a chain of in-place all-reduces waited for
// in reverse order is exact.
TEST(CollAsync, ChainedInPlaceOperationsKeepIssueOrder) {
  test::JobOptions o;
  o.bound = 60s;
  auto statuses = test::runWorld(3, o, [](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    // x starts at rank+1; after k sum all-reduces it is (sum of rank+1) * P^(k-1).
    std::vector<int64_t> x(1000, e.rank + 1);
    std::vector<WorkPtr> works;
    for (int k = 0; k < 10; ++k) works.push_back(pg.allReduce(TensorRef{x.data(), 1000, DType::kInt64}));
    for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
    int64_t want = 6;  // 1 + 2 + 3
    for (int k = 1; k < 10; ++k) want *= 3;
    for (int64_t v : x) CHILD_CHECK(v == want, "got " << v << " want " << want);
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << test::describeAll(statuses);
}

// ---- ranks that disagree -------------------------------------------------------------

struct MismatchCase {
  const char* name;
  // The call each rank makes; `odd` marks the rank that disagrees.
  std::function<WorkPtr(ProcessGroup&, bool odd, std::vector<uint8_t>& storage)> call;
  // A rank that receives nothing the odd rank sent (a broadcast root, a
  // leaf fed by a healthy parent) cannot see the disagreement: its
  // transfers complete. It must then fail on its next call instead, with
  // the same Mismatch.
  bool someRanksMayFinish = false;
  // What the message of the rank that sees the disagreement says.
  const char* message = "not running the same operation";
};

void runMismatch(int p, int oddRank, const MismatchCase& c) {
  test::JobOptions o;
  o.bound = 40s;
  o.timeout = 30s;  // far above the bound checked below, so a Timeout cannot pass for a Mismatch
  auto statuses = test::runWorld(p, o, [&](RankEnv& e) {
    ProcessGroup& pg = e.pg();
    // A correct collective first, so connections exist for some pairs.
    int32_t warm = 1;
    pg.allReduce(TensorRef{&warm, 1, DType::kInt32})->wait();
    CHILD_CHECK(warm == e.size);
    std::vector<uint8_t> storage;
    std::string what;
    const uint64_t t0 = test::monoNowNs();
    test::Caught got = test::catchError([&] { c.call(pg, e.rank == oddRank, storage)->wait(); }, &what);
    if (got == test::Caught::kNone && c.someRanksMayFinish) {
      got = test::catchError([&] { pg.barrier()->wait(); }, &what);
    }
    const double ms = test::msBetween(t0, test::monoNowNs());
    CHILD_CHECK(got == test::Caught::kMismatch, "" << c.name << ": rank " << e.rank << " got " << test::caughtName(got)
                                                       << " (" << what << ")");
    CHILD_CHECK(ms < 5000, "" << c.name << ": rank " << e.rank << " took " << ms << " ms to fail");
    CHILD_CHECK(what.find(c.message) != std::string::npos,
                "" << c.name << ": unclear message on rank " << e.rank << ": " << what);
    // The group is broken now: the next call fails at once.
    const uint64_t t1 = test::monoNowNs();
    test::Caught again = test::catchError([&] { pg.barrier()->wait(); });
    CHILD_CHECK(again == test::Caught::kMismatch, "after the mismatch: " << test::caughtName(again));
    CHILD_CHECK(test::msBetween(t1, test::monoNowNs()) < 500);
    return test::kExitOk;
  });
  EXPECT_TRUE(test::allOk(statuses)) << c.name << " P=" << p << "\n" << test::describeAll(statuses);
}

std::vector<MismatchCase> mismatchCases() {
  auto tensor = [](std::vector<uint8_t>& s, DType d, int64_t n) {
    s.assign(static_cast<size_t>(n) * dtypeSize(d), 1);
    return TensorRef{s.data(), n, d};
  };
  // The odd rank expects one byte more from the rank before it than that
  // rank sends (same signature, sizes differ). `block` picks the path:
  // 4 bytes travel in the flag line, 40 in the size's line of the slot,
  // 1 MiB in rounds after it.
  auto allToAllSizes = [](int64_t block) {
    return [block](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
      const int p = pg.size();
      std::vector<int64_t> sendCounts(static_cast<size_t>(p), block);
      std::vector<int64_t> recvCounts = sendCounts;
      if (odd) recvCounts[static_cast<size_t>((pg.rank() + p - 1) % p)] += 1;
      static std::vector<uint8_t> in;
      in.assign(static_cast<size_t>(block * p), 7);
      int64_t total = 0;
      for (int64_t c : recvCounts) total += c;
      s.assign(static_cast<size_t>(total), 0);
      return pg.allToAllSingle(TensorRef{s.data(), total, DType::kUInt8},
                               TensorRef{in.data(), block * p, DType::kUInt8}, recvCounts, sendCounts);
    };
  };
  return {
      {"allToAllSingle tiny sizes", allToAllSizes(4), true, "bytes to this rank"},
      {"allToAllSingle small sizes", allToAllSizes(40), true, "bytes to this rank"},
      {"allToAllSingle large sizes", allToAllSizes(1 << 20), true, "bytes to this rank"},
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
         // Either side of the recursive-doubling/ring threshold (64 KiB, or
         // 1 MiB on two ranks): the two schedules never use the same step.
         const int64_t rd = pg.size() > 2 ? 16000 : 262000;
         const int64_t ring = pg.size() > 2 ? 16500 : 262200;
         return pg.allReduce(tensor(s, DType::kFloat32, odd ? ring : rd));
       }},
      {"broadcast count", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         return pg.broadcast(tensor(s, DType::kUInt8, odd ? 10 : 12));
       }, true},
      {"broadcast root", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         // The odd rank believes it is the root too: both roots finish at
         // once, and the disagreement shows in the next call.
         OpOptions o;
         o.root = odd ? pg.rank() : 0;
         return pg.broadcast(tensor(s, DType::kUInt8, 16), o);
       }, true},
      {"allReduce vs allGather", [tensor](ProcessGroup& pg, bool odd, std::vector<uint8_t>& s) {
         if (!odd) return pg.allReduce(tensor(s, DType::kInt64, 8));
         s.assign(8 * 8 * static_cast<size_t>(pg.size()), 0);
         static std::vector<int64_t> in(8, 1);
         return pg.allGatherIntoTensor(TensorRef{s.data(), 8 * pg.size(), DType::kInt64},
                                 TensorRef{in.data(), 8, DType::kInt64});
       }},
  };
}

TEST(CollMismatch, EveryRankFailsPromptly) {
  for (const auto& c : mismatchCases()) {
    runMismatch(2, 1, c);
    runMismatch(4, 2, c);
  }
  runMismatch(8, 5, mismatchCases()[0]);
}

}  // namespace
}  // namespace meshcomm
