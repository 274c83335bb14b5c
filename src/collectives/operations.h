// The operations meshcomm offers, listed once: each one's name (the
// Python spelling, also used in error messages), the wire family its
// messages carry, the arguments it takes beyond its tensors, and how its
// buffers relate to one rank's block. The runtime's checks and error
// messages, the Python binding, the benchmark (its sizes and its check of
// every output) and the test matrix read this table instead of keeping
// lists of their own; the C++ methods are the same words in lowerCamel
// (all_gather_into_tensor is ProcessGroup::allGatherIntoTensor).
//
// Thread-safety: constant data and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace meshcomm {

// The wire family of an operation, carried in every message's signature
// (MessageSignature::opcode) so a receiver can tell which operation its peer
// is running. The values are on the wire: never renumber them.
enum class Opcode : uint8_t {
  kAllReduce = 1,
  kBroadcast = 2,
  kReduce = 3,
  kAllGather = 4,
  kReduceScatter = 5,
  kGather = 6,
  kScatter = 7,
  kAllToAll = 8,
  kBarrier = 9,
  kPointToPoint = 10,
};

// Every public operation, in the order of kOperations.
enum class Operation : uint8_t {
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
  kBarrier,
  kSend,
  kRecv,
  kBatchIsendIrecv,
};

// Whether an operation has a root rank, and what its callers call it: the
// rank that sends (src) or the rank that receives (dst).
enum class Root : uint8_t { kNone, kSrc, kDst };

// How an operation's buffers relate to one rank's block of data, which
// decides how a benchmark sizes them (nccl-tests' conventions, see
// tools/bench/ops.h) and what each output must hold afterwards.
enum class Layout : uint8_t {
  kNone,       // moves no data (barrier)
  kWhole,      // one buffer of the whole count on every rank (all_reduce, send)
  kGathers,    // one block in, one block per rank out (all_gather, gather)
  kScatters,   // one block per rank in, one block out (reduce_scatter, scatter)
  kExchanges,  // one block per rank in and out (all_to_all)
};

struct OperationInfo {
  Operation operation;
  const char* name;           // "all_gather_into_tensor": the Python function
  Opcode family;              // what its messages carry
  bool reduces = false;       // takes a reduction op
  Root root = Root::kNone;    // takes a root, called src or dst
  bool splitSizes = false;    // takes per-rank split sizes
  // The split sizes every rank passes alike, as the user names them
  // ("output_split_sizes"); nullptr where each rank passes its own (the
  // exchanges', which must match pairwise: exchangesSplits()).
  const char* splitsName = nullptr;
  bool tagged = false;        // takes a point-to-point tag
  Layout layout = Layout::kNone;
  // Under this name meshcomm-bench measures the operation (nccl-tests'
  // name where it has one); nullptr where it does not. Only forms whose
  // buffers are whole tensors are measured: a list form moves the same
  // bytes as its tensor form.
  const char* benchName = nullptr;

  constexpr bool rooted() const { return root != Root::kNone; }
  // Whether each rank passes its own split tables, what it sends to each
  // rank and expects from each (all_to_all_single): they must match
  // pairwise, not be equal.
  constexpr bool exchangesSplits() const { return splitSizes && layout == Layout::kExchanges; }
  // "src" or "dst"; REQUIRES: rooted().
  constexpr const char* rootName() const { return root == Root::kSrc ? "src" : "dst"; }
};

