// broadcast as the public operation issues it (the form: all_reduce/call.h).
#pragma once

#include "collectives/agreement.h"
#include "collectives/call_checks.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto broadcast(const CallSite& site, TensorRef data, int root, Issue&& issue) {
  CallChecks call(Operation::kBroadcast, site);
  call.tensor(data, "tensor");
  call.root(root);
  return issue(call.name(), call.signature(data.dtype, data.numel, root),
               call.algorithm(data.bytes()),
               [data, root, args = call.arguments(data.dtype, data.numel, ReduceOp::kSum, root)](
                   Comm& c) { agreeAndBroadcast(c, args, data.data, data.bytes(), root); });
}

}  // namespace meshcomm::collectives::calls
