// reduce as the public operation issues it (the form: all_reduce/call.h).
#pragma once

#include "collectives/agreement.h"
#include "collectives/call_checks.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto reduce(const CallSite& site, TensorRef data, ReduceOp op, int root, Issue&& issue) {
  CallChecks call(Operation::kReduce, site);
  call.tensor(data, "tensor");
  call.root(root);
  call.reduceOp(op, data.dtype);
  return issue(call.name(), call.signature(data.dtype, data.numel, root, op),
               call.algorithm(data.bytes()),
               [data, op, root, args = call.arguments(data.dtype, data.numel, op, root)](Comm& c) {
                 agreeAndReduce(c, args, data.data, static_cast<size_t>(data.numel), data.dtype,
                                op, root);
               });
}

}  // namespace meshcomm::collectives::calls
