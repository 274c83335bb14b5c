// all_gather's public operations as they are issued (the form:
// all_reduce/call.h): into a list, into one tensor, and into one tensor
// in blocks of per-rank sizes.
#pragma once

#include <utility>

#include "collectives/agreement.h"
#include "collectives/call_checks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto allGather(const CallSite& site, const std::vector<TensorRef>& outputs, TensorRef input,
               Issue&& issue) {
  CallChecks call(Operation::kAllGather, site);
  call.tensor(input, "input");
  call.matchingList(outputs, input, "the output list", "output", "input");
  BlockList blocks = blocksOf(outputs);
  const Algorithm algorithm = call.algorithm(totalBytes(blocks));
  return issue(call.name(), call.signature(input.dtype, input.numel), algorithm,
               [input, blocks = std::move(blocks)](Comm& c) {
                 collectives::allGather(c, input.data, input.bytes(), blocks);
               });
}

template <class Issue>
auto allGatherIntoTensor(const CallSite& site, TensorRef output, TensorRef input, Issue&& issue) {
  CallChecks call(Operation::kAllGatherIntoTensor, site);
  call.tensor(input, "input");
  BlockList blocks = call.equalBlocks(output, "output", input, "input");
  call.apartOrOwnBlock(input, output, input.numel * site.rank, "input", "output");
  const Algorithm algorithm = call.algorithm(output.bytes());
  return issue(call.name(), call.signature(input.dtype, input.numel), algorithm,
               [input, blocks = std::move(blocks)](Comm& c) {
                 collectives::allGather(c, input.data, input.bytes(), blocks);
               });
}

// The output's split sizes must agree across ranks: they travel in the
// signature (a digest) and in the records (agreement.h).
template <class Issue>
auto allGatherIntoTensorUneven(const CallSite& site, TensorRef output, TensorRef input,
                               const std::vector<int64_t>& counts, Issue&& issue) {
  CallChecks call(Operation::kAllGatherIntoTensorUneven, site);
  call.unevenShare(input, "input", output, "output", counts, "output_split_sizes");
  BlockList blocks = blocksOf(output, counts);
  const auto total = static_cast<uint64_t>(output.numel);
  CallArguments args = call.arguments(input.dtype, total, ReduceOp::kSum, -1);
  args.splits = Counts(counts);
  const Algorithm algorithm = call.algorithm(totalBytes(blocks));
  return issue(call.name(), call.signature(input.dtype, total, splitsDigest(counts)), algorithm,
               [input, blocks = std::move(blocks), args = std::move(args)](Comm& c) {
                 agreeAndAllGather(c, args, input.data, input.bytes(), blocks);
               });
}

}  // namespace meshcomm::collectives::calls
