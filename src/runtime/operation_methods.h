// The ProcessGroup method of every operation of the table
// (collectives/operations.h) and the arguments it takes before its
// OpOptions, listed once. The fronts read it: the Python binding binds each
// method under its operation's name, converting each argument by its kind;
// meshcomm-bench issues each operation it measures with arguments made the
// same way from its buffers. Adding an operation adds one line here, and
// neither front changes.
//
// Thread-safety: types only.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "collectives/operations.h"
#include "meshcomm/process_group.h"

namespace meshcomm {

// What a method takes before its OpOptions, in order. Each front decides
// how to make each kind.
namespace argument {
struct Data {};        // one tensor, read and written in place
struct Sent {};        // one tensor, read (send)
struct Output {};      // the tensor written
struct Input {};       // the tensor read
struct Outputs {};     // one tensor written per rank
struct Inputs {};      // one tensor read per rank
struct Splits {};      // the larger tensor's elements per rank (the uneven forms)
struct RecvSplits {};  // the output's elements from each rank (empty: equal)
struct SendSplits {};  // the input's elements to each rank (empty: equal)
struct Dst {};         // the group rank sent to
struct Src {};         // the group rank received from
struct P2POps {};      // a batch of sends and receives
}  // namespace argument

template <Operation kOp, auto kMethod, class... Arguments>
struct OperationMethod {
  static constexpr Operation kOperation = kOp;
  static constexpr auto kPointer = kMethod;
  using ArgumentKinds = std::tuple<Arguments...>;
};

namespace operation_methods_detail {
using O = Operation;
using P = ProcessGroup;
using namespace argument;
using All = std::tuple<
    OperationMethod<O::kAllReduce, &P::allReduce, Data>,
    OperationMethod<O::kBroadcast, &P::broadcast, Data>,
    OperationMethod<O::kReduce, &P::reduce, Data>,
    OperationMethod<O::kAllGather, &P::allGather, Outputs, Input>,
    OperationMethod<O::kAllGatherIntoTensor, &P::allGatherIntoTensor, Output, Input>,
    OperationMethod<O::kAllGatherIntoTensorUneven, &P::allGatherIntoTensorUneven, Output, Input,
                    Splits>,
    OperationMethod<O::kReduceScatter, &P::reduceScatter, Output, Inputs>,
    OperationMethod<O::kReduceScatterTensor, &P::reduceScatterTensor, Output, Input>,
    OperationMethod<O::kReduceScatterTensorUneven, &P::reduceScatterTensorUneven, Output, Input,
                    Splits>,
    OperationMethod<O::kGather, &P::gather, Outputs, Input>,
    OperationMethod<O::kGatherIntoTensor, &P::gatherIntoTensor, Output, Input>,
    OperationMethod<O::kScatter, &P::scatter, Output, Inputs>,
    OperationMethod<O::kScatterTensor, &P::scatterTensor, Output, Input>,
    OperationMethod<O::kAllToAll, &P::allToAll, Outputs, Inputs>,
    OperationMethod<O::kAllToAllSingle, &P::allToAllSingle, Output, Input, RecvSplits,
                    SendSplits>,
    OperationMethod<O::kBarrier, &P::barrier>,
    OperationMethod<O::kSend, &P::send, Sent, Dst>,
    OperationMethod<O::kRecv, &P::recv, Data, Src>,
    OperationMethod<O::kBatchIsendIrecv, &P::batchIsendIrecv, P2POps>>;

template <class Kinds>
struct TakesSplits;
template <class... Kinds>
struct TakesSplits<std::tuple<Kinds...>> {
  static constexpr bool value = ((std::is_same_v<Kinds, Splits> ||
                                  std::is_same_v<Kinds, RecvSplits> ||
                                  std::is_same_v<Kinds, SendSplits>) || ...);
};

// Every operation, in the table's order, each taking split sizes exactly
// when the table says so.
template <size_t... I>
constexpr bool matchesTable(std::index_sequence<I...>) {
  return sizeof...(I) == kOperations.size() &&
         ((std::tuple_element_t<I, All>::kOperation == kOperations[I].operation &&
           TakesSplits<typename std::tuple_element_t<I, All>::ArgumentKinds>::value ==
               kOperations[I].splitSizes) &&
          ...);
}
static_assert(matchesTable(std::make_index_sequence<std::tuple_size_v<All>>()),
              "OperationMethods must list every operation of the table, in its order, taking "
              "split sizes exactly when the table says so");
}  // namespace operation_methods_detail

using OperationMethods = operation_methods_detail::All;

// Calls f.template operator()<M>() for each OperationMethod M, in order.
template <class F>
void forEachOperationMethod(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    (f.template operator()<std::tuple_element_t<I, OperationMethods>>(), ...);
  }(std::make_index_sequence<std::tuple_size_v<OperationMethods>>());
}

}  // namespace meshcomm
