// reduce's hierarchical variant, declared for its entry point (reduce.cc).
// On one host, the domain's reduce (host_collectives.h).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"
#include "meshcomm/types.h"

namespace meshcomm::collectives {

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void reduce(Comm& comm, void* data, size_t count, DType dtype, ReduceOp op, int root);
}  // namespace hierarchical

}  // namespace meshcomm::collectives
