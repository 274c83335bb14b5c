// Many operations in flight at once, on every transport: asynchronous
// collectives issued without waiting, then waited for out of order. A
// group runs its operations in issue order (like a stream), so every
// result must be exact however the waits are ordered.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "collective_harness.h"
#include "transport_cases.h"

namespace meshcomm::test {
namespace {

using namespace std::chrono_literals;

// 16 all-reduces (different dtypes, ops and sizes) issued without waiting,
// plus a broadcast and an all-gather among them, then waited for in a
// scrambled order; every result must be right.
int sixteenAllReducesWaitedOutOfOrder(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  const auto all = ranksUpTo(e.size);
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
      DType d = kAllDTypes[static_cast<size_t>(k * 7 + round) % 13];
      ReduceOp op = kAllOps[static_cast<size_t>(k + round) % 4];
      int64_t n = (k % 4 == 3) ? 70001 : 1 + k * 37;  // some large enough for the ring
      uint64_t salt = 1000 + static_cast<uint64_t>(round * 100 + k);
      items.push_back(Item{d, op, n, salt, Buffer(d, n), nullptr});
      fillInput(d, domainOf(op), salt, e.rank, 0, static_cast<size_t>(n), items.back().buf.data());
    }
    // A broadcast and an all-gather queued in the middle of them.
    Buffer bc(DType::kFloat64, 5000);
    if (e.rank == 1) fillInput(DType::kFloat64, Domain::kRaw, 77, 1, 0, 5000, bc.data());
    Buffer agIn(DType::kInt32, 333);
    fillInput(DType::kInt32, Domain::kRaw, 78, e.rank, 0, 333, agIn.data());
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
      fillReduced(it.d, it.op, it.salt, all, 0, static_cast<size_t>(it.n), want.data());
      std::string diff = firstDifference(it.d, it.buf.data(), want.data(), static_cast<size_t>(it.n));
      CHILD_CHECK(diff.empty(), "in-flight allReduce #" << k << " " << dtypeName(it.d) << " "
                                                        << reduceOpName(it.op) << ": " << diff);
    }
    bcWork->wait();
    Buffer bcWant(DType::kFloat64, 5000);
    fillInput(DType::kFloat64, Domain::kRaw, 77, 1, 0, 5000, bcWant.data());
    CHILD_CHECK(firstDifference(DType::kFloat64, bc.data(), bcWant.data(), 5000).empty());
    for (int r = 0; r < e.size; ++r) {
      Buffer w(DType::kInt32, 333);
      fillInput(DType::kInt32, Domain::kRaw, 78, r, 0, 333, w.data());
      CHILD_CHECK(firstDifference(DType::kInt32, agOut.data() + r * 333 * 4, w.data(), 333).empty());
    }
    // Every Work stays completed and can be waited on again.
    for (auto& it : items) CHILD_CHECK(it.work->isCompleted() && it.work->wait(0ms));
  }
  return kExitOk;
}

// Consecutive asynchronous operations on one buffer: a chain of in-place
// all-reduces waited for in reverse order is exact only if they ran in
// issue order.
int chainedInPlaceAllReduces(RankEnv& e) {
  ProcessGroup& pg = e.pg();
  // x starts at rank+1; after k sum all-reduces it is (sum of rank+1) * P^(k-1).
  std::vector<int64_t> x(1000, e.rank + 1);
  std::vector<WorkPtr> works;
  for (int k = 0; k < 10; ++k) works.push_back(pg.allReduce(TensorRef{x.data(), 1000, DType::kInt64}));
  for (auto it = works.rbegin(); it != works.rend(); ++it) (*it)->wait();
  int64_t want = int64_t{e.size} * (e.size + 1) / 2;
  for (int k = 1; k < 10; ++k) want *= e.size;
  for (int64_t v : x) CHILD_CHECK(v == want, "got " << v << " want " << want);
  return kExitOk;
}

class InFlight : public ::testing::TestWithParam<TransportCase> {
 protected:
  void run(const RankBody& body) {
    JobOptions o;
    o.bound = 60s;
    expectJobOk(GetParam(), o, body);
  }
};

TEST_P(InFlight, SixteenAllReducesWaitedOutOfOrder) { run(sixteenAllReducesWaitedOutOfOrder); }

TEST_P(InFlight, ChainedInPlaceOperationsKeepIssueOrder) { run(chainedInPlaceAllReduces); }

INSTANTIATE_TEST_SUITE_P(Conformance, InFlight,
                         ::testing::Values(shmCase(3), shmCase(8), tcpCase(4), kHierarchical2x2),
                         TransportCaseName{});

}  // namespace
}  // namespace meshcomm::test
