// broadcast's hierarchical variant, declared for its entry point
// (broadcast.cc). On one host, the domain's broadcast (host_collectives.h).
//
// Thread-safety: run by the group's executor, one at a time.
#pragma once

#include <cstddef>

#include "collectives/comm.h"

namespace meshcomm::collectives {

namespace hierarchical {
// hierarchical.cc. REQUIRES: comm.route() == Route::kHierarchical.
void broadcast(Comm& comm, void* data, size_t bytes, int root);
}  // namespace hierarchical

}  // namespace meshcomm::collectives