inline constexpr std::array kOperations = {
    OperationInfo{.operation = Operation::kAllReduce, .name = "all_reduce",
                  .family = Opcode::kAllReduce, .reduces = true,
                  .layout = Layout::kWhole, .benchName = "all_reduce"},
    OperationInfo{.operation = Operation::kBroadcast, .name = "broadcast",
                  .family = Opcode::kBroadcast, .root = Root::kSrc,
                  .layout = Layout::kWhole, .benchName = "broadcast"},
    OperationInfo{.operation = Operation::kReduce, .name = "reduce",
                  .family = Opcode::kReduce, .reduces = true, .root = Root::kDst,
                  .layout = Layout::kWhole, .benchName = "reduce"},
    OperationInfo{.operation = Operation::kAllGather, .name = "all_gather",
                  .family = Opcode::kAllGather,
                  .layout = Layout::kGathers},
    OperationInfo{.operation = Operation::kAllGatherIntoTensor, .name = "all_gather_into_tensor",
                  .family = Opcode::kAllGather,
                  .layout = Layout::kGathers, .benchName = "all_gather"},
    OperationInfo{.operation = Operation::kAllGatherIntoTensorUneven,
                  .name = "all_gather_into_tensor_uneven",
                  .family = Opcode::kAllGather, .splitSizes = true,
                  .splitsName = "output_split_sizes",
                  .layout = Layout::kGathers, .benchName = "all_gather_uneven"},
    OperationInfo{.operation = Operation::kReduceScatter, .name = "reduce_scatter",
                  .family = Opcode::kReduceScatter, .reduces = true,
                  .layout = Layout::kScatters},
    OperationInfo{.operation = Operation::kReduceScatterTensor, .name = "reduce_scatter_tensor",
                  .family = Opcode::kReduceScatter, .reduces = true,
                  .layout = Layout::kScatters, .benchName = "reduce_scatter"},
    OperationInfo{.operation = Operation::kReduceScatterTensorUneven,
                  .name = "reduce_scatter_tensor_uneven",
                  .family = Opcode::kReduceScatter, .reduces = true, .splitSizes = true,
                  .splitsName = "input_split_sizes",
                  .layout = Layout::kScatters, .benchName = "reduce_scatter_uneven"},
    OperationInfo{.operation = Operation::kGather, .name = "gather",
                  .family = Opcode::kGather, .root = Root::kDst,
                  .layout = Layout::kGathers},
    OperationInfo{.operation = Operation::kGatherIntoTensor, .name = "gather_into_tensor",
                  .family = Opcode::kGather, .root = Root::kDst,
                  .layout = Layout::kGathers, .benchName = "gather"},
    OperationInfo{.operation = Operation::kScatter, .name = "scatter",
                  .family = Opcode::kScatter, .root = Root::kSrc,
                  .layout = Layout::kScatters},
    OperationInfo{.operation = Operation::kScatterTensor, .name = "scatter_tensor",
                  .family = Opcode::kScatter, .root = Root::kSrc,
                  .layout = Layout::kScatters, .benchName = "scatter"},
    OperationInfo{.operation = Operation::kAllToAll, .name = "all_to_all",
                  .family = Opcode::kAllToAll,
                  .layout = Layout::kExchanges},
    OperationInfo{.operation = Operation::kAllToAllSingle, .name = "all_to_all_single",
                  .family = Opcode::kAllToAll, .splitSizes = true,
                  .layout = Layout::kExchanges, .benchName = "all_to_all"},
    OperationInfo{.operation = Operation::kBarrier, .name = "barrier",
                  .family = Opcode::kBarrier,
                  .layout = Layout::kNone, .benchName = "barrier"},
    OperationInfo{.operation = Operation::kSend, .name = "send",
                  .family = Opcode::kPointToPoint, .tagged = true,
                  .layout = Layout::kWhole},
    OperationInfo{.operation = Operation::kRecv, .name = "recv",
                  .family = Opcode::kPointToPoint, .tagged = true,
                  .layout = Layout::kWhole},
    OperationInfo{.operation = Operation::kBatchIsendIrecv, .name = "batch_isend_irecv",
                  .family = Opcode::kPointToPoint,
                  .layout = Layout::kWhole, .benchName = "sendrecv"},
};

// Every entry sits at its enumerator's index, so lookups are an index.
constexpr bool operationsInEnumOrder() {
  for (size_t i = 0; i < kOperations.size(); ++i) {
    if (static_cast<size_t>(kOperations[i].operation) != i) return false;
  }
  return true;
}
static_assert(operationsInEnumOrder(), "kOperations must list the operations in enum order");

// An operation with split sizes either names the ones every rank passes
// alike or exchanges its own.
constexpr bool splitSizesDescribed() {
  for (const auto& info : kOperations) {
    if (info.splitSizes != (info.splitsName != nullptr || info.exchangesSplits())) return false;
  }
  return true;
}
static_assert(splitSizesDescribed(), "every operation with split sizes needs a splitsName");
static_assert(kOperations.back().operation == Operation::kBatchIsendIrecv,
              "kOperations must list every operation");

constexpr const OperationInfo& operationInfo(Operation op) {
  return kOperations[static_cast<size_t>(op)];
}
constexpr const char* operationName(Operation op) { return operationInfo(op).name; }

// The operation called `name` (Python spelling), or nullptr.
constexpr const OperationInfo* findOperation(std::string_view name) {
  for (const auto& info : kOperations) {
    if (name == info.name) return &info;
  }
  return nullptr;
}

// What a wire family's messages carry, as the union of its operations'
// arguments: whether the signature's reduceOp is meaningful, whether its
// detail is a root, and whether a non-zero detail is a digest of split sizes.
struct FamilyTraits {
  bool reduces = false;
  bool rooted = false;
  bool splitSizes = false;
};
constexpr FamilyTraits familyTraits(uint8_t opcode) {
  FamilyTraits t;
  for (const auto& info : kOperations) {
    if (static_cast<uint8_t>(info.family) != opcode) continue;
    t.reduces = t.reduces || info.reduces;
    t.rooted = t.rooted || info.rooted();
    t.splitSizes = t.splitSizes || info.splitSizes;
  }
  return t;
}

// The name of a wire family ("all_gather" for every all_gather variant,
// "send/recv" for point to point), or "unknown" for a value no family has.
const char* opcodeName(uint8_t opcode);

struct MessageSignature;  // transport/transport.h

// "all_reduce float32 sum, 1024 elements, message of 4096 bytes": a
// signature as error messages name it, with the fields its family uses.
// `bytes` is kNoMessageBytes when there is no message size to name.
std::string describeSignature(const MessageSignature& sig, uint64_t bytes);

}  // namespace meshcomm
