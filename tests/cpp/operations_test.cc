// The operation table (collectives/operations.h): its wire families keep
// their values, its flags agree with what each operation takes, and error
// messages name a signature with exactly the fields its family uses.
#include <gtest/gtest.h>

#include <string>

#include "collectives/operations.h"
#include "meshcomm/types.h"
#include "transport/transport.h"

namespace meshcomm {
namespace {

MessageSignature sig(Opcode family, DType dtype, uint64_t count, uint64_t detail = 0,
                     ReduceOp op = ReduceOp::kSum) {
  return MessageSignature{static_cast<uint8_t>(family), static_cast<uint8_t>(dtype),
                          static_cast<uint8_t>(op), count, detail};
}

TEST(Operations, LookupByNameAndIndex) {
  for (const OperationInfo& info : kOperations) {
    EXPECT_EQ(&operationInfo(info.operation), &info);
    EXPECT_EQ(findOperation(info.name), &info);
  }
  EXPECT_EQ(findOperation("all_gather_into"), nullptr);
  EXPECT_STREQ(operationName(Operation::kAllGatherIntoTensorUneven), "all_gather_into_tensor_uneven");
  EXPECT_STREQ(operationName(Operation::kBatchIsendIrecv), "batch_isend_irecv");
}

TEST(Operations, FlagsSayWhatEachOperationTakes) {
  EXPECT_TRUE(operationInfo(Operation::kReduceScatterTensorUneven).reduces);
  EXPECT_TRUE(operationInfo(Operation::kReduceScatterTensorUneven).splitSizes);
  EXPECT_FALSE(operationInfo(Operation::kAllGather).reduces);
  EXPECT_STREQ(operationInfo(Operation::kBroadcast).rootName(), "src");
  EXPECT_STREQ(operationInfo(Operation::kScatterTensor).rootName(), "src");
  EXPECT_STREQ(operationInfo(Operation::kReduce).rootName(), "dst");
  EXPECT_STREQ(operationInfo(Operation::kGatherIntoTensor).rootName(), "dst");
  EXPECT_FALSE(operationInfo(Operation::kSend).rooted());
  EXPECT_TRUE(operationInfo(Operation::kRecv).tagged);
  EXPECT_FALSE(operationInfo(Operation::kBatchIsendIrecv).tagged);
}

TEST(Operations, WireFamiliesKeepTheirValuesAndNames) {
  EXPECT_EQ(static_cast<int>(Opcode::kAllReduce), 1);
  EXPECT_EQ(static_cast<int>(Opcode::kPointToPoint), 10);
  EXPECT_EQ(operationInfo(Operation::kAllToAllSingle).family, Opcode::kAllToAll);
  EXPECT_STREQ(opcodeName(static_cast<uint8_t>(Opcode::kAllGather)), "all_gather");
  EXPECT_STREQ(opcodeName(static_cast<uint8_t>(Opcode::kReduceScatter)), "reduce_scatter");
  EXPECT_STREQ(opcodeName(static_cast<uint8_t>(Opcode::kPointToPoint)), "send/recv");
  EXPECT_STREQ(opcodeName(0), "unknown");
  EXPECT_STREQ(opcodeName(11), "unknown");
}

TEST(Operations, DescribeSignatureNamesTheFieldsItsFamilyUses) {
  EXPECT_EQ(describeSignature(sig(Opcode::kAllReduce, DType::kFloat32, 1024, 0, ReduceOp::kMax), 4096),
            "all_reduce float32 max, 1024 elements, message of 4096 bytes");
  // A root, not a reduce op.
  EXPECT_EQ(describeSignature(sig(Opcode::kBroadcast, DType::kInt64, 8, 3), kNoMessageBytes),
            "broadcast int64, 8 elements, root 3");
  EXPECT_EQ(describeSignature(sig(Opcode::kReduce, DType::kFloat64, 2, 1, ReduceOp::kProd),
                              kNoMessageBytes),
            "reduce float64 prod, 2 elements, root 1");
  // A digest of split sizes, only when there is one.
  EXPECT_EQ(describeSignature(sig(Opcode::kAllGather, DType::kUInt8, 5, 0xab), kNoMessageBytes),
            "all_gather uint8, 5 elements, split sizes #ab");
  EXPECT_EQ(describeSignature(sig(Opcode::kAllGather, DType::kUInt8, 5), kNoMessageBytes),
            "all_gather uint8, 5 elements");
  EXPECT_EQ(describeSignature(sig(Opcode::kPointToPoint, DType::kInt32, 7), 28),
            "send/recv int32, 7 elements, message of 28 bytes");
}

}  // namespace
}  // namespace meshcomm
