// meshcomm-bench's --check has teeth: for every operation the bench lists
// (read from the operation table), an output the collective never wrote
// fails the check, and sizes follow the table's layout.
#include <gtest/gtest.h>

#include "ops.h"

namespace meshcomm::bench {
namespace {

constexpr int kRanks = 3;
constexpr int kRoot = 0;

TEST(BenchChecks, AnUnwrittenOutputFails) {
  for (const CollectiveInfo& info : allCollectives()) {
    if (operationInfo(info.operation).layout == Layout::kNone) continue;  // nothing to check
    SCOPED_TRACE(info.name);
    // A rank whose output the collective writes: the root of a call that
    // gathers or reduces into it, another rank of one that sends from it.
    const int rank = operationInfo(info.operation).root == Root::kDst ? kRoot : 1;
    const Shape shape = shapeFor(info, 4096, DType::kFloat32, kRanks, rank, kRoot);
    Slots slots(shape, DType::kFloat32, info.inPlace, 1);
    const ValueClass cls = ValueClass::kSum;
    prepareCheck(info, slots, cls, rank, kRoot);
    // No collective runs: the output holds poison or this rank's own input.
    CheckResult result =
        verify(info, slots, cls, ReduceOp::kSum, rank, kRanks, kRoot);
    EXPECT_GT(result.wrong, 0);
  }
}

TEST(BenchChecks, ShapesFollowTheLayout) {
  const auto shape = [](const char* name, int rank) {
    return shapeFor(*findCollective(name), 3 * 4096, DType::kFloat32, kRanks, rank, kRoot);
  };
  EXPECT_EQ(shape("all_reduce", 1).sendCount, 3 * 1024);
  EXPECT_DOUBLE_EQ(shape("all_reduce", 1).busFactor, 2.0 * 2 / 3);
  EXPECT_DOUBLE_EQ(shape("broadcast", 1).busFactor, 1.0);
  EXPECT_EQ(shape("all_gather", 1).sendCount, 1024);
  EXPECT_EQ(shape("all_gather", 1).recvCount, 3 * 1024);
  EXPECT_EQ(shape("reduce_scatter", 1).sendCount, 3 * 1024);
  EXPECT_EQ(shape("reduce_scatter", 1).recvCount, 1024);
  EXPECT_EQ(shape("all_to_all", 1).recvCount, 3 * 1024);
  EXPECT_EQ(shape("gather", 1).recvCount, 0);  // only the root gathers
  EXPECT_EQ(shape("gather", kRoot).recvCount, 3 * 1024);
  EXPECT_EQ(shape("scatter", 1).sendCount, 0);  // only the root sends
  EXPECT_EQ(shape("barrier", 1).sendCount, 0);
  EXPECT_EQ(findCollective("sendrecv")->minRanks, 2);
  EXPECT_FALSE(findCollective("sendrecv")->inPlace);
  EXPECT_TRUE(findCollective("reduce")->inPlace);
}

}  // namespace
}  // namespace meshcomm::bench
