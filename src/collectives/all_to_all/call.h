// all_to_all's public operations as they are issued (the form:
// all_reduce/call.h): between lists of tensors, and between two tensors
// in blocks of per-rank sizes (all_to_all_single).
#pragma once

#include <string>
#include <utility>

#include "collectives/agreement.h"
#include "collectives/call_checks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto allToAll(const CallSite& site, const std::vector<TensorRef>& outputs,
              const std::vector<TensorRef>& inputs, Issue&& issue) {
  CallChecks call(Operation::kAllToAll, site);
  call.listSize(outputs.size(), "the output list");
  call.listSize(inputs.size(), "the input list");
  for (size_t i = 0; i < inputs.size(); ++i) {
    call.tensor(inputs[i], "input");
    call.tensor(outputs[i], "output");
    call.sameDtype(inputs[i], inputs[0], "input");
    call.sameDtype(outputs[i], inputs[0], "output", "input");
  }
  const DType dtype = inputs.empty() ? DType::kUInt8 : inputs[0].dtype;
  BlockList sends = blocksOf(inputs);
  BlockList recvs = blocksOf(outputs);
  call.apart(recvs, sends);
  return issue(call.name(), call.signature(dtype, 0), call.algorithm(),
               [sends = std::move(sends), recvs = std::move(recvs)](Comm& c) {
                 collectives::allToAll(c, sends, recvs);
               });
}

// Without split sizes, each tensor divides evenly among the ranks. The
// split tables must agree across ranks (what one sends, the other expects):
// they travel in the records (agreement.h).
template <class Issue>
auto allToAllSingle(const CallSite& site, TensorRef output, TensorRef input,
                    const std::vector<int64_t>& recvCounts, const std::vector<int64_t>& sendCounts,
                    Issue&& issue) {
  CallChecks call(Operation::kAllToAllSingle, site);
  call.tensor(output, "output");
  call.tensor(input, "input");
  call.sameDtype(output, input, "output", "input");
  auto split = [&](const std::vector<int64_t>& given, TensorRef t, const char* name) {
    if (!given.empty()) {
      call.counts(given, t.numel, name);
      return Counts(given);
    }
    if (t.numel % site.size != 0) {
      call.fail(std::string("without ") + name + ", the " + std::to_string(t.numel) +
                " elements must divide evenly among " + std::to_string(site.size) + " ranks");
    }
    return Counts(static_cast<size_t>(site.size), t.numel / site.size);
  };
  CallArguments args = call.arguments(input.dtype, 0, ReduceOp::kSum, -1);
  args.sendSplits = split(sendCounts, input, "input_split_sizes");
  args.recvSplits = split(recvCounts, output, "output_split_sizes");
  BlockList sends = blocksOf(input, args.sendSplits);
  BlockList recvs = blocksOf(output, args.recvSplits);
  call.apart(Block{static_cast<uint8_t*>(output.data), output.bytes()},
             Block{static_cast<uint8_t*>(input.data), input.bytes()});
  return issue(call.name(), call.signature(input.dtype, 0), call.algorithm(),
               [sends = std::move(sends), recvs = std::move(recvs),
                args = std::move(args)](Comm& c) { agreeAndAllToAll(c, args, sends, recvs); });
}

}  // namespace meshcomm::collectives::calls
