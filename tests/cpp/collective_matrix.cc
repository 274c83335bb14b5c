#include "collective_matrix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace meshcomm::test {
namespace {

std::string familyName(Family f) {
  const std::string name = operationName(f.op);
  return f.withCounts ? name + "(counts)" : name;
}

bool takesOp(Family f) { return operationInfo(f.op).reduces; }

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

// The tensors of a list of buffers, for the list forms of the collectives.
std::vector<TensorRef> refsOf(std::vector<Buffer>& buffers) {
  std::vector<TensorRef> refs;
  for (auto& b : buffers) refs.push_back(b.ref());
  return refs;
}

// Runs the matrix inside one rank. Every rank runs the same loops, so the
// sequence of collectives (and the salts) agree.
class MatrixRunner {
 public:
  explicit MatrixRunner(RankEnv& env)
      : env_(env), pg_(env.pg()), rank_(env.rank), p_(env.size), all_(ranksUpTo(env.size)) {}

  void runAll(const MatrixSpec& spec) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<int64_t> smallSizes = {0, 1, 7, 1024};
    for (int pass = 0; pass < (spec.withLarge ? 5 : 4); ++pass) {
      const bool large = pass == 4;
      for (DType d : kAllDTypes) {
        const int64_t n = large ? largeCount(d) : smallSizes[static_cast<size_t>(pass)];
        for (Family f : spec.families) {
          if (takesOp(f)) {
            for (ReduceOp op : kAllOps) {
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
      canonicalizeComplexZeros(d, const_cast<void*>(got), n);
      canonicalizeComplexZeros(d, const_cast<void*>(want), n);
    }
    std::string diff = firstDifference(d, got, want, n);
    CHILD_CHECK(diff.empty(), "rank " << rank_ << "/" << p_ << " " << ctx_ << " " << what << ": " << diff);
  }

  void expectGuard(const Buffer& b) {
    CHILD_CHECK(b.bytes.back() == 0xA5, "rank " << rank_ << " " << ctx_ << ": wrote past the end");
  }

  Buffer input(DType d, Domain dom, int who, int64_t first, int64_t n) {
    Buffer b(d, n);
    fillInput(d, dom, salt_, who, static_cast<size_t>(first), static_cast<size_t>(n), b.data());
    return b;
  }

  void expectInput(const char* what, const Buffer& got, size_t gotOffset, Domain dom, int who,
                   int64_t first, int64_t n) {
    Buffer want = input(got.dtype, dom, who, first, n);
    expectSame(what, got.dtype, got.bytes.data() + gotOffset * dtypeSize(got.dtype), want.data(),
               static_cast<size_t>(n));
  }

  // A gather's result: every rank's m input elements, outs[r] rank r's (the
  // list forms) or block r of `out` (the tensor forms).
  void expectGathered(const std::vector<Buffer>& outs, Domain dom, int64_t m) {
    for (int r = 0; r < p_; ++r) {
      expectInput("outputs[r]", outs[static_cast<size_t>(r)], 0, dom, r, 0, m);
      expectGuard(outs[static_cast<size_t>(r)]);
    }
  }
  void expectGathered(const Buffer& out, Domain dom, int64_t m) {
    for (int r = 0; r < p_; ++r) expectInput("block r", out, static_cast<size_t>(r * m), dom, r, 0, m);
    expectGuard(out);
  }

  void expectReduced(const char* what, const Buffer& got, size_t gotOffset, ReduceOp op,
                     int64_t first, int64_t n) {
    Buffer want(got.dtype, n);
    fillReduced(got.dtype, op, salt_, all_, static_cast<size_t>(first), static_cast<size_t>(n),
                      want.data());
    expectSame(what, got.dtype, got.bytes.data() + gotOffset * dtypeSize(got.dtype), want.data(),
               static_cast<size_t>(n));
  }

  // all_to_all_single with split sizes that differ per pair of ranks.
  void allToAllSingleWithCounts(DType d, Domain dom, int64_t m) {
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
  }

  void runOne(Family f, DType d, ReduceOp op, int64_t n, bool large) {
    ++salt_;
    const int root = static_cast<int>(salt_ % static_cast<uint64_t>(p_));
    const Domain dom = takesOp(f) ? domainOf(op) : Domain::kRaw;
    const int64_t m = blockCount(n, large, p_);
    complexProd_ = takesOp(f) && op == ReduceOp::kProd && (d == DType::kComplex64 || d == DType::kComplex128);
    ctx_ = familyName(f) + " " + dtypeName(d) + (takesOp(f) ? std::string(" ") + reduceOpName(op) : "") +
           " n=" + std::to_string(n) + " root=" + std::to_string(root);
    switch (f.op) {
      case Operation::kAllReduce: {
        Buffer b = input(d, dom, rank_, 0, n);
        finish(pg_.allReduce(b.ref(), options(op)));
        expectReduced("result", b, 0, op, 0, n);
        expectGuard(b);
        break;
      }
      case Operation::kBroadcast: {
        Buffer b = rank_ == root ? input(d, dom, root, 0, n) : Buffer(d, n);
        finish(pg_.broadcast(b.ref(), options(op, root)));
        expectInput("result", b, 0, dom, root, 0, n);
        expectGuard(b);
        break;
      }
      case Operation::kReduce: {
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
      case Operation::kAllGather: {
        Buffer in = input(d, dom, rank_, 0, m);
        std::vector<Buffer> outs;
        for (int r = 0; r < p_; ++r) outs.emplace_back(d, m);
        finish(pg_.allGather(refsOf(outs), in.ref(), options()));
        expectGathered(outs, dom, m);
        break;
      }
      case Operation::kAllGatherIntoTensor: {
        Buffer in = input(d, dom, rank_, 0, m);
        Buffer out(d, m * p_);
        finish(pg_.allGatherIntoTensor(out.ref(), in.ref(), options()));
        expectGathered(out, dom, m);
        break;
      }
      case Operation::kAllGatherIntoTensorUneven: {
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
      case Operation::kReduceScatter: {
        std::vector<Buffer> ins;
        for (int j = 0; j < p_; ++j) ins.push_back(input(d, dom, rank_, j * m, m));
        Buffer out(d, m);
        finish(pg_.reduceScatter(out.ref(), refsOf(ins), options(op)));
        expectReduced("result", out, 0, op, rank_ * m, m);
        expectGuard(out);
        for (int j = 0; j < p_; ++j) {
          expectInput("input (must be untouched)", ins[static_cast<size_t>(j)], 0, dom, rank_, j * m, m);
        }
        break;
      }
      case Operation::kReduceScatterTensor: {
        Buffer in = input(d, dom, rank_, 0, m * p_);
        Buffer out(d, m);
        finish(pg_.reduceScatterTensor(out.ref(), in.ref(), options(op)));
        expectReduced("result", out, 0, op, rank_ * m, m);
        expectGuard(out);
        expectInput("input (must be untouched)", in, 0, dom, rank_, 0, m * p_);
        break;
      }
      case Operation::kReduceScatterTensorUneven: {
        auto counts = unevenCounts(m, p_);
        auto offs = prefix(counts);
        Buffer in = input(d, dom, rank_, 0, offs.back());
        Buffer out(d, counts[static_cast<size_t>(rank_)]);
        finish(pg_.reduceScatterTensorUneven(out.ref(), in.ref(), counts, options(op)));
        expectReduced("result", out, 0, op, offs[static_cast<size_t>(rank_)], counts[static_cast<size_t>(rank_)]);
        expectGuard(out);
        break;
      }
      case Operation::kGather: {
        Buffer in = input(d, dom, rank_, 0, m);
        std::vector<Buffer> outs;  // none but at the root
        if (rank_ == root) {
          for (int r = 0; r < p_; ++r) outs.emplace_back(d, m);
        }
        finish(pg_.gather(refsOf(outs), in.ref(), options(op, root)));
        if (rank_ == root) expectGathered(outs, dom, m);
        break;
      }
      case Operation::kGatherIntoTensor: {
        Buffer in = input(d, dom, rank_, 0, m);
        Buffer out = rank_ == root ? Buffer(d, m * p_) : Buffer();
        finish(pg_.gatherIntoTensor(rank_ == root ? out.ref() : TensorRef{}, in.ref(), options(op, root)));
        if (rank_ == root) expectGathered(out, dom, m);
        break;
      }
      case Operation::kScatter: {
        std::vector<Buffer> ins;  // none but at the root
        if (rank_ == root) {
          for (int j = 0; j < p_; ++j) ins.push_back(input(d, dom, root, j * m, m));
        }
        Buffer out(d, m);
        finish(pg_.scatter(out.ref(), refsOf(ins), options(op, root)));
        expectInput("result", out, 0, dom, root, rank_ * m, m);
        expectGuard(out);
        break;
      }
      case Operation::kScatterTensor: {
        Buffer in = rank_ == root ? input(d, dom, root, 0, m * p_) : Buffer();
        Buffer out(d, m);
        finish(pg_.scatterTensor(out.ref(), rank_ == root ? in.ref() : TensorRef{}, options(op, root)));
        expectInput("result", out, 0, dom, root, rank_ * m, m);
        expectGuard(out);
        break;
      }
      case Operation::kAllToAll: {
        // Rank i's conceptual input is the concatenation of its messages
        // to ranks 0..P-1 (pairCount(m, i, j) elements each).
        auto sendOffsets = [&](int i) {
          std::vector<int64_t> c;
          for (int j = 0; j < p_; ++j) c.push_back(pairCount(m, i, j));
          return prefix(c);
        };
        auto mine = sendOffsets(rank_);
        std::vector<Buffer> ins, outs;
        for (int j = 0; j < p_; ++j) {
          ins.push_back(input(d, dom, rank_, mine[static_cast<size_t>(j)], pairCount(m, rank_, j)));
          outs.emplace_back(d, pairCount(m, j, rank_));
        }
        finish(pg_.allToAll(refsOf(outs), refsOf(ins), options()));
        for (int i = 0; i < p_; ++i) {
          auto theirs = sendOffsets(i);
          expectInput("outputs[i]", outs[static_cast<size_t>(i)], 0, dom, i, theirs[static_cast<size_t>(rank_)],
                      pairCount(m, i, rank_));
          expectGuard(outs[static_cast<size_t>(i)]);
        }
        break;
      }
      case Operation::kAllToAllSingle: {
        if (f.withCounts) {
          allToAllSingleWithCounts(d, dom, m);
          break;
        }
        Buffer in = input(d, dom, rank_, 0, m * p_);
        Buffer out(d, m * p_);
        finish(pg_.allToAllSingle(out.ref(), in.ref(), {}, {}, options()));
        for (int i = 0; i < p_; ++i) {
          expectInput("block i", out, static_cast<size_t>(i * m), dom, i, rank_ * m, m);
        }
        expectGuard(out);
        break;
      }
      case Operation::kBarrier:
      case Operation::kSend:
      case Operation::kRecv:
      case Operation::kBatchIsendIrecv:
        ADD_FAILURE() << familyName(f) << ": the matrix has no check for it (collective_matrix.cc)";
        break;
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

}  // namespace

void runMatrixJob(int p, const MatrixSpec& spec, const JobOptions& options) {
  auto statuses = runWorld(p, options, [&spec](RankEnv& e) {
    MatrixRunner runner(e);
    runner.runAll(spec);
    return kExitOk;
  });
  EXPECT_TRUE(allOk(statuses)) << spec.label << " P=" << p << "\n" << describeAll(statuses);
}

}  // namespace meshcomm::test
