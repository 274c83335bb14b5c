// all_reduce as the public operation issues it: its argument rules, its
// signature and algorithm, and the body that runs it.
//
// Each family's call.h has this form: a function per operation of the
// family that checks its arguments, then hands `issue` the operation's
// name, its signature, its algorithm and its body (a callable on Comm&),
// returning what `issue` returns. The runtime's issue queues the body or
// runs it at once (runtime/group.h); the checks throw before it is called.
#pragma once

#include "collectives/call_checks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto allReduce(const CallSite& site, TensorRef data, ReduceOp op, Issue&& issue) {
  CallChecks call(Operation::kAllReduce, site);
  call.tensor(data, "tensor");
  call.reduceOp(op, data.dtype);
  return issue(call.name(), call.signature(data.dtype, data.numel, 0, op),
               call.algorithm(data.bytes()), [data, op](Comm& c) {
                 collectives::allReduce(c, data.data, static_cast<size_t>(data.numel), data.dtype,
                                        op);
               });
}

}  // namespace meshcomm::collectives::calls
