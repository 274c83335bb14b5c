// all_reduce's hierarchical variant, declared for its entry point
// (all_reduce.cc). On one host, the domain's all_reduce (host_collectives.h).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "meshcomm/types.h"

namespace meshcomm::collectives {

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void allReduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op);
}  // namespace hierarchical

}  // namespace meshcomm::collectives
