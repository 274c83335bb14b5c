// barrier as the public operation issues it (the form: all_reduce/call.h).
#pragma once

#include "collectives/call_checks.h"
#include "collectives/collectives.h"

namespace meshcomm::collectives::calls {

template <class Issue>
auto barrier(const CallSite& site, Issue&& issue) {
  CallChecks call(Operation::kBarrier, site);
  return issue(call.name(), call.signature(DType::kUInt8, 0), call.algorithm(),
               [](Comm& c) { collectives::barrier(c); });
}

}  // namespace meshcomm::collectives::calls
