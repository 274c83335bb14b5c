// reduce_scatter's public operations as they are issued (the form:
// all_reduce/call.h): from a list, from one tensor, and from one tensor in
// blocks of per-rank sizes.
#pragma once

#include <cstring>
#include <utility>

#include "collectives/agreement.h"
#include "collectives/call_checks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto reduceScatter(const CallSite& site, TensorRef output, const std::vector<TensorRef>& inputs,
                   ReduceOp op, Issue&& issue) {
  CallChecks call(Operation::kReduceScatter, site);
  call.tensor(output, "output");
  call.reduceOp(op, output.dtype);
  call.matchingList(inputs, output, "the input list", "input", "output");
  // The algorithms read one contiguous input: the list is packed into one
  // when the call runs.
  return issue(call.name(), call.signature(output.dtype, output.numel, 0, op),
               call.algorithm(output.bytes() * inputs.size()), [output, inputs, op](Comm& c) {
                 uint8_t* packed = c.scratch(Scratch::kPacked, output.bytes() * inputs.size());
                 for (size_t i = 0; i < inputs.size(); ++i) {
                   if (output.bytes() > 0) {
                     std::memcpy(packed + i * output.bytes(), inputs[i].data, output.bytes());
                   }
                 }
                 const BlockCounts counts(inputs.size(), static_cast<size_t>(output.numel));
                 collectives::reduceScatter(c, packed, counts, output.data, output.dtype, op);
               });
}

template <class Issue>
auto reduceScatterTensor(const CallSite& site, TensorRef output, TensorRef input, ReduceOp op,
                         Issue&& issue) {
  CallChecks call(Operation::kReduceScatterTensor, site);
  call.tensor(output, "output");
  call.equalShape(input, "input", output, "output");
  call.reduceOp(op, output.dtype);
  call.apartOrOwnBlock(output, input, output.numel * site.rank, "output", "input");
  BlockCounts counts(static_cast<size_t>(site.size), static_cast<size_t>(output.numel));
  return issue(call.name(), call.signature(output.dtype, output.numel, 0, op),
               call.algorithm(input.bytes()),
               [output, input, counts = std::move(counts), op](Comm& c) {
                 collectives::reduceScatter(c, input.data, counts, output.data, output.dtype, op);
               });
}

// The input's split sizes must agree across ranks: they travel in the
// signature (a digest) and in the records (agreement.h).
template <class Issue>
auto reduceScatterTensorUneven(const CallSite& site, TensorRef output, TensorRef input,
                               const std::vector<int64_t>& counts, ReduceOp op, Issue&& issue) {
  CallChecks call(Operation::kReduceScatterTensorUneven, site);
  call.unevenShare(output, "output", input, "input", counts, "input_split_sizes");
  call.reduceOp(op, output.dtype);
  BlockCounts sizes(counts.size());
  std::copy(counts.begin(), counts.end(), sizes.begin());
  const auto total = static_cast<uint64_t>(input.numel);
  CallArguments args = call.arguments(output.dtype, total, op, -1);
  args.splits = Counts(counts);
  return issue(call.name(), call.signature(output.dtype, total, splitsDigest(counts), op),
               call.algorithm(input.bytes()),
               [output, input, sizes = std::move(sizes), op, args = std::move(args)](Comm& c) {
                 agreeAndReduceScatter(c, args, input.data, sizes, output.data, output.dtype, op);
               });
}

}  // namespace meshcomm::collectives::calls
